"""LanceDB's caches are opened bounded, so the vector index's resident share does not grow with the store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lancedb
import pytest

from storage.adapters import lance_vectors
from storage.adapters.lance_vectors import VectorIndex


def test_the_vector_index_connects_with_a_session_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sessions: list[Any] = []
    real = lancedb.connect

    def spy(*args: Any, **kwargs: Any) -> Any:
        sessions.append(kwargs.get("session"))
        return real(*args, **kwargs)

    monkeypatch.setattr(lance_vectors.lancedb, "connect", spy)
    VectorIndex(tmp_path / "vectors", dim=8)
    assert sessions
    assert all(isinstance(s, lancedb.Session) for s in sessions), sessions
    assert lance_vectors.INDEX_CACHE_BYTES + lance_vectors.METADATA_CACHE_BYTES <= 512 << 20
