"""The Kùzu buffer pool is opened with a fixed cap, so the graph's resident share does not grow with the store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kuzu
import pytest

from storage.adapters.kuzu import store as kuzu_store


def test_the_graph_is_opened_with_a_buffer_pool_of_at_most_512_mib(
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
    assert all(0 < size <= 512 << 20 for size in asked), asked
