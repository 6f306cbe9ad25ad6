"""The MCP Inspector CLI (a second, independent client implementation) over stdio and over HTTP.

Node 22 and the pinned Inspector are installed into .cache/ by install_inspector.sh (idempotent).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.e2e.conftest import MNEMOGRAPH, Store, http_server
from tools import ALL_TOOLS

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.slow]

INSTALL = Path(__file__).with_name("install_inspector.sh")


@pytest.fixture(scope="session")
def inspector() -> list[str]:
    """The command that runs the Inspector's CLI mode."""
    done = subprocess.run([str(INSTALL)], capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, f"installing the Inspector failed:\n{done.stderr[-3000:]}"
    node, package = done.stdout.split()
    return [node, f"{package}/clients/launcher/build/index.js", "--cli"]


TOOL_IS_ERROR = 5  # the Inspector's exit status when a tool result has isError: true


async def _run(command: list[str], status: int = 0) -> Any:
    done = await anyio.run_process(command, check=False)
    assert done.returncode == status, done.stderr.decode()[-3000:]
    return json.loads(done.stdout)


def _stdio_target(store: Store) -> list[str]:
    env = {**store.env(), "MNEMOGRAPH_DATA_DIR": str(store.data_dir)}
    return [*(arg for k, v in env.items() for arg in ("-e", f"{k}={v}")), MNEMOGRAPH, "serve"]


async def _exercise(inspector: list[str], target: list[str], scope: str) -> None:
    listed = await _run([*inspector, *target, "--method", "tools/list", "--strict"])
    assert [t["name"] for t in listed["tools"]] == [spec.name for spec in ALL_TOOLS]
    assert all(t["annotations"]["openWorldHint"] is False for t in listed["tools"])

    def call(tool: str, *args: str) -> list[str]:
        return [*inspector, *target, "--method", "tools/call", "--tool-name", tool, "--tool-arg", *args]

    written = await _run(
        call("memory_write", "content=Linus Torvalds started Linux in 1991.", f'scopes=["{scope}"]')
    )
    assert written["isError"] is False
    memory_id = written["structuredContent"]["id"]
    found = await _run(call("recall", "query=who started Linux", f'scopes=["{scope}"]'))
    assert [r["id"] for r in found["structuredContent"]["results"]] == [memory_id]
    missing = await _run(call("memory_read", "id=abcdefabcdef"), status=TOOL_IS_ERROR)
    assert missing["isError"] is True
    assert "call recall to find it" in missing["content"][0]["text"]


async def test_inspector_over_stdio(inspector: list[str], shared_store: Store) -> None:
    await _exercise(inspector, _stdio_target(shared_store), "project:inspector-stdio")


async def test_inspector_over_http(inspector: list[str], shared_store: Store) -> None:
    async with http_server(shared_store) as server:
        await _exercise(inspector, [server.url, "--transport", "http"], "project:inspector-http")
