"""Access across scale-out nodes, from an attacker's seat: one FalkorDB, two HTTP nodes with bearer tokens made
by the CLI on one node and copied to the other (docs/scale-out.md, "Tokens"). A scope the admin takes out of
a team's subtree on node A must be closed to the team's readers on node B at once, not whenever B next
happens to apply a change."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from storage.adapters.falkordb import local as falkordb_local
from tests.e2e.conftest import MNEMOGRAPH, HttpServer, Store, await_for, call, error_text, free_port

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def _token(store: Store, name: str, *grants: str) -> str:
    done = await anyio.run_process(
        [MNEMOGRAPH, "token", "create", "--name", name, *[a for g in grants for a in ("--grant", g)],
         "--data-dir", str(store.data_dir)],
        check=False, env={**os.environ, **store.env()},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.decode().strip()


@asynccontextmanager
async def _as(url: str, token: str) -> AsyncIterator[Client]:
    timeout = httpx2.Timeout(30.0, read=300.0)
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=timeout) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client


async def test_a_scope_moved_away_on_node_a_is_closed_to_its_old_readers_on_node_b(
    falkordb: falkordb_local.LocalServer, stores: tuple[Store, Store]
) -> None:
    a, b = stores
    url = falkordb.url("team")
    boss = await _token(a, "boss", "team:all=admin", "project:secret=admin")
    reader = await _token(a, "reader", "team:all=r")
    b.data_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy2(a.data_dir / "tokens.json", b.data_dir / "tokens.json")  # the documented way to share tokens
    nodes = [HttpServer(s, free_port(), "--canonical", url, auth=True) for s in (a, b)]
    try:
        for node in nodes:
            await await_for(node.healthy, within=90, what="a node's /healthz")
        node_a, node_b = nodes
        for scope in (["team:all"], ["project:secret", "--parent", "team:all"]):  # the operator places them
            done = await anyio.run_process(
                [MNEMOGRAPH, "scope", "create", *scope, "--data-dir", str(a.data_dir), "--canonical", url],
                check=False, env={**os.environ, **a.env()},
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
        async with _as(node_a.url, boss) as admin:
            secret = await call(
                admin,
                "memory_write",
                {"content": "The merger with Initech closes on Friday.", "scopes": ["project:secret"]},
            )
        query = {"query": "merger Initech", "scopes": ["team:all"], "descendants": True}
        async with _as(node_b.url, reader) as team:
            found = await call(team, "recall", query)
            assert [r["id"] for r in found["results"]] == [
                secret["id"]
            ]  # the team reads the project, on b too
            async with _as(node_a.url, boss) as admin:
                await call(admin, "move_scope", {"scope": "project:secret", "parent": None})
            # The same session on b, right after: nothing else was written anywhere since the move.
            assert (await call(team, "recall", query))["results"] == []
            refused = await team.call_tool("memory_read", {"id": secret["id"]})
            assert refused.is_error
            assert "Initech" not in error_text(refused)
    finally:
        for node in nodes:
            node.stop()
