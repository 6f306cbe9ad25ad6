"""What the owner loads before its first answer: nothing that answer does not need (docs/benchmarks/coldstart.md).

Checked in a fresh interpreter that builds the owner's MCP server and HTTP app exactly as ``server.owner`` does;
how long the start takes is measured by bench/coldstart.py, not here.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

_OWNER = """
import sys
from pathlib import Path

import anyio

from server._activity import Activity
from server._auth import FileTokenVerifier
from server._engine import EngineHolder
from server._owner_http import owner_app
from server._tokens import TokenStore
from server.app import build_server

data_dir = Path(sys.argv[1])
holder = EngineHolder(data_dir, wait=1.0)
server = build_server(holder.get, default_scopes=("user:a",))
app = owner_app(
    server, holder, Activity(), data_dir=data_dir, stopping=anyio.Event(), started=anyio.Event(),
    verifier=FileTokenVerifier(TokenStore(data_dir)),
)
print(*sorted(m for m in ("jinja2", "rich", "server.ui") if m in sys.modules) or ["-"])


async def ui() -> None:
    sent = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
        "path": "/ui/login", "raw_path": b"/ui/login", "root_path": "", "query_string": b"",
        "headers": [(b"host", b"127.0.0.1")], "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80),
    }
    await app(scope, receive, send)
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    print(sent[0]["status"], b"Sign in" in body, *sorted(m for m in ("jinja2", "server.ui") if m in sys.modules))


anyio.run(ui)
"""


def test_the_owner_builds_its_server_without_the_ui_or_rich_and_serves_the_ui_when_asked(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _OWNER, str(tmp_path / "data")], capture_output=True, text=True, check=True
    )
    before, after = done.stdout.splitlines()
    assert before == "-"  # the web UI's templates (jinja2) and the SDK's rich log handler: not loaded
    assert after == "200 True jinja2 server.ui"  # the first request to /ui loads the UI and gets its page
