"""Export, import and backup: a restored store holds the same records and recalls identically."""

from __future__ import annotations

import io
import json
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from storage import CachedEmbedder, Engine, EntityIn, InvalidInput, RelationIn

QUERIES = ["where does Ana work", "seat preference", "Lisbon trip", "coffee", "project deadline", "Bruno"]


def _seed(eng: Engine) -> None:
    eng.create_scope("project:apollo", parent="team:core")
    a = eng.write(
        "Ana Lima works at Acme Corp in Lisbon.",
        ["user:ana", "team:core"],
        kind="fact",
        entities=[EntityIn("Ana Lima", "person", ("Ana",)), EntityIn("Acme Corp", "organization")],
        relations=[RelationIn("Ana Lima", "works_at", "Acme Corp")],
        metadata={"source": "chat", "n": [1, 2]},
    )
    eng.amend(a.id, "Ana Lima works at Globex in Porto since May.", reason="she moved")
    eng.write("Ana prefers aisle seats on flights.", ["user:ana"], kind="preference")
    trip = eng.write(
        "The Lisbon trip is on 2024-06-03.",
        ["user:ana"],
        kind="event",
        event_time=datetime(2024, 6, 3, tzinfo=UTC),
    )
    eng.retire(trip.id, reason="cancelled")
    eng.write("The Lisbon trip is on 2024-06-03.", ["user:ana"], kind="event")  # re-asserted: salted id
    eng.write("Bruno drinks his coffee black.", ["user:bruno"], entities=[EntityIn("Bruno", "person")])
    eng.write(
        "The apollo project deadline is Friday.",
        ["project:apollo"],
        valid_from=datetime(2024, 1, 1, tzinfo=UTC),
        valid_to=datetime(2030, 1, 1, tzinfo=UTC),
    )


def _everything(eng: Engine) -> dict[str, object]:
    with eng.graph.read() as conn:
        ids = sorted(eng.graph.all_ids(conn))
        records = eng.graph.fetch(conn, ids)
        relations = sorted(eng.graph.export_relations(conn))
        entities = eng.graph.export_entities(conn)
        supersedes = sorted(eng.graph.export_supersedes(conn))
    return {
        "memories": [records[i] for i in ids],
        "scopes": eng.list_scopes(),
        "relations": relations,
        "entities": entities,
        "supersedes": supersedes,
    }


def _recall_all(eng: Engine) -> list[list[str]]:
    scopes = ["user:ana", "user:bruno", "project:apollo"]
    return [[h.memory.id for h in eng.recall(q, scopes, k=5)] for q in QUERIES] + [
        [h.memory.id for h in eng.recall(q, scopes, k=5, include_history=True)] for q in QUERIES
    ]


@pytest.mark.parametrize("vectors", [True, False])
def test_export_then_import_restores_everything_and_recalls_identically(
    engine: Engine, tmp_path: Path, embedder: CachedEmbedder, vectors: bool
) -> None:
    _seed(engine)
    buf = io.StringIO()
    summary = engine.export(buf, vectors=vectors)
    assert summary.memories == 7
    lines = [json.loads(x) for x in buf.getvalue().splitlines()]
    assert lines[0]["type"] == "header"
    assert lines[0]["dim"] == 384
    assert {x["type"] for x in lines} == {"header", "scope", "entity", "memory", "supersedes", "relation"}
    assert all(("vector" in x) == vectors for x in lines if x["type"] == "memory")

    restored = tmp_path / "restored"
    result = Engine.import_export(restored, io.StringIO(buf.getvalue()), embedder=embedder)
    assert result.memories == 7
    assert result.reembedded == (0 if vectors else 7)
    with Engine.open(restored, embedder=embedder, warm=False) as copy:
        assert copy.verify().ok
        assert _everything(copy) == _everything(engine)
        assert _recall_all(copy) == _recall_all(engine)
        # the restored store goes on working: the re-asserted content is still recognised as a duplicate
        again = copy.write("The Lisbon trip is on 2024-06-03.", ["user:ana"], kind="event")
        assert again.status == "duplicate"


def test_export_of_one_scope_takes_its_subtree_only(
    engine: Engine, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    _seed(engine)
    buf = io.StringIO()
    summary = engine.export(buf, scope="team:core")
    text = buf.getvalue()
    assert "Bruno" not in text
    assert "aisle seats" not in text
    assert summary.memories == 3  # both versions of Ana's job (shared with team:core) and the apollo deadline
    assert "user:ana" not in text  # membership in scopes outside the export is not disclosed
    Engine.import_export(tmp_path / "core", io.StringIO(text), embedder=embedder)
    with Engine.open(tmp_path / "core", embedder=embedder, warm=False) as copy:
        assert copy.verify().ok
        assert {s.id: s.parent for s in copy.list_scopes()} == {
            "team:core": None,
            "project:apollo": "team:core",
        }
        hits = copy.recall("where does Ana work", ["project:apollo"])
        assert [h.memory.content for h in hits][:1] == ["Ana Lima works at Globex in Porto since May."]


def test_merge_into_a_store_with_its_own_memories_adds_the_rest_once(
    engine: Engine, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    _seed(engine)
    buf = io.StringIO()
    engine.export(buf)
    with Engine.open(tmp_path / "other", embedder=embedder, warm=False) as other:
        own = other.write("Carla keeps the spare keys.", ["user:carla"])
        other.create_scope("team:core", parent="org:acme")  # the store's own tree: a merge must not move it
        other.write("Bruno drinks his coffee black.", ["user:bruno"], entities=[EntityIn("Bruno", "person")])
        first = other.merge_export(io.StringIO(buf.getvalue()))
        assert (first.memories, first.already) == (6, 1)  # Bruno's coffee was there already (same id)
        before = _everything(other)
        second = other.merge_export(io.StringIO(buf.getvalue()))
        assert (second.memories, second.already, second.relations) == (0, 7, 0)
        assert _everything(other) == before
        assert other.verify().ok
        assert {s.id: s.parent for s in other.list_scopes()}["team:core"] == "org:acme"
        assert other.read(own.id).memory.content == "Carla keeps the spare keys."
        merged = _everything(other)
        mine = _everything(engine)
        assert {m.id for m in mine["memories"]} <= {m.id for m in merged["memories"]}  # type: ignore[attr-defined]
        assert set(mine["relations"]) <= set(merged["relations"])  # type: ignore[arg-type]
        assert set(mine["supersedes"]) <= set(merged["supersedes"])  # type: ignore[arg-type]
        assert _recall_all(other) == _recall_all(engine)


def test_import_refuses_a_non_empty_directory_and_bad_files_changing_nothing(
    engine: Engine, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    engine.write("Something.", ["user:ana"])
    buf = io.StringIO()
    engine.export(buf)
    good = buf.getvalue()
    with pytest.raises(InvalidInput, match="not an empty directory"):
        Engine.import_export(engine.data_dir, io.StringIO(good), embedder=embedder)
    bad_files = {
        "empty": "",
        "no header": good.split("\n", 1)[1],
        "not json": good + "{oops\n",
        "bad scope": good.replace('"user:ana"', '"user:a/../b"'),
        "bad id": good.replace('"id": "', '"id": "zz', 1) if '"type": "memory"' in good else good,
        "NUL content": good.replace("Something.", "Some\\u0000thing."),
    }
    for name, text in bad_files.items():
        target = tmp_path / name.replace(" ", "-")
        with pytest.raises(InvalidInput):
            Engine.import_export(target, io.StringIO(text), embedder=embedder)
        assert not target.exists(), f"{name}: a refused import created {target}"


def test_backup_while_writes_go_on_opens_as_a_data_dir_and_verifies(
    engine: Engine, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    _seed(engine)
    stop = threading.Event()
    written: list[str] = []

    def writer() -> None:
        n = 0
        while not stop.is_set():
            written.append(engine.write(f"Background note number {n}.", ["user:busy"]).id)
            n += 1

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        summaries = [engine.backup(tmp_path / f"backup-{i}") for i in range(2)]
    finally:
        stop.set()
        thread.join()
    for summary in summaries:
        with Engine.open(summary.path, embedder=embedder, warm=False) as copy:
            report = copy.verify()
            assert report.ok, report.drift
            assert report.canonical_memories == summary.memories
            assert report.canonical_seq == summary.seq
            assert copy.recall("Lisbon trip", ["user:ana"])
            assert (Path(summary.path) / "audit.jsonl").read_text().startswith('{"')  # the audit log travels
    with pytest.raises(InvalidInput, match="not an empty directory"):
        engine.backup(tmp_path / "backup-0")
    with pytest.raises(InvalidInput, match="outside the data directory"):
        engine.backup(engine.data_dir / "inside")


def test_an_ended_relation_stays_ended_after_export_and_import(
    engine: Engine, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    # Ana lived in Lisbon until she moved to Porto: restored, Lisbon must not be her current home again.
    lisbon = engine.write("Ana lives in Lisbon.", ["user:sam"])
    porto = engine.write("Ana moved to Porto in March 2023.", ["user:sam"])
    before = (engine.read(lisbon.id).relations, engine.read(porto.id).relations)
    assert before[0][0].startswith("Ana —lives_in→ Lisbon [? → 2023-03-01, ended by")
    buf = io.StringIO()
    engine.export(buf)
    Engine.import_export(tmp_path / "restored", io.StringIO(buf.getvalue()), embedder=embedder)
    with Engine.open(tmp_path / "restored", embedder=embedder, warm=False) as copy:
        assert (copy.read(lisbon.id).relations, copy.read(porto.id).relations) == before


def test_import_refuses_a_hostile_entity_proposal_changing_nothing(
    engine: Engine, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    """A same_as record whose score is not a number from 0 to 1 (NaN, infinity, true), whose scopes are not a
    list of the file's scopes, or whose memory is not in the file: refused, naming the line; nothing written."""
    mid = engine.write("Ana works with Bob.", ["user:ana"]).id
    buf = io.StringIO()
    engine.export(buf)
    people = [
        {"type": "entity", "id": n.lower(), "name": n, "entity_type": "person", "aliases": []}
        for n in ("Zed", "Zedd")
    ]
    good = buf.getvalue() + "".join(json.dumps(p) + "\n" for p in people)
    proposal = {
        "type": "same_as", "id": "0123456789abcdef", "a": "Zed", "b": "Zedd", "tier": "fuzzy", "score": 0.9,
        "memory_id": mid, "status": "pending", "created_at": "2026-01-01T00:00:00+00:00", "decided_at": None,
        "decided_by": "", "scopes": ["user:ana"],
    }  # fmt: skip
    fine = tmp_path / "fine"
    assert (
        Engine.import_export(
            fine, io.StringIO(good + json.dumps(proposal) + "\n"), embedder=embedder
        ).proposals
        == 1
    )
    bad = {
        "NaN score": {"score": float("nan")},
        "infinite score": {"score": float("inf")},
        "boolean score": {"score": True},
        "score above 1": {"score": 7.5},
        "scopes a string": {"scopes": "user:ana"},
        "scope not in the file": {"scopes": ["team:elsewhere"]},
        "no scopes": {"scopes": []},
        "memory not in the file": {"memory_id": "f" * 32},
    }
    for name, change in bad.items():
        target = tmp_path / name.replace(" ", "-")
        line = json.dumps({**proposal, **change})
        with pytest.raises(InvalidInput, match="line"):
            Engine.import_export(target, io.StringIO(good + line + "\n"), embedder=embedder)
        assert not target.exists(), f"{name}: a refused import created {target}"
