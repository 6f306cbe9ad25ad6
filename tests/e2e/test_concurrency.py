"""Concurrency: 8 HTTP clients and 3 stdio clients share one store and run a mixed workload at the same time.
No call fails, nothing is lost or stored twice (checked against a ledger of every acknowledged operation).

CI runs the short form; ``MNEMOGRAPH_SOAK=full`` runs thousands of operations (last result in
docs/reliability.md).
"""

from __future__ import annotations

import json
import os
import random
import time

import anyio
import pytest
from mcp import Client

from tests.e2e._ledger import Ledger, Worker, check_store, step
from tests.e2e.conftest import Store, call, http_server

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.slow]

FULL = os.environ.get("MNEMOGRAPH_SOAK") == "full"
HTTP_CLIENTS = 8
STDIO_CLIENTS = 3
OPS_PER_CLIENT = 300 if FULL else 25


async def test_eight_http_and_three_stdio_clients_at_once(store: Store) -> None:
    ledger = Ledger()
    workers: list[Worker] = []
    rng = random.Random(11)
    started = time.monotonic()
    async with http_server(store) as server:
        async with Client(
            server.url
        ) as warm:  # owner up and model loaded, so the clients race on the store only
            await call(warm, "list_scopes", {})

        async def run(name: str, client: Client) -> None:
            w = Worker(name, client, ledger, random.Random(rng.random()))
            workers.append(w)
            for _ in range(OPS_PER_CLIENT):
                assert await step(w), ledger.failures[-1]

        async def http_worker(i: int) -> None:
            async with Client(server.url) as client:
                await run(f"h{i}", client)

        async def stdio_worker(i: int) -> None:
            async with Client(store.stdio(), mode="legacy") as client:
                await run(f"s{i}", client)

        async with anyio.create_task_group() as tg:
            for i in range(HTTP_CLIENTS):
                tg.start_soon(http_worker, i)
            for i in range(STDIO_CLIENTS):
                tg.start_soon(stdio_worker, i)

        assert ledger.failures == []
        counts = check_store(store, ledger, workers)
        async with Client(server.url) as client:
            listed = {s["id"]: s["memories"] for s in (await call(client, "list_scopes", {}))["scopes"]}
    for w in workers:  # no lost or duplicated writes: each scope holds exactly the worker's current memories
        assert listed.get(w.scope, 0) == len(w.live), w.name
    print(
        "CONCURRENCY RESULT",
        json.dumps(
            {
                "form": "full" if FULL else "short",
                "http_clients": HTTP_CLIENTS,
                "stdio_clients": STDIO_CLIENTS,
                "operations_acknowledged": ledger.acknowledged,
                "errors": len(ledger.failures),
                "by_op": dict(ledger.ops),
                **counts,
                "seconds": round(time.monotonic() - started),
            }
        ),
    )
    assert ledger.acknowledged == (HTTP_CLIENTS + STDIO_CLIENTS) * OPS_PER_CLIENT
