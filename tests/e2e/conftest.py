"""Real processes for end-to-end tests: ``mnemograph serve`` over stdio and HTTP, and the owners they start.

Every owner a test starts is stopped (SIGTERM, then waited for) when the test's store fixture ends, and its
runtime directory removed, so no process outlives the test run.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult, TextContent

from server._runtime import RuntimePaths
from server.settings import load_settings

BIN = Path(sys.executable).parent
MNEMOGRAPH = str(BIN / "mnemograph")
IDLE_TIMEOUT = "30"  # owners left behind by a failed test exit on their own soon after


def wait_for(predicate: Callable[[], bool], *, timeout: float, what: str) -> None:
    """Poll ``predicate`` until it holds; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.02)


async def await_for(predicate: Callable[[], bool], *, within: float, what: str) -> None:
    """``wait_for`` for async tests: polls (another process's state, so there is no event) without blocking."""
    with anyio.move_on_after(within):
        while True:
            if predicate():
                return
            await anyio.sleep(0.02)
    pytest.fail(f"timed out after {within:g}s waiting for {what}")


def peak_mib(pid: int) -> float:
    """The peak resident memory (``VmHWM``) of process ``pid`` so far, in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM in /proc")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


# A raw JSON-RPC initialize, for tests that speak HTTP without the SDK client.
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "curl", "version": "1"},
    },
}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@dataclass
class Store:
    """A data directory under test, and how to reach (and stop) its owner."""

    data_dir: Path
    paths: RuntimePaths

    def env(self, **extra: str) -> dict[str, str]:
        """Environment for a front-end process on this store."""
        # PYTHONPATH goes through so that processes started by clients (whose environment the SDK trims) run
        # the code under test, also from a checkout that shadows an installed copy.
        inherited = {k: os.environ[k] for k in ("PYTHONPATH",) if k in os.environ}
        return {"MNEMOGRAPH_IDLE_TIMEOUT": IDLE_TIMEOUT, "MNEMOGRAPH_LOG_LEVEL": "INFO", **inherited, **extra}

    def owner_pid(self) -> int | None:
        try:
            pid: int = json.loads(self.paths.info_file.read_text())["pid"]
        except (FileNotFoundError, ValueError):
            return None
        return pid

    def stdio(self, *, default_scope: str | None = None, data_dir_flag: bool = True) -> StdioServerParameters:
        """Parameters that launch ``mnemograph serve`` (stdio) on this store."""
        args = ["serve", "--data-dir", str(self.data_dir)] if data_dir_flag else ["serve"]
        extra = {"MNEMOGRAPH_DEFAULT_SCOPE": default_scope} if default_scope else {}
        return StdioServerParameters(command=MNEMOGRAPH, args=args, env=self.env(**extra))

    def kill_owner(self, sig: int = signal.SIGKILL) -> int:
        """Kill the running owner; returns its pid once it is gone."""
        pid = self.owner_pid()
        assert pid is not None, "no owner is running"
        os.kill(pid, sig)
        wait_for(lambda: not _alive(pid), timeout=30, what=f"owner {pid} to exit")
        return pid

    def stop_owner(self) -> None:
        pid = self.owner_pid()
        if pid is not None and _alive(pid):
            os.kill(pid, signal.SIGTERM)
            wait_for(lambda: not _alive(pid), timeout=60, what=f"owner {pid} to stop")


def _store(data_dir: Path) -> Iterator[Store]:
    settings = load_settings({}, data_dir=str(data_dir))
    store = Store(settings.data_dir, RuntimePaths.of(settings.runtime_dir, settings.data_dir))
    try:
        yield store
    finally:
        store.stop_owner()
        shutil.rmtree(store.paths.root, ignore_errors=True)  # this store's runtime directory only


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[tuple[Store, Store]]:
    """Two data directories (nodes a and b), each stopped and cleaned up after the test."""
    a, b = _store(tmp_path / "node-a"), _store(tmp_path / "node-b")
    try:
        yield next(a), next(b)
    finally:
        for gen in (a, b):
            gen.close()  # stops the node's owner, removes its runtime directory


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    """A fresh store for one test (its owner starts on first use)."""
    yield from _store(tmp_path / "data")


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """One store (and owner) for every test of a module: tests use their own scopes in it."""
    yield from _store(tmp_path_factory.mktemp("shared") / "data")


class HttpServer:
    """A ``mnemograph serve --transport http`` process; ``--no-auth`` (loopback) unless ``auth``."""

    def __init__(
        self, store: Store, port: int, *extra_args: str, env: dict[str, str] | None = None, auth: bool = False
    ) -> None:
        self.url = f"http://127.0.0.1:{port}/mcp"
        self.base = f"http://127.0.0.1:{port}"
        command = [
            MNEMOGRAPH,
            "serve",
            "--transport",
            "http",
            "--port",
            str(port),
            "--data-dir",
            str(store.data_dir),
        ]
        self.process = subprocess.Popen(
            [*command, *extra_args, *(() if auth else ("--no-auth",))],
            env={**os.environ, **store.env(), **(env or {})},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

    def healthy(self) -> bool:
        if self.process.poll() is not None:
            err = self.process.stderr.read().decode() if self.process.stderr else ""
            pytest.fail(f"the HTTP server exited with {self.process.returncode}: {err[-2000:]}")
        try:
            return httpx2.get(f"{self.base}/healthz", timeout=2).status_code == 200
        except httpx2.HTTPError:
            return False

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stderr:
            self.process.stderr.close()


@asynccontextmanager
async def http_server(
    store: Store, *extra_args: str, env: dict[str, str] | None = None, auth: bool = False
) -> AsyncIterator[HttpServer]:
    """Run the HTTP front on a free port until the block ends; yields once /healthz answers 200.

    Without ``auth`` it runs with ``--no-auth`` (it binds loopback), as the tests of other features need."""
    server = HttpServer(store, free_port(), *extra_args, env=env, auth=auth)
    try:
        await await_for(server.healthy, within=60, what="the HTTP server's /healthz")
        yield server
    finally:
        server.stop()


def error_text(result: CallToolResult) -> str:
    """The sentence an error result gives the model."""
    assert result.is_error, result.structured_content
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Call a tool that must succeed; returns its structured content."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content
