"""Above the size threshold the vector lane answers from an IVF_RQ index: RaBitQ codes of the vectors over the nearest
partitions, the best candidates re-ranked by exact distance."""

import dataclasses
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from lancedb.index import IvfFlat, IvfPq

from storage import CachedEmbedder, Engine, WriteItem
from storage.adapters.lance_vectors import DELTA_ROWS, MAX_SEGMENTS, VECTOR_INDEX, VectorIndex
from storage.domain.records import ProjectionRow
from storage.sync import reconciler


def test_ann_index_keeps_exact_top_results(data_dir: Path, embedder: CachedEmbedder) -> None:
    rng = np.random.default_rng(7)
    vecs = rng.standard_normal((600, 384)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    with Engine.open(data_dir, embedder=embedder, warm=False, ann_threshold=400) as eng:
        items = [WriteItem(f"synthetic memory {i}", ["user:a"], vector=vecs[i]) for i in range(600)]
        ids = [r.id for r in eng.write_many(items)]
        eng.reconciler.wait_projected()
        assert not eng.vectors.has_ann_index
        assert not eng.vectors.has_scalar_indexes
        eng.reconciler.on_projector(eng.vectors.maintain)
        assert eng.vectors.has_ann_index
        assert eng.vectors.has_scalar_indexes  # they come with the IVF index (they slow a flat search down)
        for probe in (0, 123, 599):
            found = eng.vectors.search(vecs[probe], scopes=["user:a"], k=5, live_only=True, kinds=None)
            assert found[0][0] == ids[probe]
        # rows added after the index was built are still found (searched flat until the next refresh)
        late = rng.standard_normal(384).astype(np.float32)
        late /= np.linalg.norm(late)
        late_id = eng.write_many([WriteItem("a late memory", ["user:a"], vector=late)])[0].id
        eng.reconciler.wait_projected()
        assert eng.vectors.search(late, scopes=["user:a"], k=3, live_only=True, kinds=None)[0][0] == late_id
        assert eng.verify().ok
    with Engine.open(data_dir, embedder=embedder, warm=False, ann_threshold=400) as eng:
        assert eng.vectors.has_ann_index  # the index is found again after a restart


def test_scalar_indexes_filter_exactly_like_a_scan(tmp_path: Path) -> None:
    """Scope and liveness filters answer the same with the scalar indexes as without, also for rows whose scopes
    or liveness changed after the indexes were built, and the indexes are found again on reopen."""
    rng = np.random.default_rng(3)
    scopes = [("user:a",), ("user:b",), ("team:t",), ("user:a", "team:t")]
    now = datetime(2026, 1, 1, tzinfo=UTC)

    def row(
        i: int, vec: np.ndarray, *, scope: tuple[str, ...] | None = None, live: bool = True
    ) -> ProjectionRow:
        return ProjectionRow(
            f"{i:032x}", "", "note", scope or scopes[i % 4], live, now, [float(x) for x in vec]
        )

    vecs = rng.standard_normal((400, 8)).astype(np.float32)
    rows = [row(i, vecs[i], live=i % 7 != 0) for i in range(400)]
    queries = rng.standard_normal((12, 8)).astype(np.float32)

    def answers(index: VectorIndex) -> list[list[str]]:
        out = []
        for q in queries:
            for wanted in (["user:a"], ["user:b", "team:t"]):
                for live_only in (True, False):
                    hits = index.search(q, scopes=wanted, k=15, live_only=live_only, kinds=None)
                    out.append([mid for mid, _ in hits])
        return out

    plain = VectorIndex(tmp_path / "plain", dim=8, scalar_threshold=10**9)
    indexed = VectorIndex(tmp_path / "indexed", dim=8, scalar_threshold=100)
    for index in (plain, indexed):
        index.apply(rows, [], fresh=[r.id for r in rows])
        index.maintain()
    assert indexed.has_scalar_indexes
    assert not plain.has_scalar_indexes
    assert answers(indexed) == answers(plain)
    changed = [row(i, vecs[i], scope=("user:b",), live=i % 3 == 0) for i in range(0, 400, 5)]
    for index in (plain, indexed):
        index.apply(changed, [rows[1].id])
    assert answers(indexed) == answers(plain)
    assert VectorIndex(tmp_path / "indexed", dim=8, scalar_threshold=100).has_scalar_indexes


def _rows(vecs: np.ndarray, scopes: list[tuple[str, ...]]) -> list[ProjectionRow]:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    return [
        ProjectionRow(f"{i:032x}", "", "note", scopes[i], True, now, [float(x) for x in v])
        for i, v in enumerate(vecs)
    ]


def test_ivf_search_finds_every_row_of_a_small_scope(tmp_path: Path) -> None:
    """Probing only the nearest partitions must not lose a scope whose few rows sit in other partitions: the
    search goes on to further partitions until the filter has let ``k`` rows through (or none are left), and it
    then answers exactly like a flat search."""
    rng = np.random.default_rng(5)
    vecs = rng.standard_normal((8_000, 8)).astype(np.float32)
    small = set(range(0, 8_000, 1_000))  # eight rows, spread over the partitions
    scopes = [("user:small",) if i in small else ("user:big",) for i in range(len(vecs))]
    rows = _rows(vecs, scopes)
    flat = VectorIndex(tmp_path / "flat", dim=8, ann_threshold=10**9, scalar_threshold=10**9)
    ivf = VectorIndex(tmp_path / "ivf", dim=8, ann_threshold=1_000, partition_rows=2_000, nprobes=1)
    for index in (flat, ivf):
        index.apply(rows, [], fresh=[r.id for r in rows])
        index.maintain()
    assert ivf.has_ann_index
    assert not flat.has_ann_index
    for q in rng.standard_normal((5, 8)).astype(np.float32):
        found = ivf.search(q, scopes=["user:small"], k=20, live_only=True, kinds=None)
        exact = flat.search(q, scopes=["user:small"], k=20, live_only=True, kinds=None)
        assert [mid for mid, _ in found] == [mid for mid, _ in exact]
        assert len(found) == len(small)
        # Exact distances over the stored half-precision vectors; Lance's flat and IVF kernels compute them
        # with rounding of their own (up to about 2e-4 apart here, 4e-5 on MiniLM vectors).
        assert np.allclose([d for _, d in found], [d for _, d in exact], atol=5e-4)


def test_an_older_ivf_pq_index_is_replaced(tmp_path: Path) -> None:
    """A vector index of another type (IVF_PQ, which earlier versions built) keeps answering, re-ranked by exact
    distance, until the next ``maintain`` replaces it with the IVF_RQ index."""
    rng = np.random.default_rng(9)
    vecs = rng.standard_normal((1_200, 8)).astype(np.float32)
    rows = _rows(vecs, [("user:a",)] * len(vecs))
    index = VectorIndex(tmp_path / "v", dim=8, ann_threshold=10**9)
    index.apply(rows, [], fresh=[r.id for r in rows])
    config = IvfPq(distance_type="cosine", num_partitions=4, num_sub_vectors=2)
    index._table.create_index("vector", config=config)  # what an older version left behind
    reopened = VectorIndex(tmp_path / "v", dim=8, ann_threshold=1_000)
    assert not reopened.has_ann_index
    assert reopened.search(vecs[17], scopes=["user:a"], k=3, live_only=True, kinds=None)[0][0] == rows[17].id
    reopened.maintain()
    assert reopened.has_ann_index
    assert [ix.index_type for ix in reopened._table.list_indices() if "vector" in ix.columns] == [
        VECTOR_INDEX
    ]
    assert reopened.search(vecs[17], scopes=["user:a"], k=3, live_only=True, kinds=None)[0][0] == rows[17].id


def _vector_index(index: VectorIndex) -> tuple[str, int]:
    found = [ix for ix in index._table.list_indices() if "vector" in ix.columns]
    assert len(found) == 1
    return found[0].index_type, int(found[0].size_bytes or 0)


def test_the_vector_index_keeps_no_second_copy_of_the_vectors(tmp_path: Path) -> None:
    """Issue #17: the IVF_FLAT index kept its own copy of every vector (773 of 4,650 bytes per memory at 100,000
    memories). The index ``maintain`` builds past the threshold holds codes a sixth of the vector column's size."""
    rng = np.random.default_rng(21)
    vecs = rng.standard_normal((3_000, 384)).astype(np.float32)
    rows = _rows(vecs, [("user:a",)] * len(vecs))
    index = VectorIndex(tmp_path / "v", dim=384, ann_threshold=1_000, partition_rows=500)
    index.apply(rows, [], fresh=[r.id for r in rows])
    index.maintain()
    kind, size = _vector_index(index)
    column = len(rows) * 384 * 2  # half precision
    assert size < column / 4, (kind, size, column)
    assert kind == "IvfRq"
    for probe in (0, 1_234, 2_999):
        assert (
            index.search(vecs[probe], scopes=["user:a"], k=5, live_only=True, kinds=None)[0][0]
            == rows[probe].id
        )


def test_a_rebuilt_vector_index_is_on_disk_once(tmp_path: Path) -> None:
    """Lance's ``optimize`` cleans up old versions before it optimises the indexes, and with uneven partitions (a
    clustered corpus: real embeddings) that optimisation wrote the new vector index again, leaving the copy it
    replaced on disk until the next ``maintain`` (at 100,000 rows the IVF_FLAT index took 1,546 bytes a memory in
    place of 773). ``maintain`` and a rebuilt table leave one copy of each index."""
    rng = np.random.default_rng(23)
    centres = rng.standard_normal((3, 384))
    vecs = (centres[rng.integers(0, 3, 4_000)] + 0.05 * rng.standard_normal((4_000, 384))).astype(np.float32)
    rows = _rows(vecs, [("user:a",)] * len(vecs))
    index = VectorIndex(tmp_path / "v", dim=384, ann_threshold=1_000, partition_rows=250)
    index.apply(rows, [], fresh=[r.id for r in rows])
    index.maintain()
    assert index.has_ann_index

    def on_disk(table_dir: Path) -> int:
        return sum(1 for d in (table_dir / "_indices").iterdir() if d.is_dir())

    assert on_disk(tmp_path / "v" / "memories.lance") == len(
        index._table.list_indices()
    )  # scopes, live, vector
    index.replace_all(rows)  # a rebuild (reindex, erasure): a new table, indexed and vacuumed
    table_dir = next((tmp_path / "v").glob("memories-*.lance"))
    assert on_disk(table_dir) == len(index._table.list_indices())
    found = index.search(vecs[9], scopes=["user:a"], k=50, live_only=True, kinds=None)
    assert rows[9].id in [i for i, _ in found]


def test_an_ivf_flat_index_is_replaced_at_maintain(tmp_path: Path) -> None:
    """A store past the threshold indexed by an earlier version (IVF_FLAT) keeps answering exactly, and its next
    ``maintain`` rebuilds the index as IVF_RQ."""
    rng = np.random.default_rng(22)
    vecs = rng.standard_normal((2_000, 384)).astype(np.float32)
    rows = _rows(vecs, [("user:a",)] * len(vecs))
    old = VectorIndex(tmp_path / "v", dim=384, ann_threshold=10**9)
    old.apply(rows, [], fresh=[r.id for r in rows])
    old.maintain()
    old._table.create_index("vector", config=IvfFlat(distance_type="cosine", num_partitions=4))
    reopened = VectorIndex(tmp_path / "v", dim=384, ann_threshold=1_000, partition_rows=500)
    assert _vector_index(reopened)[0] == "IvfFlat"
    assert not reopened.has_ann_index
    found = reopened.search(vecs[17], scopes=["user:a"], k=3, live_only=True, kinds=None)
    assert found[0][0] == rows[17].id
    assert abs(found[0][1]) < 1e-3
    reopened.maintain()
    assert reopened.has_ann_index
    assert _vector_index(reopened)[0] == "IvfRq"
    assert VectorIndex(tmp_path / "v", dim=384, ann_threshold=1_000).has_ann_index  # found again on reopen
    found = reopened.search(vecs[17], scopes=["user:a"], k=3, live_only=True, kinds=None)
    assert found[0][0] == rows[17].id
    assert abs(found[0][1]) < 1e-3


_PEOPLE = ("Ana", "Ben", "Chloe", "Dev", "Emil", "Farah", "Goro", "Hana", "Ivo", "Jun")
_DID = (
    "moved the standup to",
    "booked a flight to",
    "prefers tea over coffee in",
    "reviewed the budget for",
    "adopted a cat in",
    "started learning piano in",
    "fixed the login bug before",
    "ran a half marathon in",
    "renewed the passport in",
    "planned a birthday dinner in",
    "switched the team to Postgres in",
    "lost the office keys in",
)
_WHEN = (
    "Lisbon",
    "Osaka",
    "March",
    "the spring",
    "Berlin",
    "the second quarter",
    "Nairobi",
    "late October",
    "Toronto",
    "the holidays",
    "Quito",
    "the summer",
)


def test_ranking_keeps_the_exact_top_results_on_real_embeddings(
    tmp_path: Path, embedder: CachedEmbedder
) -> None:
    """Past the threshold the vector lane's search (k = 50, one user's scope plus a shared one) returns what an exact
    search returns: at least 99% of the exact top 10 on MiniLM vectors of memory-like sentences (100,000 such rows:
    docs/benchmarks/vector-index.md)."""
    texts = [f"{p} {d} {w}." for p in _PEOPLE for d in _DID for w in _WHEN]  # 1,440 distinct sentences
    questions = [f"Who {d} {w}?" for d, w in zip(_DID * 2, _WHEN[3:] + _WHEN[:3] + _WHEN, strict=False)][:24]
    vecs = np.asarray(embedder.embed(texts), dtype=np.float32)
    asked = np.asarray(embedder.embed(questions), dtype=np.float32)
    scopes = [("team:t",) if i % 10 == 0 else (f"user:u{i % 4}",) for i in range(len(texts))]
    rows = _rows(vecs, scopes)
    flat = VectorIndex(tmp_path / "flat", dim=384, ann_threshold=10**9)
    ann = VectorIndex(tmp_path / "ann", dim=384, ann_threshold=1_000, partition_rows=128)
    for index in (flat, ann):
        index.apply(rows, [], fresh=[r.id for r in rows])
        index.maintain()
    assert ann.has_ann_index
    assert not flat.has_ann_index
    top10, top50 = [], []
    for n, q in enumerate(asked):
        wanted = [f"user:u{n % 4}", "team:t"]
        exact = [i for i, _ in flat.search(q, scopes=wanted, k=50, live_only=True, kinds=None)]
        found = [i for i, _ in ann.search(q, scopes=wanted, k=50, live_only=True, kinds=None)]
        top10.append(len(set(found[:10]) & set(exact[:10])) / 10)
        top50.append(len(set(found) & set(exact)) / 50)
    assert np.mean(top10) >= 0.99, top10
    assert np.mean(top50) >= 0.97, top50


def _segments_while_growing(
    index: VectorIndex, rows: list[ProjectionRow], start: int, step: int
) -> list[int]:
    seen = []
    for lo in range(start, len(rows), step):
        index.apply(rows[lo : lo + step], [], fresh=[r.id for r in rows[lo : lo + step]])
        index.maintain()
        seen.append(index.index_segments())
    return seen


def test_maintain_keeps_the_vector_index_in_few_segments(tmp_path: Path) -> None:
    """Every ``maintain`` folds the rows added since into the index as a new segment, searched on its own; past
    ``MAX_SEGMENTS`` the index is rebuilt in one, and it still finds every row."""
    rng = np.random.default_rng(13)
    vecs = rng.standard_normal((4_400, 8)).astype(np.float32)
    rows = _rows(vecs, [("user:a",)] * len(vecs))
    index = VectorIndex(tmp_path / "v", dim=8, ann_threshold=1_000)
    index.apply(rows[:1_000], [], fresh=[r.id for r in rows[:1_000]])
    index.maintain()
    assert index.index_segments() == 1
    seen = _segments_while_growing(index, rows, 1_000, 100)  # 34 small deltas
    assert max(seen) == MAX_SEGMENTS  # small segments accumulate up to the cap (they cost little) ...
    assert 1 in seen[seen.index(MAX_SEGMENTS) :]  # ... then the index is rebuilt in one
    for probe in (3, 1_500, 4_399):
        assert (
            index.search(vecs[probe], scopes=["user:a"], k=1, live_only=True, kinds=None)[0][0]
            == rows[probe].id
        )


def test_large_deltas_rebuild_the_vector_index_before_the_segment_cap(tmp_path: Path) -> None:
    rng = np.random.default_rng(14)
    vecs = rng.standard_normal((1_000 + 10 * 1_024, 8)).astype(np.float32)
    rows = _rows(vecs, [("user:a",)] * len(vecs))
    index = VectorIndex(tmp_path / "v", dim=8, ann_threshold=1_000)
    index.apply(rows[:1_000], [], fresh=[r.id for r in rows[:1_000]])
    index.maintain()
    seen = _segments_while_growing(index, rows, 1_000, 1_024)
    rebuilt_at = seen.index(1)
    assert rebuilt_at == DELTA_ROWS // 1_024 - 1  # the maintain that found DELTA_ROWS new rows rebuilt
    assert max(seen) < MAX_SEGMENTS


def _single_writes(eng: Engine, n: int, start: int = 0) -> list[int]:
    """``n`` one-memory writes, each projected before the next; the pending appends after each."""
    seen = []
    for i in range(start, start + n):
        eng.write(f"small write number {i} about topic {i % 7}", ["user:a"])
        assert eng.reconciler.wait_projected()
        eng.reconciler.on_projector(lambda: None)  # and whatever maintenance followed the projection
        seen.append(eng.vectors.appends_since_maintain)
    return seen


def test_small_writes_never_pile_up_past_the_cap(engine: Engine) -> None:
    engine.reconciler.maintain_fragments, engine.reconciler.idle_fragments = 6, 10**9
    seen = _single_writes(engine, 15)
    assert max(seen) < 6  # compacted on reaching the cap
    assert seen[:5] == [1, 2, 3, 4, 5]  # one small fragment per write until then
    assert engine.verify().ok


def test_small_writes_are_compacted_once_writes_pause(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine.reconciler.idle_fragments = 4
    monkeypatch.setattr(reconciler, "IDLE_S", 600.0)  # a burst: however slow the machine, no pause in it
    assert _single_writes(engine, 6)[-1] == 6  # no maintenance in the burst's way
    monkeypatch.setattr(reconciler, "IDLE_S", 0.2)
    _single_writes(engine, 1, start=6)  # the last write of the burst, then a pause
    deadline = time.monotonic() + 30
    while engine.vectors.appends_since_maintain and time.monotonic() < deadline:
        time.sleep(0.05)
    assert engine.vectors.appends_since_maintain == 0  # compacted once the burst was over
    hit = engine.recall("small write number 5", ["user:a"], k=1)[0]
    assert hit.memory.content.startswith("small write number 5")
    assert engine.verify().ok


def test_small_fragments_are_compacted_at_close(
    data_dir: Path, embedder: CachedEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reconciler, "IDLE_S", 600.0)  # the idle rule never fires here
    eng = Engine.open(data_dir, embedder=embedder, warm=False)
    eng.reconciler.idle_fragments = 4
    assert _single_writes(eng, 5)[-1] == 5
    eng.close()
    with Engine.open(data_dir, embedder=embedder, warm=False) as again:
        stats = again.vectors._table.stats()
        assert (
            stats["fragment_stats"]["num_fragments"] == 1
        )  # the five one-row fragments were compacted into one
        assert again.verify().ok


def test_maintain_leaves_only_the_current_version_on_disk(tmp_path: Path) -> None:
    """Compaction rewrites every row; the files of the versions before it are deleted by the same ``maintain``,
    not minutes later, so the table after maintenance takes its size once (issue #17: 6.3 KB per memory at
    10,000 memories against 1.6 KB in the current version alone). Searches go on answering from it."""
    rng = np.random.default_rng(5)
    now = datetime(2026, 1, 1, tzinfo=UTC)
    vecs = rng.standard_normal((600, 384)).astype(np.float32)
    rows = [
        ProjectionRow(f"{i:032x}", "", "note", ("user:a",), True, now, list(map(float, vecs[i])))
        for i in range(600)
    ]
    index = VectorIndex(tmp_path / "v", dim=384)
    for start in range(0, 600, 50):  # small appends, then every row updated (a delete and an add each)
        index.apply(rows[start : start + 50], [], fresh=[r.id for r in rows[start : start + 50]])
    for start in range(0, 600, 100):
        index.apply([dataclasses.replace(r, live=False) for r in rows[start : start + 100]], [])
    index.maintain()

    data = sum(f.stat().st_size for f in (tmp_path / "v").rglob("*.lance") if f.is_file())
    assert data < 600 * 384 * 4 * 1.2  # one copy of the rows (each vector 1,536 bytes), not one per version
    assert len(index._table.list_versions()) == 1
    found = index.search(vecs[7], scopes=["user:a"], k=1, live_only=False, kinds=None)
    assert found[0][0] == f"{7:032x}"


@pytest.mark.parametrize("before", [None, "IvfFlat"], ids=["first-index", "ivf-flat-converted"])
def test_a_search_as_maintain_commits_the_new_index_answers_exactly(
    tmp_path: Path, before: str | None
) -> None:
    """A search that reads the table once ``maintain`` has committed the IVF_RQ index, but before ``maintain``
    has noted it (a recall beside the first build past the threshold, or beside the conversion of an older
    IVF_FLAT index), re-ranks the codes' estimates by exact distance like any other. It used to query the new
    index with the settings of the one before (none, or IVF_FLAT's, which has no estimates to re-rank): 5 of
    320 searches beside 25 builds returned RaBitQ estimates (0.6 off) in the wrong order."""
    rng = np.random.default_rng(31)
    vecs = rng.standard_normal((1_500, 64)).astype(np.float32)
    rows = _rows(vecs, [("user:a",)] * len(vecs))
    flat = VectorIndex(tmp_path / "flat", dim=64, ann_threshold=10**9, scalar_threshold=10**9)
    index = VectorIndex(tmp_path / "v", dim=64, ann_threshold=10**9)
    for each in (flat, index):
        each.apply(rows, [], fresh=[r.id for r in rows])
        each.maintain()
    if before is not None:
        index._table.create_index("vector", config=IvfFlat(distance_type="cosine", num_partitions=3))
    index = VectorIndex(tmp_path / "v", dim=64, ann_threshold=1_000, partition_rows=500)
    assert index._index_type == before
    queries = rng.standard_normal((8, 64)).astype(np.float32)
    exact = [flat.search(q, scopes=["user:a"], k=5, live_only=True, kinds=None) for q in queries]
    seen: list[list[tuple[str, float]]] = []
    build = index._index_vectors

    def build_then_search(table: object, count: int) -> None:
        build(table, count)  # type: ignore[arg-type]
        # The moment a search beside ``maintain`` may come: the new index is committed, maintain not yet back.
        seen.extend(index.search(q, scopes=["user:a"], k=5, live_only=True, kinds=None) for q in queries)

    index._index_vectors = build_then_search  # type: ignore[method-assign]
    index.maintain()
    assert _vector_index(index)[0] == VECTOR_INDEX
    assert len(seen) == len(queries)
    for got, want in zip(seen, exact, strict=True):
        assert [i for i, _ in got] == [i for i, _ in want]
        assert np.allclose([d for _, d in got], [d for _, d in want], atol=5e-4)
