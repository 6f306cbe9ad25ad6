"""A stalled projection, seen by an MCP client: recall waits for it once, then answers at once and says that
its answer may miss the newest writes; once the projection moves again, answers are complete and unmarked."""

from __future__ import annotations

import threading
import time

import anyio
import anyio.to_thread
import pytest
from mcp import Client

from storage import Engine
from tests.tools.conftest import ok

pytestmark = pytest.mark.anyio

READ_WAIT = 3.0


async def test_a_stalled_projection_costs_one_wait_and_answers_say_they_are_stale(
    client: Client, engine: Engine
) -> None:
    await ok(client, "memory_write", {"content": "The spare key hangs behind the boiler."})
    fresh = await ok(client, "recall", {"query": "spare key"})
    assert "stale" not in fresh  # said only when true
    assert "warning" not in fresh
    assert "boiler" in fresh["results"][0]["content"]

    # Stall the projector (as a wedged disk or a huge rebuild would): it runs this job and nothing else.
    engine.reconciler.read_wait = READ_WAIT
    entered, release = threading.Event(), threading.Event()

    def wedge() -> None:
        entered.set()
        release.wait()

    stalled = threading.Thread(target=engine.reconciler.on_projector, args=(wedge,), daemon=True)
    stalled.start()
    await anyio.to_thread.run_sync(entered.wait)
    try:
        await ok(client, "memory_write", {"content": "The ferry to Zanzibar leaves at seven."})

        first = await ok(client, "recall", {"query": "ferry to Zanzibar"})
        assert first["stale"] is True
        assert "memory_read" in first["warning"]
        assert "behind" in first["warning"]

        started = time.monotonic()
        second = await ok(client, "recall", {"query": "ferry to Zanzibar"})
        # Not another full wait while the projection makes no progress.
        assert time.monotonic() - started < READ_WAIT
        assert second["stale"] is True
    finally:
        release.set()
        await anyio.to_thread.run_sync(stalled.join)
    assert await anyio.to_thread.run_sync(engine.reconciler.wait_projected)  # the projector catches up

    caught_up = await ok(client, "recall", {"query": "ferry to Zanzibar"})
    assert "stale" not in caught_up
    assert "warning" not in caught_up
    assert "Zanzibar" in caught_up["results"][0]["content"]
