"""Many clients, one store: stdio processes and an HTTP client at once, in any start order, no lost writes."""

from __future__ import annotations

import anyio
import pytest
from mcp import Client

from tests.e2e.conftest import MNEMOGRAPH, HttpServer, Store, await_for, call, free_port, http_server

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.slow]

WRITES_PER_CLIENT = 12
SCOPE = "team:swarm"


async def _writer(client: Client, name: str, ids: dict[str, str]) -> None:
    for n in range(WRITES_PER_CLIENT):
        content = f"Report {n} from {name}: the {name} queue held {n * 7 + len(name)} jobs."
        receipt = await call(client, "memory_write", {"content": content, "scopes": [SCOPE]})
        assert receipt["status"] == "added"
        ids[receipt["id"]] = content
        if n % 4 == 3:
            found = await call(client, "recall", {"query": f"{name} queue report", "scopes": [SCOPE], "k": 3})
            assert found["results"], "a client's own writes must be recallable at once"


async def test_three_stdio_processes_and_an_http_client_started_together(store: Store) -> None:
    ids: dict[str, str] = {}
    # All four start at once on a store no owner serves yet: they race to start it, and exactly one must win.
    server = HttpServer(store, free_port())
    try:
        async with anyio.create_task_group() as tg:
            for name in ("alpha", "bravo", "charlie"):

                async def stdio_client(name: str = name) -> None:
                    async with Client(store.stdio(), mode="legacy") as client:
                        await _writer(client, name, ids)

                tg.start_soon(stdio_client)

            async def http_client() -> None:
                await await_for(server.healthy, within=60, what="the HTTP server")
                async with Client(server.url) as client:
                    await _writer(client, "delta", ids)

            tg.start_soon(http_client)
    finally:
        server.stop()

    assert len(ids) == 4 * WRITES_PER_CLIENT
    # Every acknowledged write is there: read each back through a new session, and the stores agree.
    async with Client(store.stdio(), mode="legacy") as client:
        for memory_id, content in ids.items():
            assert (await call(client, "memory_read", {"id": memory_id}))["memory"]["content"] == content
        scopes = {s["id"]: s["memories"] for s in (await call(client, "list_scopes", {}))["scopes"]}
        assert scopes[SCOPE] == len(ids)
        verify = await anyio.run_process(
            [MNEMOGRAPH, "verify", "--data-dir", str(store.data_dir)], check=False
        )
        assert verify.returncode == 0, verify.stdout + verify.stderr
        assert verify.stdout.decode().splitlines()[-1] == "ok"


async def test_stdio_first_then_http_share_one_owner(store: Store) -> None:
    async with Client(store.stdio(), mode="legacy") as stdio:
        written = await call(
            stdio, "memory_write", {"content": "Stdio came first.", "scopes": ["user:order"]}
        )
        owner = store.owner_pid()
        async with http_server(store) as server, Client(server.url) as http:
            read = await call(http, "memory_read", {"id": written["id"]})
            assert read["memory"]["content"] == "Stdio came first."
            assert store.owner_pid() == owner


async def test_http_first_then_stdio_share_one_owner(store: Store) -> None:
    async with http_server(store) as server:
        owner = store.owner_pid()
        async with Client(server.url) as http:
            written = await call(
                http, "memory_write", {"content": "HTTP came first.", "scopes": ["user:order"]}
            )
        async with Client(store.stdio(), mode="legacy") as stdio:
            read = await call(stdio, "memory_read", {"id": written["id"]})
            assert read["memory"]["content"] == "HTTP came first."
        assert store.owner_pid() == owner
