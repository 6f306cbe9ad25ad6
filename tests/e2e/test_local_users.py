"""Other accounts on the same machine, seen from where they stand: the file modes of everything Mnemograph
writes (after real use by a server, a client and the CLI), and a ``--no-auth`` server's loopback port."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from mcp import Client

from tests.e2e.conftest import INITIALIZE, Store, call, http_server
from tests.e2e.test_auth import as_token, cli, make_token

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

NOBODY = 65534


def exposed(*roots: Path) -> list[str]:
    """Every file or directory under ``roots`` that another user could read, write or enter."""
    found = []
    for root in roots:
        for path in [root, *root.rglob("*")]:
            info = path.lstat()
            if not stat.S_ISLNK(info.st_mode) and info.st_mode & 0o077:
                found.append(f"{oct(stat.S_IMODE(info.st_mode))} {path}")
    return found


async def test_nothing_written_under_the_data_directory_is_open_to_other_users(
    store: Store, tmp_path: Path
) -> None:
    # The test runner's umask (usually 022) is inherited, as it would be from a user's shell.
    token = await make_token(store, "agent", "team:t=w")
    async with http_server(store, auth=True) as server, as_token(server.url, token) as client:
        for n in range(3):
            await call(
                client, "memory_write", {"content": f"Secret plan {n}: ship on Friday.", "scopes": ["team:t"]}
            )
        assert (await call(client, "recall", {"query": "secret plan"}))["results"]
        backup, export = tmp_path / "backup", tmp_path / "export.jsonl"
        assert (await cli(store, "backup", str(backup))).returncode == 0
        assert (await cli(store, "export", "-o", str(export), "--vectors")).returncode == 0
        assert (await cli(store, "verify")).returncode == 0
    store.stop_owner()
    assert (store.data_dir / "audit.jsonl").exists()
    assert any(store.data_dir.rglob("*.lance"))
    assert exposed(store.data_dir, backup, export, store.paths.root) == []


async def test_a_data_directory_left_open_by_an_older_version_is_closed_on_open(store: Store) -> None:
    token = await make_token(store, "agent", "team:t=w")
    async with http_server(store, auth=True) as server, as_token(server.url, token) as client:
        await call(client, "memory_write", {"content": "Written by an older version.", "scopes": ["team:t"]})
    store.stop_owner()
    for path in [store.data_dir, *store.data_dir.rglob("*")]:  # what a 022 umask used to leave
        path.chmod(0o755 if path.is_dir() else 0o644)
    assert exposed(store.data_dir)
    assert (await cli(store, "verify")).returncode == 0
    assert exposed(store.data_dir) == []


# Another local account's client (nobody), with the system Python so that it needs nothing of ours: it POSTs an
# MCP initialize to the URL, optionally naming a loopback port in X-Forwarded-For, and prints the status it got.
PROBE = (
    "import json, sys, urllib.request, urllib.error\n"
    "headers = {'Content-Type': 'application/json', 'Accept': 'application/json, text/event-stream'}\n"
    "if len(sys.argv) > 3:\n"
    "    headers['X-Forwarded-For'] = '127.0.0.1:' + sys.argv[3]\n"
    "req = urllib.request.Request(sys.argv[1], data=sys.argv[2].encode(), method='POST', headers=headers)\n"
    "try:\n"
    "    print(urllib.request.urlopen(req, timeout=30).status)\n"
    "except urllib.error.HTTPError as e:\n"
    "    print(e.code, e.read().decode())\n"
)


async def post_as_nobody(url: str, *forwarded_port: str) -> subprocess.CompletedProcess[str]:
    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["/usr/bin/python3", "-I", "-c", PROBE, url, json.dumps(INITIALIZE), *forwarded_port],
            user=NOBODY,
            group=NOBODY,
            extra_groups=[],
            cwd="/",
            env={"PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=60,
        )

    return await anyio.to_thread.run_sync(run)


@pytest.mark.skipif(os.getuid() != 0, reason="running a client as another OS user needs root")
async def test_no_auth_serves_only_the_os_user_running_it(store: Store) -> None:
    async with http_server(store) as server:  # --no-auth on loopback
        other = await post_as_nobody(server.url)
        assert other.stdout.startswith("403"), (other.stdout, other.stderr)
        assert "--no-auth" in other.stdout
        assert "token" in other.stdout
        # The user who started it is served without a token, as before.
        async with Client(server.url) as client:
            wrote = await call(
                client, "memory_write", {"content": "Local and private.", "scopes": ["user:me"]}
            )
            assert wrote["status"] == "added"


@pytest.mark.skipif(os.getuid() != 0, reason="running a client as another OS user needs root")
async def test_no_auth_peer_check_cannot_be_pointed_at_another_connection(store: Store) -> None:
    """Another account names, in X-Forwarded-For, the loopback port of a connection this user holds open to
    the front (visible to anyone in /proc/net/tcp). The peer check must look at the connection that carries
    the request, never at an address a header claims, so it is still refused."""
    import socket
    from urllib.parse import urlsplit

    async with http_server(store) as server:
        where = urlsplit(server.url)
        assert where.hostname is not None
        assert where.port is not None
        # This user's client, keeping its connection to the front open (as an MCP client's event stream does).
        held = socket.create_connection((where.hostname, where.port))
        try:
            other = await post_as_nobody(server.url, str(held.getsockname()[1]))
            assert other.stdout.startswith("403"), (other.stdout, other.stderr)
        finally:
            held.close()
