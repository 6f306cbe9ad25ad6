"""Through an MCP client: a recall sent right after a write finds it, though the text index is still taking
the write when the recall arrives (the recall embeds its query meanwhile, then waits for the write)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import anyio
import anyio.to_thread
import pytest
from mcp import Client

from storage import CachedEmbedder, Engine
from tests.tools.conftest import ok

pytestmark = pytest.mark.anyio

WITHIN = 30.0


async def test_a_recall_sent_while_the_text_index_takes_a_write_answers_with_it(
    client: Client, engine: Engine, embedder: CachedEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine.reconciler.read_wait = 2 * WITHIN
    entered, release = threading.Event(), threading.Event()
    real: Callable[..., None] = engine.text.apply

    def apply(*args: Any, **kwargs: Any) -> None:
        entered.set()
        assert release.wait(WITHIN)
        real(*args, **kwargs)

    monkeypatch.setattr(engine.text, "apply", apply)
    asked = threading.Event()
    real_embed = embedder.embed

    def embed(texts: Any) -> Any:
        if any("island" in t for t in texts):
            asked.set()
        return real_embed(texts)

    monkeypatch.setattr(embedder, "embed", embed)
    await ok(client, "memory_write", {"content": "The ferry to Zanzibar leaves at seven."})
    assert await anyio.to_thread.run_sync(entered.wait, WITHIN)
    answer: dict[str, Any] = {}

    async def recall() -> None:
        answer.update(await ok(client, "recall", {"query": "when does the boat to the island leave"}))

    async with anyio.create_task_group() as tg:
        tg.start_soon(recall)
        try:
            assert await anyio.to_thread.run_sync(asked.wait, WITHIN)  # embedded while the write is projected
            assert not answer  # and still waiting for the write
        finally:
            release.set()
    assert "stale" not in answer
    assert answer["results"][0]["content"] == "The ferry to Zanzibar leaves at seven."
