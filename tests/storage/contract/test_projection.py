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
        assert (p.duplicates(), p.damaged) == ([], None)
        p.apply([a], [], fresh=[a.id])  # a retried batch taken for new: added without its delete
        assert (p.count(), p.duplicates()) == (3, [a.id])
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


def test_files_emptied_under_it_open_empty_and_damaged(
    open_projection: OpenProjection, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    """Every file of the projection emptied (what a removal racing its writes, or a crash on a file system that
    lost them, can leave): it opens, empty, at watermark 0, and says why it cannot be trusted, so that the engine
    rebuilds it from the canonical store instead of failing or serving nothing."""
    p = open_projection(tmp_path, embedder.dim)
    p.apply([_row(embedder, "A note."), _row(embedder, "Another note.")], [])
    p.watermark.set(7)
    p.close()
    for path in tmp_path.rglob("*"):
        if path.is_file():
            path.write_bytes(b"")
    p = open_projection(tmp_path, embedder.dim)
    try:
        assert p.damaged
        assert (p.count(), p.watermark.value, p.live_status()) == (0, 0, {})
        p.apply([_row(embedder, "A note.")], [])
        assert p.count() == 1
    finally:
        p.close()
