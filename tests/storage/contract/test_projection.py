"""The projection contract (``storage.ports.projection.Projection``), for every projection in conftest."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from storage import CachedEmbedder, content_id
from storage.domain.records import ProjectionRow
from storage.ports.projection import Projection
from tests.conftest import files_containing
from tests.storage.contract._records import T0, canary, needles

OpenProjection = Callable[[Path, int], Projection]


def _row(
    embedder: CachedEmbedder, content: str, *, live: bool = True, scopes: tuple[str, ...] = ("user:ana",)
) -> ProjectionRow:
    vector = [float(x) for x in embedder.embed([content])[0]]
    return ProjectionRow(content_id(content), content, "fact", scopes, live, T0, vector)


def test_apply_upserts_and_deletes_idempotently(
    open_projection: OpenProjection, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    p = open_projection(tmp_path, embedder.dim)
    try:
        a, b = _row(embedder, "Ana lives in Lisbon."), _row(embedder, "Bo prefers tea.")
        p.apply([a, b], [], fresh=[a.id, b.id])
        p.apply([a, b], [])  # a replay after a crash: the same rows again
        assert p.count() == 2
        assert p.live_status() == {a.id: True, b.id: True}
        retired = ProjectionRow(a.id, a.content, a.kind, a.scopes, False, a.event_time, a.vector)
        p.apply([retired], [b.id])
        p.apply([retired], [b.id])
        assert p.live_status() == {a.id: False}
        assert p.count() == 1
    finally:
        p.close()


def test_the_watermark_is_durable(
    open_projection: OpenProjection, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    p = open_projection(tmp_path, embedder.dim)
    assert p.watermark.value == 0
    p.apply([_row(embedder, "A note.")], [])
    p.watermark.set(7)
    p.close()
    p = open_projection(tmp_path, embedder.dim)
    try:
        assert p.watermark.value == 7
        assert p.count() == 1
    finally:
        p.close()


def test_replace_all_leaves_no_byte_of_what_it_dropped(
    open_projection: OpenProjection, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    secret = canary("SECRET")
    gone, kept = _row(embedder, f"The vault code is {secret}."), _row(embedder, "The garden gate is green.")
    p = open_projection(tmp_path, embedder.dim)
    try:
        p.apply([gone, kept], [], fresh=[gone.id, kept.id])
        p.maintain()
        # The content as written and as an index's tokens hold it (lower case); the vector's floats; the id.
        patterns = {
            "content": secret.encode(),
            "token": secret.lower().encode(),
            **needles(gone.vector, gone.id),
        }
        before = {what for what, b in patterns.items() if files_containing(tmp_path, b)}
        assert "id hex" in before  # the scan sees the row while it is there (what else a store keeps varies)
        p.apply([], [gone.id])
        p.replace_all([kept])
        left = {what: files_containing(tmp_path, b) for what, b in patterns.items()}
        assert {what: paths for what, paths in left.items() if paths} == {}
        assert p.live_status() == {kept.id: True}
        assert p.appends_since_maintain >= 0
    finally:
        p.close()
