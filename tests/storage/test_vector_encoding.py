"""Vectors are kept in half precision by both local stores (storage.adapters._half): what a user can see of it.
Half the bytes on disk, a rebuilt vector table that recalls exactly as before, an export/import round trip
that gives back the same vectors, and a store written with float32 vectors (before) that still opens."""

from __future__ import annotations

import io
import json
from pathlib import Path

import anyio
import kuzu
import lancedb
import numpy as np
import pyarrow as pa
import pytest

from server._engine import EngineHolder
from storage import CachedEmbedder, Engine, WriteItem
from storage.adapters import _half as half
from storage.adapters.kuzu import GraphStore
from storage.adapters.lance_vectors import StagedTable, VectorIndex
from storage.domain.errors import InvalidInput, StorageUnavailable
from storage.domain.records import ProjectionRow
from storage.domain.validation import MAX_VECTOR_TOP, MIN_VECTOR_TOP
from storage.importers import import_into
from tests.conftest import files_containing

TEXTS = [
    "Ana moved to Lisbon in 2021 and works at Acme as a designer.",
    "Bruno's daughter plays the cello every Tuesday evening.",
    "The office wifi password changed to ferns-and-fog last week.",
    "Carla is allergic to peanuts and shellfish.",
    "The quarterly report is due on the last Friday of March.",
    "Dario prefers window seats on long flights.",
    "The boiler in the basement was serviced in October.",
    "Elena's birthday party is at the lake house on June 12.",
]
QUERIES = [
    "Where does Ana live?",
    "cello lessons",
    "food allergies",
    "when is the report due",
    "flight seats",
]


def _supplied(n: int, seed: int = 7) -> np.ndarray:
    """Vectors a client supplies: any length (these are far from unit length), any float32 numbers."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, 384)) * 1000.0).astype(np.float32)


def _graph_file(data: Path) -> Path:
    graph = data / "graph"
    return (
        graph / (graph / "CURRENT").read_text().strip()
        if (graph / "CURRENT").exists()
        else graph / "graph-000001.kz"
    )


def _column_bytes(graph_file: Path, prefix: str) -> int:
    db = kuzu.Database(str(graph_file), read_only=True)
    try:
        conn = kuzu.Connection(db)
        result = conn.execute("CALL storage_info('Memory') RETURN column_name, num_pages")
        assert not isinstance(result, list)
        pages = 0
        while result.has_next():
            name, n = result.get_next()
            if str(name).startswith(prefix):
                pages += int(n)
        return pages * 4096
    finally:
        db.close()


def _lance_data_bytes(data: Path) -> int:
    return sum(f.stat().st_size for f in (data / "vectors").rglob("*.lance") if f.is_file())


def test_a_vector_takes_half_its_float32_bytes_in_each_store(
    tmp_path: Path, embedder: CachedEmbedder
) -> None:
    """1,200 memories with their vectors: the canonical column of vectors and the vector table each hold under
    0.85 KB a memory (float32 took 1.5 KB in each)."""
    n = 1_200
    vectors = _supplied(n)
    data = tmp_path / "data"
    with Engine.open(data, embedder=embedder, warm=False) as eng:
        items = [WriteItem(f"Note {i}: shelf {i % 13} holds box {i}.", ["user:ana"], vector=vectors[i].tolist())
                 for i in range(n)]  # fmt: skip
        eng.write_many(items)
        assert eng.reconciler.wait_projected(60)
        eng.vectors.maintain()
        eng.graph.checkpoint()
    vector_column = _column_bytes(_graph_file(data), "vector")
    assert vector_column / n < 850, vector_column / n
    assert _lance_data_bytes(data) / n < 850, _lance_data_bytes(data) / n


def test_a_rebuilt_vector_table_recalls_exactly_as_before(tmp_path: Path, embedder: CachedEmbedder) -> None:
    """``reindex`` rebuilds the vector table from the canonical store: the same rows, byte for byte, and the
    same recall answers (ids, order and scores)."""
    with Engine.open(tmp_path / "data", embedder=embedder, warm=False) as eng:
        eng.write_many([WriteItem(t, ["user:ana"]) for t in TEXTS])
        assert eng.reconciler.wait_projected(60)

        def answers() -> list[list[tuple[str, float]]]:
            return [
                [(h.memory.id, round(h.score, 9)) for h in eng.recall(q, ["user:ana"], k=5)] for q in QUERIES
            ]

        def table() -> dict[str, bytes]:
            rows = eng.vectors._table.to_arrow()
            return {
                i: np.asarray(v, dtype=np.float16).tobytes()
                for i, v in zip(rows["id"].to_pylist(), rows["vector"].to_pylist(), strict=True)
            }

        before, rows_before = answers(), table()
        assert eng.reindex().ok
        assert table() == rows_before
        assert answers() == before


def test_export_and_import_give_back_the_supplied_vectors_to_half_precision(
    tmp_path: Path, embedder: CachedEmbedder
) -> None:
    """A client's vectors come back from ``export`` within half precision (each number to 2**-11 of the
    largest, the direction to a cosine of 0.9999999); imported and exported again, they are the same numbers."""
    vectors = _supplied(len(TEXTS), seed=3)
    with Engine.open(tmp_path / "a", embedder=embedder, warm=False) as eng:
        eng.write_many(
            [WriteItem(t, ["user:ana"], vector=v.tolist()) for t, v in zip(TEXTS, vectors, strict=True)]
        )
        first = io.StringIO()
        eng.export(first, vectors=True)
    exported = {r["content"]: np.asarray(r["vector"]) for r in map(json.loads, first.getvalue().splitlines())
                if r["type"] == "memory"}  # fmt: skip
    for text, given in zip(TEXTS, vectors, strict=True):
        back = exported[text]
        assert np.max(np.abs(back - given)) <= np.max(np.abs(given)) * 2.0**-11
        assert float(back @ given) / (np.linalg.norm(back) * np.linalg.norm(given)) > 0.9999999
    Engine.import_export(tmp_path / "b", io.StringIO(first.getvalue()), embedder=embedder)
    with Engine.open(tmp_path / "b", embedder=embedder, warm=False) as copy:
        second = io.StringIO()
        copy.export(second, vectors=True)
    again = {r["content"]: r["vector"] for r in map(json.loads, second.getvalue().splitlines())
             if r["type"] == "memory"}  # fmt: skip
    assert again == {text: v.tolist() for text, v in exported.items()}


def _to_float32_layout(data: Path, vectors: dict[str, np.ndarray]) -> None:
    """Put a closed data directory back into the layout stores had before (a FLOAT[384] ``vector`` column in
    Kùzu, a float32 vector table in LanceDB), holding the full float32 vectors."""
    db = kuzu.Database(str(_graph_file(data)))
    conn = kuzu.Connection(db)
    conn.execute("ALTER TABLE Memory ADD vector FLOAT[384]")
    for mid, v in vectors.items():
        conn.execute(
            "MATCH (m:Memory {id: $id}) SET m.vector = CAST($v AS FLOAT[384])", {"id": mid, "v": v.tolist()}
        )
    conn.execute("CHECKPOINT")
    conn.execute("ALTER TABLE Memory DROP vector16")
    conn.execute("ALTER TABLE Memory DROP vector_exp")
    conn.execute("CHECKPOINT")
    db.close()
    lance = lancedb.connect(str(data / "vectors"))
    name = lance.list_tables().tables[0]
    old = lance.open_table(name).to_arrow()
    flat = np.concatenate([vectors[i] for i in old["id"].to_pylist()]).astype(np.float32)
    column = pa.FixedSizeListArray.from_arrays(pa.array(flat, type=pa.float32()), 384)
    table = old.set_column(old.schema.get_field_index("vector"), "vector", column)
    lance.drop_table(name)
    lance.create_table(name, table)


def test_a_store_written_with_float32_vectors_opens_and_converts(
    tmp_path: Path, embedder: CachedEmbedder
) -> None:
    """A data directory whose stores hold float32 vectors (every store before this change) opens, answers
    and verifies; its canonical vectors are converted at open, its vector table at the first maintenance."""
    data = tmp_path / "data"
    vectors = _supplied(len(TEXTS), seed=11)
    with Engine.open(data, embedder=embedder, warm=False) as eng:
        ids = [r.id for r in eng.write_many([WriteItem(t, ["user:ana"]) for t in TEXTS])]
        assert eng.reconciler.wait_projected(60)
        expected = [[h.memory.id for h in eng.recall(q, ["user:ana"], k=3)] for q in QUERIES]
        own = {
            i: np.asarray(eng.graph.vector_of(c, i), dtype=np.float32)
            for c in [eng.graph._writer]
            for i in ids
        }
    del vectors
    _to_float32_layout(data, own)
    with Engine.open(data, embedder=embedder, warm=False) as eng:
        assert eng.verify().ok
        with eng.graph.read() as s:
            for i, v in own.items():
                got = np.asarray(eng.graph.vector_of(s, i) or [])
                assert half.stored_bytes(got) == half.stored_bytes(v)
        assert eng.vectors._table.schema.field("vector").type.value_type == pa.float32()
        assert [[h.memory.id for h in eng.recall(q, ["user:ana"], k=3)] for q in QUERIES] == expected
        eng.write("Fabio keeps bees on the roof.", ["user:ana"])  # a write into the float32 table
        assert eng.reconciler.wait_projected(60)
        eng.vectors.maintain()
        assert eng.vectors._table.schema.field("vector").type.value_type == pa.float16()
        assert [[h.memory.id for h in eng.recall(q, ["user:ana"], k=3)] for q in QUERIES] == expected
        assert eng.verify().ok


def test_the_conversion_of_a_float32_store_says_how_far_it_got_while_it_runs(
    tmp_path: Path, embedder: CachedEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Converting takes a millisecond or two a memory: a large store keeps its first open after an upgrade busy
    for minutes, past the time a call waits. What the owner tells a waiting caller comes from here."""
    data = tmp_path / "data"
    ids, _ = _float32_store(data, embedder)
    monkeypatch.setattr(GraphStore, "HALVE_BATCH", 2)
    said: list[str] = []
    with Engine.open(data, embedder=embedder, warm=False, progress=said.append) as eng:
        assert eng.verify().ok
    n = len(ids)
    assert said[0] == (
        f"converting the stored vectors to half precision, once after an upgrade: 0 of {n} memories"
    )
    assert [int(m.split(": ")[1].split(" of ")[0]) for m in said] == [*range(0, n, 2), n]
    assert all(f" of {n} memories" in m for m in said)
    assert "min left" in said[1]
    said.clear()
    with Engine.open(data, embedder=embedder, warm=False, progress=said.append):
        pass
    assert said == []  # converted once


def test_a_conversion_stopped_midway_counts_the_whole_store_when_it_resumes(
    tmp_path: Path, embedder: CachedEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The owner is stopped while it converts (a restart, a crash) and the next open goes on from the rows still
    unconverted: a waiting caller must be told how far the store got ("4 of 8"), not a count that starts again
    from nothing over what is left ("0 of 4"), which reads as the store having shrunk or the work restarted."""
    data = tmp_path / "data"
    ids, own = _float32_store(data, embedder)
    monkeypatch.setattr(GraphStore, "HALVE_BATCH", 2)
    n = len(ids)

    class Stopped(Exception):
        pass

    def stop_after_two_batches(message: str) -> None:
        if message.startswith("converting") and f": 4 of {n} memories" in message:
            raise Stopped

    with pytest.raises(Stopped):
        Engine.open(data, embedder=embedder, warm=False, progress=stop_after_two_batches)
    said: list[str] = []
    with Engine.open(data, embedder=embedder, warm=False, progress=said.append) as eng:
        assert eng.verify().ok
        with eng.graph.read() as s:
            for i, v in own.items():
                assert half.stored_bytes(np.asarray(eng.graph.vector_of(s, i) or [])) == half.stored_bytes(v)
    assert (
        said[0]
        == f"converting the stored vectors to half precision, once after an upgrade: 4 of {n} memories"
    )
    assert [int(m.split(": ")[1].split(" of ")[0]) for m in said] == [4, 6, n]
    assert all(f" of {n} memories" in m for m in said)
    assert "min left" in said[1]


def test_a_call_that_waits_for_a_converting_store_is_told_what_it_waits_for(
    tmp_path: Path, embedder: CachedEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the owner's engine holder, as a tool call meets it: while the conversion runs, the call's error
    (and ``mnemograph status``) say what the store is doing and how far it got, not only "still opening"."""
    data = tmp_path / "data"
    vectors = _supplied(300, seed=5)
    with Engine.open(data, embedder=embedder, warm=False) as eng:
        ids = [
            r.id
            for r in eng.write_many(
                [
                    WriteItem(f"Shelf {i} holds box {i}.", ["user:ana"], vector=v)
                    for i, v in enumerate(vectors)
                ]
            )
        ]
        own = {i: np.asarray(eng.graph.vector_of(eng.graph._writer, i), dtype=np.float32) for i in ids}
    _to_float32_layout(data, own)
    monkeypatch.setattr(GraphStore, "HALVE_BATCH", 1)
    told = _told_while_opening(data)
    converting = [t for t in told if "converting the stored vectors" in t[0]]
    assert converting, told
    message, hint, problem = converting[-1]
    assert message.startswith("the memory store is still opening (converting the stored vectors to half ")
    assert " of 300 memories" in message
    assert "call the tool again in a minute or two" in hint
    assert problem is not None
    assert problem.startswith("opening: converting the stored vectors")


def test_a_conversion_after_a_retried_open_is_reported_not_the_old_error(
    tmp_path: Path, embedder: CachedEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The owner's first open attempt fails for a moment (the directory held by a CLI ``reindex``, say) and its
    retry then converts the vectors for minutes: a waiting call and ``mnemograph status`` said the first
    attempt's error ("wait a few seconds") the whole time, never the conversion and how far it got."""
    from server import _engine

    data = tmp_path / "data"
    vectors = _supplied(200, seed=9)
    with Engine.open(data, embedder=embedder, warm=False) as eng:
        items = [
            WriteItem(f"Crate {i} holds jar {i}.", ["user:ana"], vector=v) for i, v in enumerate(vectors)
        ]
        ids = [r.id for r in eng.write_many(items)]
        own = {i: np.asarray(eng.graph.vector_of(eng.graph._writer, i), dtype=np.float32) for i in ids}
    _to_float32_layout(data, own)
    monkeypatch.setattr(GraphStore, "HALVE_BATCH", 1)
    real, attempts = _engine._open_engine, []

    def held_once(*args: object) -> Engine:
        attempts.append(1)
        if len(attempts) == 1:
            raise StorageUnavailable("the data directory is held by mnemograph reindex")
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(_engine, "_open_engine", held_once)
    told = _told_while_opening(data)
    assert len(attempts) == 2
    converting = [t for t in told if "converting the stored vectors" in t[0]]
    assert converting, told[-3:]
    message, _, problem = converting[-1]
    assert " of 200 memories" in message
    assert problem is not None
    assert problem.startswith("opening: converting the stored vectors")


def _float32_store(data: Path, embedder: CachedEmbedder) -> tuple[list[str], dict[str, np.ndarray]]:
    """A store of ``TEXTS`` in the layout of every store before half precision (float32 vectors); their ids and
    vectors."""
    with Engine.open(data, embedder=embedder, warm=False) as eng:
        ids = [r.id for r in eng.write_many([WriteItem(t, ["user:ana"]) for t in TEXTS])]
        own = {i: np.asarray(eng.graph.vector_of(eng.graph._writer, i), dtype=np.float32) for i in ids}
    _to_float32_layout(data, own)
    return ids, own


def _told_while_opening(data: Path) -> list[tuple[str, str, str | None]]:
    """What a tool call is told, again and again, while the owner's engine holder opens ``data``: each refused
    call's message, hint and the holder's ``problem`` (what ``mnemograph status`` shows), until a call gets the
    engine."""
    holder = EngineHolder(data, wait=0)
    told: list[tuple[str, str, str | None]] = []

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(holder.run)
            while True:
                try:
                    await holder.get()
                except StorageUnavailable as exc:
                    told.append((exc.message, exc.hint or "", holder.problem))
                    await anyio.sleep(0.002)
                else:
                    break
        await holder.close()

    anyio.run(main)
    return told


def _jsonl(path: Path, vectors: list[np.ndarray]) -> None:
    with path.open("w") as out:
        for i, v in enumerate(vectors):
            out.write(
                json.dumps({"content": f"Supplied vector {i}: shelf {i} holds a box.", "vector": v.tolist()})
                + "\n"
            )


@pytest.mark.parametrize(
    ("top", "said"),
    [
        (1e300, "1e\\+300"),  # finite as JSON gives it, infinite as a 32-bit float
        (3.0e38, "3e\\+38"),  # a 32-bit float, but past 2**127: half precision may round it up to infinity
        (1e-300, "1e-300"),  # nothing left as a 32-bit float
        (1e-40, "1e-40"),  # float32 subnormals: fewer bits come back than were stored
        (0.0, "all zeros"),
    ],
)
def test_a_supplied_vector_the_stores_cannot_give_back_is_refused_and_nothing_is_written(
    engine: Engine, tmp_path: Path, top: float, said: str
) -> None:
    """A vector whose numbers a 32-bit float cannot hold to half precision (its largest number past 2**127, or
    under 2**-125, zero among them) came back from the store infinite, as zeros, or cut: an export no import
    took back, a recall lane comparing nothing. ``import --from jsonl`` refuses the file naming the line, and
    writes nothing."""
    vectors = list(_supplied(3, seed=5))
    bad = vectors[1] / np.abs(vectors[1]).max()
    vectors[1] = bad.astype(np.float64) * top
    source = tmp_path / "vectors.jsonl"
    _jsonl(source, vectors)
    with pytest.raises(InvalidInput, match=f"item 1: vector's largest number .*{said}"):
        import_into(engine, "jsonl", source, "user:ana")
    with engine.graph.read() as conn:
        assert engine.graph.all_ids(conn) == {}


def test_supplied_vectors_at_the_edges_of_the_range_come_back_the_same_numbers(
    engine: Engine, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    """The largest and smallest vectors taken: exported, they point where they were given (cosine above
    0.9999999, every number finite); imported and exported again, they are the same numbers."""
    base = _supplied(4, seed=9)
    tops = [MAX_VECTOR_TOP, 1e38, 1e-37, MIN_VECTOR_TOP]
    given = [(v / np.abs(v).max()).astype(np.float64) * t for v, t in zip(base, tops, strict=True)]
    source = tmp_path / "vectors.jsonl"
    _jsonl(source, given)
    assert import_into(engine, "jsonl", source, "user:ana").added == 4
    first = io.StringIO()
    engine.export(first, vectors=True)
    exported = [r for r in map(json.loads, first.getvalue().splitlines()) if r["type"] == "memory"]
    by_text = {r["content"]: np.asarray(r["vector"], dtype=np.float64) for r in exported}
    for i, v in enumerate(given):
        back = by_text[f"Supplied vector {i}: shelf {i} holds a box."]
        assert np.all(np.isfinite(back)), tops[i]
        assert float(back @ v) / (np.linalg.norm(back) * np.linalg.norm(v)) > 0.9999999, tops[i]
    Engine.import_export(tmp_path / "copy", io.StringIO(first.getvalue()), embedder=embedder)
    with Engine.open(tmp_path / "copy", embedder=embedder, warm=False) as copy:
        second = io.StringIO()
        copy.export(second, vectors=True)
    again = {
        r["content"]: r["vector"]
        for r in map(json.loads, second.getvalue().splitlines())
        if r["type"] == "memory"
    }
    assert again == {text: v.tolist() for text, v in by_text.items()}


def test_an_export_holding_a_vector_outside_the_range_restores_with_the_content_embedded_again(
    engine: Engine, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    """Stores before this range was enforced took a client's all-zero vector, or one past 32-bit floats (which
    their exports wrote as ``Infinity``). Such an export restores whole: those memories get their content's
    own vector from the store's model, the others keep theirs, and recall finds them by meaning."""
    engine.write_many([WriteItem(t, ["user:ana"]) for t in TEXTS])
    out = io.StringIO()
    engine.export(out, vectors=True)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    memories = [r for r in lines if r["type"] == "memory"]
    zeroed, infinite, kept = memories[0], memories[1], memories[2]
    kept_vector = list(kept["vector"])
    zeroed["vector"] = [0.0] * 384
    infinite["vector"] = [float("inf") if i % 2 else float("-inf") for i in range(384)]
    text = "\n".join(json.dumps(r) for r in lines) + "\n"
    assert "Infinity" in text
    Engine.import_export(tmp_path / "restored", io.StringIO(text), embedder=embedder)
    with Engine.open(tmp_path / "restored", embedder=embedder, warm=False) as copy:
        with copy.graph.read() as conn:
            for record in (zeroed, infinite):
                got = np.asarray(copy.graph.vector_of(conn, record["id"]), dtype=np.float64)
                own = np.asarray(embedder.embed([record["content"]])[0], dtype=np.float64)
                assert float(got @ own) / (np.linalg.norm(got) * np.linalg.norm(own)) > 0.9999
            assert copy.graph.vector_of(conn, kept["id"]) == kept_vector
        assert copy.reconciler.wait_projected(60)
        (hit,) = copy.recall(zeroed["content"], ["user:ana"], k=1, recipe="vector")
        assert hit.memory.id == zeroed["id"]


def test_an_erasure_whose_rebuild_meets_the_conversion_of_a_float32_vector_table_leaves_it_whole(
    tmp_path: Path, embedder: CachedEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store written before (float32 vectors) converts its vector table at its first maintenance, a rebuild
    in the projector thread; an erasure rebuilds the table in its own thread meanwhile. The first maintenance
    came while an erasure's rebuild was staged: it took the same table name, dropped the erasure's table and
    then every table but its own, and after the erasure's switch the live table's files were gone (recall and
    ``verify`` failed with Lance's "Not found" until a restart). Now maintenance leaves the conversion to the
    staged rebuild, whose table is half precision."""
    data = tmp_path / "data"
    with Engine.open(data, embedder=embedder, warm=False) as eng:
        ids = [r.id for r in eng.write_many([WriteItem(t, ["user:ana"]) for t in TEXTS])]
        assert eng.reconciler.wait_projected(60)
        own = {i: np.asarray(eng.graph.vector_of(eng.graph._writer, i), dtype=np.float32) for i in ids}
    _to_float32_layout(data, own)
    gone = ids[3]
    with Engine.open(data, embedder=embedder, warm=False) as eng:
        assert eng.vectors._table.schema.field("vector").type.value_type == pa.float32()
        build = VectorIndex.build
        met: list[str] = []

        def staged_then_maintained(self: VectorIndex, rows: list[ProjectionRow]) -> StagedTable:
            staged = build(self, rows)
            if not met:  # the erasure's rebuild is staged: the projector's maintenance comes now
                met.append(staged._name)
                eng.reconciler.on_projector(eng.vectors.maintain)
            return staged

        monkeypatch.setattr(VectorIndex, "build", staged_then_maintained)
        eng.erase(gone, confirm=gone)
        monkeypatch.setattr(VectorIndex, "build", build)
        assert met
        assert eng.verify().ok
        assert eng.vectors.count() == len(TEXTS) - 1
        assert eng.vectors._table.schema.field("vector").type.value_type == pa.float16()
        hits = eng.recall(TEXTS[0], ["user:ana"], k=3, recipe="vector")
        assert hits[0].memory.id == ids[0]
    assert not files_containing(data, half.stored_bytes(own[gone])[:32])
    assert not files_containing(data, own[gone][:16].tobytes())
