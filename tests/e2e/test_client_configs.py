"""Every file in client-configs/ parses, and the server it names starts and completes an MCP handshake."""

from __future__ import annotations

import json
import os
import shlex
import shutil
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from server.settings import login_scope
from tests.e2e.conftest import BIN, HEADERS, INITIALIZE, Store, call, http_server
from tests.e2e.test_auth import make_token
from tools import ALL_TOOLS

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

CONFIGS = Path(__file__).parents[2] / "client-configs"


def _entries() -> list[tuple[str, dict[str, Any]]]:
    """(file, server entry) for every Mnemograph server the configs define, in a common shape."""
    out: list[tuple[str, dict[str, Any]]] = []
    for path in sorted(CONFIGS.iterdir()):
        if path.suffix == ".json":
            document = json.loads(path.read_text())
            servers = document.get("mcpServers") or document.get("servers")
            assert isinstance(servers, dict), f"{path.name} defines no servers"
            assert servers, f"{path.name} defines no servers"
            out += [(path.name, entry) for entry in servers.values()]
        elif path.suffix == ".sh":
            for line in path.read_text().splitlines():
                text = line.lstrip("# ").strip()
                if text.startswith("claude mcp add"):
                    # A commented line is a variant to opt into; the live line is what the file does.
                    variant = {"variant": True} if line.startswith("#") else {}
                    out.append((path.name, {**_claude_mcp_add(shlex.split(text)), **variant}))
    return out


def _claude_mcp_add(argv: list[str]) -> dict[str, Any]:
    """The server a ``claude mcp add`` line registers: a command after ``--``, or a URL with --transport http
    (and the headers its ``--header`` options send)."""
    if "--" in argv:
        split = argv.index("--")
        options, command = argv[:split], argv[split + 1 :]
        env = dict(options[i + 1].split("=", 1) for i, arg in enumerate(options) if arg == "--env")
        return {"command": command[0], "args": command[1:], "env": env}
    assert argv[argv.index("--transport") + 1] == "http"
    with_value = {"--transport", "--scope", "--env", "--header", "-e", "-H", "-s", "-t"}
    positional = [
        a for i, a in enumerate(argv[3:], 3) if not a.startswith("-") and argv[i - 1] not in with_value
    ]
    headers = dict(
        (k.strip(), v.strip())
        for k, v in (argv[i + 1].split(":", 1) for i, a in enumerate(argv) if a in ("--header", "-H"))
    )
    return {"type": "http", "url": positional[1], "headers": headers}


ENTRIES = _entries()


def test_every_client_has_a_config() -> None:
    names = {name for name, _ in ENTRIES}
    assert names == {
        "claude-desktop.json",
        "claude-code.sh",
        "cursor.mcp.json",
        "vscode.mcp.json",
        "remote-http.json",
    }
    assert any("url" in entry for _, entry in ENTRIES)


@pytest.mark.parametrize(("name", "entry"), ENTRIES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(ENTRIES)])
async def test_the_configured_server_starts_and_answers(
    shared_store: Store, name: str, entry: dict[str, Any]
) -> None:
    if "url" in entry:
        # The documented URL, served by `mnemograph serve --transport http` (on a free port: CI may use 8765),
        # which requires a token: the documented Authorization header, with a real token pasted in, gets in;
        # without it, 401.
        url = urlsplit(entry["url"])
        assert (url.hostname, url.port, url.path) == ("127.0.0.1", 8765, "/mcp")
        assert entry["headers"]["Authorization"].startswith("Bearer PASTE-THE-TOKEN")
        token = await make_token(shared_store, f"configs-{len(name)}-{os.getpid()}", "user:configs=w")
        headers = {"Authorization": f"Bearer {token}"}
        async with http_server(shared_store, auth=True) as server:
            async with (
                httpx2.AsyncClient(headers=headers) as http,
                Client(streamable_http_client(server.url, http_client=http)) as client,
            ):
                assert len((await client.list_tools()).tools) == len(ALL_TOOLS)
            async with httpx2.AsyncClient() as bare:
                assert (await bare.post(server.url, json=INITIALIZE, headers=HEADERS)).status_code == 401
        return
    command = shutil.which(entry["command"], path=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    assert command is not None, f"{name}: {entry['command']!r} is not installed"
    env = {**entry.get("env", {}), **shared_store.env(MNEMOGRAPH_DATA_DIR=str(shared_store.data_dir))}
    params = StdioServerParameters(command=command, args=entry.get("args", []), env=env)
    async with Client(params, mode="legacy") as client:
        assert len((await client.list_tools()).tools) == len(ALL_TOOLS)
        defaults = (await call(client, "list_scopes", {}))["default_scopes"]
    if entry.get("variant") and "MNEMOGRAPH_DEFAULT_SCOPE" in entry["env"]:  # the opt-in project variant
        assert defaults == [entry["env"]["MNEMOGRAPH_DEFAULT_SCOPE"]]
        return
    # No shipped config picks a scope: every client lands in the same personal scope, so they share memory.
    assert "MNEMOGRAPH_DEFAULT_SCOPE" not in entry.get("env", {})
    assert defaults == [login_scope(env)]
