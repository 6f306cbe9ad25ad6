"""The Kùzu buffer pool is opened with a fixed cap, so the graph's resident share does not grow with the store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kuzu
import pytest

from storage.adapters.kuzu import store as kuzu_store


def test_the_graph_is_opened_with_a_buffer_pool_of_at_most_4_gib(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[int] = []
    real = kuzu.Database

    def spy(*args: Any, **kwargs: Any) -> kuzu.Database:
        asked.append(kwargs["buffer_pool_size"])
        return real(*args, **kwargs)

    monkeypatch.setattr(kuzu_store.kuzu, "Database", spy)
    db = kuzu_store.open_database(tmp_path / "graph")
    kuzu.Connection(db).execute("RETURN 1")
    assert asked
    assert all(0 < size <= 4 << 30 for size in asked), asked


@pytest.mark.slow
def test_a_store_of_memories_as_long_as_allowed_still_checkpoints_and_is_rewritten(tmp_path: Path) -> None:
    """A checkpoint, and the import of an erasure's rewrite, hold a node group's columns (up to 131,072
    memories) in the buffer pool at once: the pool's cap must leave room for them, not only for what recalls
    keep resident. 6,000 memories of MAX_CONTENT_CHARS (a document import's chunks, 190 MB of text): with a
    512 MiB pool the checkpoint after the 4,400th failed ("Buffer manager exception: Unable to allocate
    memory! The buffer pool is full") and every write after it was refused (StoreFailed)."""
    from storage.adapters.kuzu import GraphStore
    from storage.domain.models import MAX_CONTENT_CHARS
    from storage.domain.records import Change
    from tests.storage.contract._records import T0, new_memory

    class _Flat:
        dim, name = 8, "flat"

        def embed(self, texts: list[str]) -> list[list[float]]:
            return [[0.5] * 8 for _ in texts]

    store = GraphStore(tmp_path / "graph", dim=8, embedder_name="flat")
    filler = "lorem ipsum dolor sit amet " * (MAX_CONTENT_CHARS // 27 + 1)
    ids: list[str] = []
    try:
        for start in range(0, 6000, 50):
            with store.transaction() as tx:
                store.ensure_scopes(tx, ["team:t"], T0)
                for i in range(start, start + 50):
                    m = new_memory(_Flat(), f"{i:06d} {filler}"[:MAX_CONTENT_CHARS])  # type: ignore[arg-type]
                    store.insert_memory(tx, m, ["team:t"], ())
                    store.link(tx, m.id, ["team:t"], T0)
                    store.append_changes(tx, [Change(i + 1, "add", m.id)], T0)
                    ids.append(m.id)
        store.rebuild()
        with store.read() as s:
            got = store.fetch(s, [ids[0], ids[-1]])
            assert got[ids[-1]].content.startswith("005999 ")
            assert len(got[ids[0]].content) == MAX_CONTENT_CHARS
    finally:
        store.close()
