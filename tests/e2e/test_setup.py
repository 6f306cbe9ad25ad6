"""``mnemograph setup``: each client's own file, written in its real format, and three real client sessions
started from what was written sharing one memory."""

from __future__ import annotations

import json
import os
import shlex
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from server.settings import login_scope
from tests.e2e.conftest import HEADERS, INITIALIZE, MNEMOGRAPH, Store, call, http_server

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

# What these files look like on a real machine: other servers, and (for Claude Code) much else.
DESKTOP = {
    "mcpServers": {
        "filesystem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/x"]}
    },
    "globalShortcut": "Alt+Space",
}
CLAUDE_JSON = {
    "numStartups": 12,
    "installMethod": "npm",
    "projects": {"/home/ana/site": {"allowedTools": [], "mcpServers": {}, "hasTrustDialogAccepted": True}},
    "mcpServers": {"github": {"type": "http", "url": "https://api.githubcopilot.com/mcp/", "headers": {}}},
}
CURSOR = {"mcpServers": {"linear": {"url": "https://mcp.linear.app/sse"}}}
VSCODE_JSONC = """{
  // Added by hand
  "inputs": [{"type": "promptString", "id": "key", "description": "API key", "password": true}],
  "servers": {
    "fetch": {"type": "stdio", "command": "uvx", "args": ["mcp-server-fetch"],},
  },
}
"""


class Home:
    """A home directory for the clients' files, and ``mnemograph`` run with it."""

    def __init__(self, root: Path, store: Store) -> None:
        self.root = root
        self.store = store
        self.desktop = root / ".config" / "Claude" / "claude_desktop_config.json"
        self.claude = root / ".claude.json"
        self.cursor = root / ".cursor" / "mcp.json"
        self.vscode = root / ".config" / "Code" / "User" / "mcp.json"

    def seed(self) -> None:
        for path, text in (
            (self.desktop, json.dumps(DESKTOP)),
            (self.claude, json.dumps(CLAUDE_JSON)),
            (self.cursor, json.dumps(CURSOR)),
            (self.vscode, VSCODE_JSONC),
        ):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        self.claude.chmod(0o600)

    async def run(self, *args: str, data_dir: bool = True) -> tuple[int, str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "MNEMOGRAPH_"))}
        env |= {"HOME": str(self.root), **self.store.env()}
        argv = [MNEMOGRAPH, *args, *(("--data-dir", str(self.store.data_dir)) if data_dir else ())]
        done = await anyio.run_process(argv, env=env, check=False)
        return done.returncode, done.stdout.decode(), done.stderr.decode()


def _backups(path: Path) -> list[Path]:
    return sorted(path.parent.glob(f"{path.name}.*.bak"))


def _servers(path: Path, key: str = "mcpServers") -> dict[str, Any]:
    servers: dict[str, Any] = json.loads(path.read_text())[key]
    return servers


@asynccontextmanager
async def _session(entry: dict[str, Any], store: Store) -> AsyncIterator[Client]:
    """A real stdio client session started exactly as the client would start the entry."""
    assert os.path.isabs(entry["command"]), "clients do not inherit PATH: the command must be absolute"
    # Only the test's own settings are added: a short idle timeout (no owner outlives the run), the checkout.
    env = {**entry.get("env", {}), **store.env()}
    params = StdioServerParameters(command=entry["command"], args=entry["args"], env=env)
    async with Client(params, mode="legacy") as client:
        yield client


async def test_three_clients_set_up_by_setup_share_one_memory(store: Store, tmp_path: Path) -> None:
    home = Home(tmp_path / "home", store)
    home.seed()
    before = {p: p.read_bytes() for p in (home.desktop, home.claude, home.cursor, home.vscode)}
    for client in ("claude-desktop", "claude-code", "cursor", "vscode"):
        status, _, err = await home.run("setup", client)
        assert status == 0, err

    # Each file keeps what it held, with the new entry in the client's own shape, and a backup of the old one.
    desktop = json.loads(home.desktop.read_text())
    assert desktop["globalShortcut"] == "Alt+Space"
    assert desktop["mcpServers"]["filesystem"] == DESKTOP["mcpServers"]["filesystem"]  # type: ignore[index]
    claude = json.loads(home.claude.read_text())
    assert {k: claude[k] for k in ("numStartups", "installMethod", "projects")} == {
        k: CLAUDE_JSON[k] for k in ("numStartups", "installMethod", "projects")
    }
    assert claude["mcpServers"]["github"] == CLAUDE_JSON["mcpServers"]["github"]  # type: ignore[index]
    assert claude["mcpServers"]["mnemograph"]["type"] == "stdio"
    assert stat.S_IMODE(home.claude.stat().st_mode) == 0o600, "Claude Code's private file stays private"
    assert _servers(home.cursor)["linear"] == CURSOR["mcpServers"]["linear"]
    vscode = json.loads(home.vscode.read_text())
    assert vscode["inputs"][0]["id"] == "key"
    assert vscode["servers"]["fetch"]["command"] == "uvx"
    assert vscode["servers"]["mnemograph"]["type"] == "stdio"
    for path, old in before.items():
        (backup,) = _backups(path)
        assert backup.read_bytes() == old

    # Run again: nothing changes, no second backup. --print changes nothing and shows the file.
    after = {p: p.read_bytes() for p in before}
    for client in ("claude-desktop", "claude-code", "cursor", "vscode"):
        status, _, err = await home.run("setup", client)
        assert status == 0, err
        assert "already set up" in err
    assert {p: p.read_bytes() for p in before} == after
    assert all(len(_backups(p)) == 1 for p in before)
    status, out, _ = await home.run("setup", "cursor", "--print", "--server-name", "other")
    assert status == 0
    assert "other" in json.loads(out)["mcpServers"]
    assert "other" not in _servers(home.cursor)

    # Three real sessions, started from the written files: a memory written in one is recalled in the others.
    desktop_entry = _servers(home.desktop)["mnemograph"]
    code_entry = _servers(home.claude)["mnemograph"]
    cursor_entry = _servers(home.cursor)["mnemograph"]
    async with (
        _session(desktop_entry, store) as desk,
        _session(code_entry, store) as code,
        _session(cursor_entry, store) as cur,
    ):
        wrote = await call(desk, "memory_write", {"content": "Ana's bike is a green Brompton folding bike."})
        assert wrote["scopes"] == [login_scope(os.environ)]
        for other in (code, cur):
            found = await call(other, "recall", {"query": "what bike does Ana ride", "k": 3})
            assert wrote["id"] in [hit["id"] for hit in found["results"]]
        written = await call(cur, "memory_write", {"content": "The team standup moved to 9:30 on Mondays."})
        found = await call(desk, "recall", {"query": "when is the standup", "k": 3})
        assert written["id"] in [hit["id"] for hit in found["results"]]


async def test_a_project_scope_is_opt_in_and_reads_personal_memory_too(store: Store, tmp_path: Path) -> None:
    home = Home(tmp_path / "home", store)
    project = tmp_path / "website"
    project.mkdir()
    status, _, err = await home.run("setup", "vscode", "--project-dir", str(project), "--project", "website")
    assert status == 0, err
    assert f"inside {login_scope(os.environ)}" in err
    entry = _servers(project / ".vscode" / "mcp.json", "servers")["mnemograph"]
    assert entry["env"]["MNEMOGRAPH_DEFAULT_SCOPE"] == "project:website"
    status, _, err = await home.run("setup", "claude-code")
    assert status == 0, err
    personal_entry = _servers(home.claude)["mnemograph"]
    async with _session(entry, store) as proj, _session(personal_entry, store) as personal:
        mine = await call(
            personal, "memory_write", {"content": "Ana prefers tabs over spaces in every language."}
        )
        theirs = await call(proj, "memory_write", {"content": "The website deploys with Hugo to Netlify."})
        assert theirs["scopes"] == ["project:website"]
        from_project = await call(
            proj, "recall", {"query": "tabs or spaces? how does the website deploy", "k": 5}
        )
        assert {mine["id"], theirs["id"]} <= {hit["id"] for hit in from_project["results"]}
        from_personal = await call(personal, "recall", {"query": "how does the website deploy", "k": 5})
        assert theirs["id"] not in [hit["id"] for hit in from_personal["results"]]


async def test_http_setup_writes_a_token_the_server_accepts(store: Store, tmp_path: Path) -> None:
    home = Home(tmp_path / "home", store)
    home.seed()
    status, _, err = await home.run("setup", "http", "--for", "claude-code")
    assert status == 0, err
    entry = _servers(home.claude)["mnemograph-http"]
    assert (entry["type"], entry["url"]) == ("http", "http://127.0.0.1:8765/mcp")
    assert _servers(home.claude)["github"] == CLAUDE_JSON["mcpServers"]["github"]  # type: ignore[index]
    # Idempotent: the token in the file is still valid with the same grants, so no second one is made.
    status, _, err = await home.run("setup", "http", "--for", "claude-code")
    assert status == 0, err
    assert "nothing to do" in err
    tokens = json.loads((store.data_dir / "tokens.json").read_text())
    assert len(tokens["tokens"] if isinstance(tokens, dict) else tokens) == 1

    # Without --for: the exact `claude mcp add` line, with the header.
    status, out, err = await home.run("setup", "http", "--grant", "user:ana=r")
    assert status == 0, err
    line = next(ln.strip() for ln in out.splitlines() if ln.strip().startswith("claude mcp add"))
    argv = shlex.split(line)
    header = argv[argv.index("--header") + 1]
    assert argv[argv.index("--transport") + 1] == "http"
    assert header.startswith("Authorization: Bearer mg_")

    async with http_server(store, auth=True) as server:
        for headers in (entry["headers"], {"Authorization": header.split(": ", 1)[1]}):
            async with (
                httpx2.AsyncClient(headers=headers) as http,
                Client(streamable_http_client(server.url, http_client=http)) as client,
            ):
                assert (await client.list_tools()).tools
        async with httpx2.AsyncClient() as bare:
            refused = await bare.post(server.url, json=INITIALIZE, headers=HEADERS)
            assert refused.status_code == 401
            assert "resource_metadata" not in refused.headers["www-authenticate"]


async def test_http_setup_sits_beside_the_local_entry_instead_of_replacing_it(
    store: Store, tmp_path: Path
) -> None:
    """README order: `setup claude-code` (local), then `setup http`. The printed `claude mcp add` line must not
    name a server the file already has (Claude Code refuses it: "already exists in user config"), and `--for`
    must not silently turn the local entry into a remote one."""
    home = Home(tmp_path / "home", store)
    home.seed()
    status, _, err = await home.run("setup", "claude-code")
    assert status == 0, err
    local = _servers(home.claude)["mnemograph"]
    status, out, err = await home.run("setup", "http")
    assert status == 0, err
    line = next(ln.strip() for ln in out.splitlines() if ln.strip().startswith("claude mcp add"))
    argv = shlex.split(line)
    name = argv[argv.index("user") + 1]
    assert name not in _servers(home.claude), f"`{line}` would collide with an existing entry"
    assert name == "mnemograph-http"  # what client-configs/claude-code.sh documents
    status, _, err = await home.run("setup", "http", "--for", "claude-code")
    assert status == 0, err
    servers = _servers(home.claude)
    assert servers["mnemograph"] == local  # the local entry is kept
    assert servers["mnemograph-http"]["type"] == "http"
    assert "replaced" not in err
    # Asked to use the local entry's name, it does, and says what it replaced.
    status, _, err = await home.run("setup", "http", "--for", "claude-code", "--server-name", "mnemograph")
    assert status == 0, err
    assert _servers(home.claude)["mnemograph"]["type"] == "http"
    assert "replaced the local (stdio) entry 'mnemograph'" in err


async def test_a_mistyped_project_dir_is_an_error_and_creates_nothing(store: Store, tmp_path: Path) -> None:
    home = Home(tmp_path / "home", store)
    typo = tmp_path / "nope-dir"
    for argv in (("setup", "cursor", "--project-dir", str(typo), "--project", "site"),
                 ("setup", "http", "--for", "vscode", "--project-dir", str(typo))):  # fmt: skip
        status, out, err = await home.run(*argv)
        assert status == 2
        assert f"--project-dir {typo} is not a directory" in err
        assert out == ""
        assert not typo.exists()


async def test_setup_refuses_a_broken_file_and_changes_nothing(store: Store, tmp_path: Path) -> None:
    home = Home(tmp_path / "home", store)
    home.cursor.parent.mkdir(parents=True)
    home.cursor.write_text('{"mcpServers": {"a": ')
    status, _, err = await home.run("setup", "cursor")
    assert status == 2
    assert "is not valid JSON" in err
    assert "fix or move it" in err
    assert home.cursor.read_text() == '{"mcpServers": {"a": '
    assert not _backups(home.cursor)


async def test_a_client_file_that_receives_a_token_is_private_and_so_are_its_backups(
    store: Store, tmp_path: Path
) -> None:
    """attack8 F2: clients create their files 0644; `setup http --for` wrote a live token into such a file and
    kept it (and its backups) readable by every local account, who could then use it on the loopback port."""
    home = Home(tmp_path / "home", store)
    home.seed()
    for path in (home.claude, home.cursor, home.vscode):
        path.chmod(0o644)
    for client, path in (("claude-code", home.claude), ("cursor", home.cursor), ("vscode", home.vscode)):
        for name in (
            "first",
            "second",
        ):  # the second run backs up a file holding the first, still live, token
            status, _, err = await home.run(
                "setup",
                "http",
                "--for",
                client,
                "--grant",
                f"team:{name}=r",
                "--token-name",
                f"{client}-{name}",
            )
            assert status == 0, err
        assert "Bearer mg_" in path.read_text()
        assert path.stat().st_mode & 0o777 == 0o600, path
        backups = _backups(path)
        assert len(backups) == 2
        assert any("Bearer mg_" in b.read_text() for b in backups)
        assert {b.stat().st_mode & 0o777 for b in backups} == {0o600}, backups
    # A file that holds no token keeps its mode: a stdio entry carries no secret.
    home.desktop.chmod(0o644)
    status, _, err = await home.run("setup", "claude-desktop")
    assert status == 0, err
    assert home.desktop.stat().st_mode & 0o777 == 0o644
