"""Crash safety under load: concurrent HTTP clients run a mixed workload while the owner process is killed with
SIGKILL at random moments and comes back; afterwards every acknowledged operation is in the store exactly, nothing
unacknowledged is half-visible, verify reports no drift and recall answers.

CI runs the short form. ``MNEMOGRAPH_SOAK=full`` runs the full form (30 kill cycles); its last result is in
docs/reliability.md.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time

import anyio
import pytest
from mcp import Client

from tests.e2e._ledger import Ledger, Worker, check_store, step
from tests.e2e.conftest import Store, await_for, call, http_server

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.slow]

FULL = os.environ.get("MNEMOGRAPH_SOAK") == "full"
CYCLES = 30 if FULL else 4
CLIENTS = 6 if FULL else 3
KILL_AFTER = (0.0, 3.0)  # seconds of load before the next SIGKILL, once the new owner acknowledges again


async def test_sigkill_under_concurrent_load_loses_nothing_acknowledged(store: Store) -> None:
    ledger = Ledger()
    rng = random.Random(int(os.environ.get("MNEMOGRAPH_SOAK_SEED", "5")))
    started = time.monotonic()
    kills = 0
    async with http_server(store) as server:
        async with Client(server.url) as warm:  # the owner is up and the model loaded before the first kill
            marker = await call(
                warm, "memory_write", {"content": "Soak test start marker.", "scopes": ["user:soak"]}
            )
            ledger.sent.add("Soak test start marker.")
            ledger.contents[marker["id"]] = "Soak test start marker."
        done = anyio.Event()
        workers: list[Worker] = []

        async def run_worker(i: int) -> None:
            async with Client(server.url) as client:
                w = Worker(f"w{i}", client, ledger, random.Random(rng.random()))
                workers.append(w)
                while not done.is_set():
                    await step(w)

        async def killer() -> None:
            nonlocal kills
            for _ in range(CYCLES):
                # Each cycle kills a serving owner: wait until this one acknowledged a few operations.
                base = ledger.acknowledged
                await await_for(
                    lambda base=base: ledger.acknowledged >= base + CLIENTS, within=180, what="progress"
                )
                await anyio.sleep(rng.uniform(*KILL_AFTER))
                pid = store.owner_pid()
                if pid is None:
                    continue
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    continue
                kills += 1
                await await_for(
                    lambda pid=pid: store.owner_pid() not in (None, pid), within=120, what="a new owner"
                )
            await anyio.sleep(rng.uniform(*KILL_AFTER))  # and some load on the last owner
            done.set()

        async with anyio.create_task_group() as tg:
            for i in range(CLIENTS):
                tg.start_soon(run_worker, i)
            tg.start_soon(killer)

        counts = check_store(store, ledger, workers)
        async with Client(server.url) as client:
            # A memory a worker wrote and still holds live (the start marker lives in another scope: recall
            # there finds nothing that matches it, and says so by returning nothing).
            probe = next(ledger.contents[mid] for w in workers for mid in w.live)
            found = await call(
                client, "recall", {"query": probe, "scopes": ["user:w0", "user:w1", "user:w2"]}
            )
            assert found["results"], "recall answers after the soak"
    result = {
        "form": "full" if FULL else "short",
        "cycles": kills,
        "clients": CLIENTS,
        "operations_acknowledged": ledger.acknowledged,
        "operations_failed_in_flight": len(ledger.failures),
        "by_op": dict(ledger.ops),
        **counts,
        "losses": 0,
        "seconds": round(time.monotonic() - started),
    }
    print("SOAK RESULT", json.dumps(result))
    assert kills >= CYCLES - 1
    assert ledger.acknowledged > 10 * CYCLES, ledger.failures[-5:]
