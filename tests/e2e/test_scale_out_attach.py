"""A front or a command started on one canonical store never talks to an owner serving another.

A node's data directory has one owner process, which fronts attach to. When the owner was started on the
embedded store (or another FalkorDB graph) and someone then runs ``serve --canonical falkordb://...`` or
``verify --canonical ...`` on that directory, relaying to the running owner would read and write the other
store without a word: a node meant to join the team's graph would keep writing into its own embedded one."""

from __future__ import annotations

import os
from collections.abc import Callable

import anyio
import httpx2
import pytest
from mcp import Client

from storage.adapters.falkordb import local as falkordb_local
from tests.e2e.conftest import MNEMOGRAPH, HttpServer, Store, await_for, call, free_port, http_server

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def _run(store: Store, *args: str) -> tuple[int, str, str]:
    done = await anyio.run_process(
        [MNEMOGRAPH, *args, "--data-dir", str(store.data_dir)],
        check=False,
        env={**os.environ, **store.env()},
        stdin=None,
    )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def _back_and_writing(
    falkordb: falkordb_local.LocalServer,
    server: HttpServer,
    health: Callable[[], httpx2.Response],
    *,
    within: float,
) -> None:
    """Start the FalkorDB server again on its files and port; the node must answer 200 and take a write."""
    back = falkordb_local.start(falkordb.directory, port=falkordb.port)
    try:
        await await_for(lambda: health().status_code == 200, within=within, what="/healthz once it is back")
        async with Client(server.url) as client:
            w = await call(
                client, "memory_write", {"content": "The kiln fires at dawn.", "scopes": ["team:x"]}
            )
            assert w["status"] == "added"
    finally:
        back.stop()


async def test_a_front_or_command_on_another_canonical_store_refuses_the_running_owner(
    store: Store, falkordb: falkordb_local.LocalServer
) -> None:
    url = falkordb.url("team")
    async with http_server(store) as server:  # the embedded store: a newcomer's first try
        async with Client(server.url) as client:
            await call(
                client,
                "memory_write",
                {"content": "Solo note: the kiln fires at dawn.", "scopes": ["team:x"]},
            )
        # Now the node is meant to join the team's graph; the embedded owner still runs.
        status, out, err = await _run(store, "verify", "--json", "--canonical", url)
        assert status != 0, f"verify answered for the embedded store as if it were {url}: {out}"
        assert "stop it first" in err
        assert f"canonical store kuzu, not {url}" in err
        status, out, err = await _run(store, "serve", "--canonical", url)
        assert status == 2, err
        assert "stop it first" in err
        # The same store as the owner's is served as before.
        status, out, err = await _run(store, "verify", "--json")
        assert status == 0, err


async def test_healthz_says_unavailable_while_the_falkordb_server_is_down_and_ok_once_back(
    store: Store, falkordb: falkordb_local.LocalServer
) -> None:
    import signal

    async with http_server(store, "--canonical", falkordb.url("team")) as server:

        def health() -> httpx2.Response:
            return httpx2.get(f"{server.base}/healthz", timeout=5)

        await await_for(lambda: health().json()["engine"] == "ready", within=90, what="the node's engine")
        assert health().json()["status"] == "ok"
        falkordb.stop(signal.SIGKILL)
        # 0328284 kept answering 200 "ok": a load balancer kept sending work to a node that fails every call.
        await await_for(lambda: health().status_code == 503, within=30, what="/healthz to report the outage")
        body = health().json()
        assert body["status"] == "unavailable"
        assert "canonical store does not answer" in body["problem"]
        async with Client(server.url) as client:
            refused = await client.call_tool("recall", {"query": "kiln", "scopes": ["team:x"]})
            assert refused.is_error
            assert "cannot be reached" in refused.content[0].text  # type: ignore[union-attr]
        await _back_and_writing(falkordb, server, health, within=30)


async def test_a_node_started_while_the_falkordb_server_is_down_says_so_and_serves_once_it_is_back(
    store: Store, falkordb: falkordb_local.LocalServer
) -> None:
    falkordb.stop()
    server = HttpServer(store, free_port(), "--canonical", falkordb.url("team"))
    try:

        def health() -> httpx2.Response:
            return httpx2.get(f"{server.base}/healthz", timeout=5)

        def reported() -> bool:
            try:
                return health().json().get("engine") == "unreachable"
            except (httpx2.TransportError, ValueError):
                return False  # the front is still starting

        # 3a723fb said "starting" with a 200 for as long as the server stayed down: a load balancer sent work to
        # a node that could not open, and `mnemograph status` said the store was "opening".
        await await_for(reported, within=60, what="/healthz to say the canonical store does not answer")
        answer = health()
        assert answer.status_code == 503
        assert answer.json()["status"] == "unavailable"
        assert "canonical store does not answer" in answer.json()["problem"]
        shown = await anyio.run_process(
            [MNEMOGRAPH, "status"], check=False, env={**os.environ, **store.env()}, stdin=None
        )
        out = shown.stdout.decode()
        assert "store unreachable" in out, out
        assert "not ready: the FalkorDB server cannot be reached" in out, out
        await _back_and_writing(falkordb, server, health, within=60)
    finally:
        server.stop()
