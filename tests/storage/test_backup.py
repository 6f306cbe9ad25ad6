"""Export, import and backup: a restored store holds the same records and recalls identically."""

from __future__ import annotations

import io
import json
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from scopes import Grant, Principal
from storage import CachedEmbedder, Engine, EntityIn, InvalidInput, RelationIn
from storage.adapters.kuzu._cypher import _rows as kuzu_rows
from storage.domain.models import MessageIn
from storage.enrich.days import is_day_key

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
    with pytest.raises(InvalidInput, match="not an empty directory") as refused:
        engine.backup(tmp_path / "backup-0")
    assert "back up into a new directory" in str(refused.value.hint)  # not the import's advice
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


def test_what_was_known_while_a_plan_stood_survives_export_and_import(
    engine: Engine, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    """A cancelled plan's end of the value it was to replace (kept apart for known_at, issue #14) is exported
    and restored: known_at between the plan and its cancellation, as_of after its date, answers the plan
    alone in the copy too (without the record it answered both)."""
    starts = datetime.now(UTC).replace(microsecond=0) + timedelta(days=400)
    engine.write("Ana works at Acme.", ["user:ana"], kind="fact")
    plan = engine.write("Ana works at Initech.", ["user:ana"], kind="fact", valid_from=starts)
    engine.retire(plan.id, reason="the offer fell through")
    stored = engine.read(plan.id).memory
    assert stored.retired_at is not None
    between = stored.recorded_at + (stored.retired_at - stored.recorded_at) / 2

    def employers(eng: Engine) -> list[str]:
        hits = eng.recall(
            "where does Ana work", ["user:ana"], as_of=starts + timedelta(days=30), known_at=between
        )
        return [h.memory.content for h in hits if "works at" in h.memory.content]

    assert employers(engine) == ["Ana works at Initech."]
    buf = io.StringIO()
    summary = engine.export(buf)
    assert summary.planned_ends == 1
    Engine.import_export(tmp_path / "restored", io.StringIO(buf.getvalue()), embedder=embedder)
    with Engine.open(tmp_path / "restored", embedder=embedder, warm=False) as copy:
        assert employers(copy) == ["Ana works at Initech."]


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


def _shown(eng: Engine, ids: list[str]) -> list[object]:
    """Everything a user sees: memory_read of each memory (record, versions, relations, contradictions, the
    model pass's outcome) and what recall returns, current and with history (as sets: "born in Faro" and "born
    in Evora" tie in BM25, and a tie may break either way in another index)."""
    return [eng.read(i) for i in ids] + [
        {(h.memory.id, h.memory.status) for h in eng.recall(q, ["user:sam"], k=10, include_history=hist)}
        for q in ("coffee", "where was Ana born", "Tom allergic", "where does Ana work")
        for hist in (False, True)
    ]


def test_contradictions_and_model_passes_survive_export_and_import(
    engine: Engine, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    """An export then an import into a fresh store showed the two memories of a conflict as unrelated, and
    every memory the model read as never read by it."""
    from storage.enrich.results import LlmResult, LlmStatement, Usage

    class Model:
        model = "sampling"

        def extract(self, content: str, *, written_at: datetime, speaker: str | None) -> LlmResult:
            return LlmResult((LlmStatement("Ana", "works_at", "Acme", "asserted"),), Usage(7, 3), "m1", 1)

    ids = [
        engine.write(text, ["user:sam"]).id
        for text in ("I love coffee.", "I hate coffee.", "Ana was born in Faro.", "Ana was born in Evora.")
    ]
    engine.use_sampling()
    ids.append(
        engine.write(
            "Big news from Ana today: she signed with the Acme people.", ["user:sam"], extractor=Model()
        ).id
    )
    assert engine.sampler is not None
    assert engine.sampler.wait_idle(30)
    before = _shown(engine, ids)
    assert before[0].contradicts == (ids[1],)  # type: ignore[attr-defined]
    assert ": done (1 relation(s) added" in (before[4].enrichment or "")  # type: ignore[attr-defined]
    buf = io.StringIO()
    engine.export(buf)
    Engine.import_export(tmp_path / "restored", io.StringIO(buf.getvalue()), embedder=embedder)
    with Engine.open(tmp_path / "restored", embedder=embedder, warm=False) as copy:
        assert copy.verify().ok
        assert _shown(copy, ids) == before
        # Once more: an export of the restored store holds the same lines (but for when it was written).
        again = io.StringIO()
        copy.export(again)
    assert sorted(again.getvalue().splitlines()[1:]) == sorted(buf.getvalue().splitlines()[1:])


def _contradiction(new: str, old: str) -> dict[str, str]:
    """An export's line linking ``new`` as contradicting ``old``."""
    return {
        "type": "contradicts",
        "new": new,
        "old": old,
        "predicate": "works_with",
        "at": "2026-01-01T00:00:00Z",
    }


def _proposal_line(**change: object) -> str:
    proposal = {
        "type": "same_as", "id": "0123456789abcdef", "a": "Zed", "b": "Zedd", "tier": "fuzzy", "score": 0.9,
        "memory_id": "", "status": "pending", "created_at": "2026-01-01T00:00:00+00:00", "decided_at": None,
        "decided_by": "", "scopes": ["user:ana"],
    }  # fmt: skip
    return json.dumps({**proposal, **change}) + "\n"


def test_import_refuses_links_and_records_it_cannot_place_changing_nothing(
    engine: Engine, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    """A proposal naming an entity the file does not hold was skipped silently; two proposals under one id for
    different pairs made two links under that id; a contradiction or a model pass's record naming a memory the
    file does not hold, a hostile record: each refuses the file, naming its line, and nothing is written."""
    mid = engine.write("Ana works with Bob.", ["user:ana"]).id
    other = engine.write("Bob works with Ana.", ["user:ana"]).id
    buf = io.StringIO()
    engine.export(buf)
    people = "".join(
        json.dumps({"type": "entity", "id": n.lower(), "name": n, "entity_type": "person", "aliases": []})
        + "\n"
        for n in ("Zed", "Zedd", "Zoe")
    )
    good = buf.getvalue() + people
    link = _contradiction(other, mid)
    record = {
        "type": "enrichment", "memory_id": mid, "status": "done", "detail": "1 relation(s) added", "model": "m",
        "input_tokens": 1, "output_tokens": 2, "cache_read_tokens": 0, "cache_write_tokens": None,
        "at": "2026-01-01T00:00:00Z",
    }  # fmt: skip
    extra = _proposal_line(memory_id=mid) + json.dumps(link) + "\n" + json.dumps(record) + "\n"
    fine = Engine.import_export(tmp_path / "fine", io.StringIO(good + extra), embedder=embedder)
    assert (fine.proposals, fine.contradictions, fine.enrichments) == (1, 1, 1)
    with Engine.open(tmp_path / "fine", embedder=embedder, warm=False) as copy:
        assert copy.read(mid).contradicts == (other,)
        assert (
            copy.read(mid).enrichment
            == "llm m: done (1 relation(s) added); tokens in 1 (cache read 0, cache write None), out 2"
        )
    n = len(good.splitlines())  # the line of the first record added below
    bad = {
        "an entity not in the file": (_proposal_line(memory_id=mid, b="Nobody"), f"line {n + 1}: .*'Nobody'"),
        "one id, two pairs": (
            _proposal_line(memory_id=mid) + _proposal_line(memory_id=mid, b="Zoe"),
            f"line {n + 2}: proposal 0123456789abcdef is given for another pair .*line {n + 1}",
        ),
        "one id twice": (
            _proposal_line(memory_id=mid) + _proposal_line(memory_id=mid, a="Zedd", b="Zed"),
            f"line {n + 2}: proposal 0123456789abcdef is given again",
        ),
        "a contradiction with a memory not in the file": (
            json.dumps({**link, "old": "f" * 32}) + "\n",
            f"line {n + 1}: a contradiction names memory f{{32}}",
        ),
        "a model pass of a memory not in the file": (
            json.dumps({**record, "memory_id": "f" * 32}) + "\n",
            f"line {n + 1}: a model pass's record names memory",
        ),
        "a model pass recorded twice": (
            json.dumps(record) + "\n" + json.dumps(record) + "\n",
            f"line {n + 2}",
        ),
        "an unknown model pass status": (json.dumps({**record, "status": "pwned"}) + "\n", f"line {n + 1}"),
        "negative tokens": (json.dumps({**record, "input_tokens": -5}) + "\n", f"line {n + 1}"),
        "boolean tokens": (json.dumps({**record, "output_tokens": True}) + "\n", f"line {n + 1}"),
        "an empty predicate": (json.dumps({**link, "predicate": ""}) + "\n", f"line {n + 1}"),
    }
    for name, (lines, error) in bad.items():
        target = tmp_path / name.replace(" ", "-")
        with pytest.raises(InvalidInput, match=error):
            Engine.import_export(target, io.StringIO(good + lines), embedder=embedder)
        assert not target.exists(), f"{name}: a refused import created {target}"


def test_a_merge_refuses_a_proposal_id_this_store_holds_for_another_pair(
    engine: Engine, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    mid = engine.write("Ana works with Bob.", ["user:ana"]).id
    first = io.StringIO()
    engine.export(first)
    carla = engine.write("Carla keeps the spare keys.", ["user:ana"]).id
    second = io.StringIO()
    engine.export(second)
    people = "".join(
        json.dumps({"type": "entity", "id": n.lower(), "name": n, "entity_type": "person", "aliases": []})
        + "\n"
        for n in ("Zed", "Zedd", "Zoe")
    )
    Engine.import_export(
        tmp_path / "store",
        io.StringIO(first.getvalue() + people + _proposal_line(memory_id=mid)),
        embedder=embedder,
    )
    hostile = second.getvalue() + people + _proposal_line(memory_id=carla, b="Zoe")
    with Engine.open(tmp_path / "store", embedder=embedder, warm=False) as store:
        with pytest.raises(InvalidInput, match=r"line .*this store holds that proposal for 'Zed' and 'Zedd'"):
            store.merge_export(io.StringIO(hostile))
        with store.graph.read() as conn:
            assert set(store.graph.all_ids(conn)) == {mid}
            assert [(p.a, p.b) for p in store.graph.same_as(conn)] == [("Zed", "Zedd")]


def test_a_scope_export_carries_both_entities_of_its_proposals(
    engine: Engine, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    # John Smith is known from the parent scope only; the proposal raised in the child names him.
    engine.create_scope("project:apollo", parent="team:core")
    engine.write("I had lunch with John Smith at the harbour.", ["team:core"])
    contract = engine.write("Yesterday Jon Smith sent the signed contract.", ["project:apollo"])
    assert len(contract.proposals) == 1
    buf = io.StringIO()
    assert engine.export(buf, scope="project:apollo").proposals == 1
    assert "harbour" not in buf.getvalue()
    restored = Engine.import_export(tmp_path / "apollo", io.StringIO(buf.getvalue()), embedder=embedder)
    assert restored.proposals == 1


def test_import_refuses_what_the_store_cannot_keep_naming_the_line_and_writing_nothing(
    engine: Engine, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    """attack12: a model pass's token count past 64 bits passed validation and failed the write ("the canonical
    store refused the write ... check free disk space"), naming no line; a memory said to contradict itself and
    a predicate holding NUL or a newline were imported. Each refuses the file, naming its line; nothing is
    written."""
    mid = engine.write("Ana works with Bob.", ["user:ana"]).id
    other = engine.write("Bob works with Ana.", ["user:ana"]).id
    buf = io.StringIO()
    engine.export(buf)
    good = "".join(line + "\n" for line in buf.getvalue().splitlines() if '"contradicts"' not in line)
    n = len(good.splitlines()) + 1
    link = _contradiction(other, mid)
    record = {
        "type": "enrichment", "memory_id": mid, "status": "done", "detail": "", "model": "m",
        "input_tokens": 1, "output_tokens": 2, "at": "2026-01-01T00:00:00Z",
    }  # fmt: skip
    bad = {
        "tokens past 64 bits": (
            {**record, "input_tokens": 10**30},
            "input_tokens must be a whole number from 0",
        ),
        "a memory contradicting itself": ({**link, "new": mid}, f"memory {mid} is said to contradict itself"),
        "a NUL in a predicate": ({**link, "predicate": "works\x00with"}, "is not a predicate"),
        "a newline in a predicate": ({**link, "predicate": "works_with\nforged"}, "is not a predicate"),
    }
    for name, (line, error) in bad.items():
        target = tmp_path / name.replace(" ", "-")
        with pytest.raises(InvalidInput, match=f"line {n}: .*{error}"):
            Engine.import_export(target, io.StringIO(good + json.dumps(line) + "\n"), embedder=embedder)
        assert not target.exists(), f"{name}: a refused import created {target}"
    fine = Engine.import_export(
        tmp_path / "fine",
        io.StringIO(good + json.dumps(link) + "\n" + json.dumps(record) + "\n"),
        embedder=embedder,
    )
    assert (fine.contradictions, fine.enrichments) == (1, 1)


CHAT = [
    MessageIn(
        "user", "I just moved to Lisbon for a job at Acme Corp.", datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
    ),
    MessageIn("assistant", "Congratulations! How is the new flat?", datetime(2024, 5, 1, 9, 1, tzinfo=UTC)),
    MessageIn("user", "My sister Ines visits on June 3.", datetime(2024, 5, 1, 9, 2, tzinfo=UTC)),
    MessageIn("user", "I'm allergic to peanuts, remember it.", datetime(2024, 5, 1, 9, 3, tzinfo=UTC)),
]
STATE_QUERIES = [
    "where does Sam work",
    "coffee",
    "Lisbon job",
    "peanuts",
    "Ines",
    "John Smith contract",
    "Bea",
]


def _seed_all(eng: Engine) -> dict[str, str]:
    """A store with everything a backup must carry: a relation ended by a later one, a contradiction, a
    conversation (one message later linked to another scope) and its digest, aliases, an accepted SAME_AS
    merge, a retired memory with its valid-time end, an amended one."""
    ids: dict[str, str] = {}
    ids["acme"] = eng.write("Sam works at Acme.", ["user:sam"]).id
    ids["globex"] = eng.write("Sam works at Globex now.", ["user:sam"]).id
    ids["love"] = eng.write("I love coffee.", ["user:sam"]).id
    ids["hate"] = eng.write("I hate coffee.", ["user:sam"]).id
    ids["bea"] = eng.write(
        "Beatriz Costa leads the design team.",
        ["user:sam"],
        entities=[EntityIn("Beatriz Costa", "person", ("Bea",))],
    ).id
    ids["tea"] = eng.write(
        "Beatriz Costa prefers tea.", ["user:sam"], entities=[EntityIn("Beatriz Costa", "person")]
    ).id
    eng.write("I had lunch with John Smith at the harbour.", ["user:sam"])
    contract = eng.write("Yesterday Jon Smith sent the signed contract.", ["user:sam"])
    assert contract.proposals
    eng.decide_proposal(contract.proposals[0], "accept")
    gym = eng.write(
        "Sam goes to the gym on Mondays.", ["user:sam"], valid_from=datetime(2023, 1, 1, tzinfo=UTC)
    )
    eng.retire(gym.id, reason="stopped", at=datetime(2024, 3, 1, tzinfo=UTC))
    ids["gym"] = gym.id
    flat = eng.write("Sam's flat has two rooms.", ["user:sam"], valid_from=datetime(2023, 1, 1, tzinfo=UTC))
    ids["flat"] = eng.amend(
        flat.id, "Sam's flat has three rooms.", reason="moved", effective_at=datetime(2024, 2, 1, tzinfo=UTC)
    ).id
    chat = eng.write_conversation("chat-1", CHAT, ["user:sam"])
    eng.link(chat.messages[0].id, "team:core")  # its conversation is still the one written to user:sam
    eng.consolidate()
    ids["message"] = chat.messages[0].id
    return ids


def _observed(eng: Engine) -> dict[str, object]:
    """What a user can observe of a store: every memory as memory_read shows it, the entities with their
    aliases and what each memory gave them, the proposals, the conversations and their digests' words, and the
    answers of recall (current, as of a past time, with history)."""
    # Every commit in the search indexes first: under load a recall may otherwise answer, as documented, from
    # indexes still catching up (a wait of ``read_wait`` at most), and the two stores would differ by timing.
    eng.reconciler.wait_projected()
    with eng.graph.read() as conn:
        ids = sorted(eng.graph.all_ids(conn))
        digests = eng.graph.all_digests(conn)
        conversations = sorted(
            (key, tuple(sorted(eng.graph.conversation_members(conn, key))))
            for key in {*digests.values(), *(k for k, _ in eng.graph.pending_conversations(conn))}
        )
        mentions = sorted(
            (m, e, n, t, tuple(a or ()))
            for m, e, n, t, a in kuzu_rows(
                conn, "MATCH (m:Memory)-[r:MENTIONS]->(e:Entity) RETURN m.id, e.id, r.name, r.type, r.aliases"
            )
        )
        proposals = eng.graph.same_as(conn)
        entities = eng.graph.export_entities(conn)
    reads = {i: eng.read(i) for i in ids if i not in digests}
    digest_words = sorted(eng.read(d).memory.content for d in digests)
    recall = [
        [(h.memory.id, h.memory.status) for h in eng.recall(q, ["user:sam"], k=5, **opts)]  # type: ignore[arg-type]
        for q in STATE_QUERIES
        for opts in ({}, {"include_history": True}, {"as_of": datetime(2024, 1, 15, tzinfo=UTC)})
    ]
    return {
        "reads": reads,
        "entities": entities,
        "mentions": mentions,
        "proposals": proposals,
        "conversations": conversations,
        "digests": digest_words,
        "recall": recall,
        "scopes": eng.list_scopes(),
    }


def test_a_restored_store_answers_everything_as_the_original(
    engine: Engine, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    # Digests are built by the explicit ``consolidate`` calls only: the background one, racing them under load,
    # made this comparison flaky (a digest rebuilt between the two observations).
    engine.stop_consolidation()
    ids = _seed_all(engine)
    # The text index ranks by statistics that count a replaced document (a retire, an amend, a link rewrites
    # one) until a background merge drops it, and the restored index holds none: rebuilt from the canonical
    # store here too, the two rank alike whenever merges ran (flaky under load otherwise, near-ties reordered).
    assert engine.reindex().ok
    before = _observed(engine)
    works = [h.memory.content for h in engine.recall("where does Sam work", ["user:sam"], k=1)]
    assert works == ["Sam works at Globex now."]
    assert engine.read(ids["love"]).contradicts or engine.read(ids["hate"]).contradicts
    buf = io.StringIO()
    engine.export(buf)
    Engine.import_export(tmp_path / "restored", io.StringIO(buf.getvalue()), embedder=embedder)
    with Engine.open(tmp_path / "restored", embedder=embedder, warm=False) as copy:
        copy.stop_consolidation()
        copy.consolidate()  # the digests are derived: rebuilt from the restored conversations
        assert copy.verify().ok
        after = _observed(copy)
        assert [h.memory.content for h in copy.recall("where does Sam work", ["user:sam"], k=1)] == works
        assert copy.read(ids["acme"]).relations == engine.read(ids["acme"]).relations  # ended, not reopened
        assert copy.read(ids["love"]).contradicts + copy.read(ids["hate"]).contradicts
        differ = [k for k in before if after[k] != before[k]]
        assert not differ, (differ, [(before[k], after[k]) for k in differ if k != "mentions"])
        # The restored conversation goes on: a new message joins it, and its one digest covers all five.
        copy.write_conversation(
            "chat-1",
            [MessageIn("user", "Ines moved her visit to June 9.", datetime(2024, 5, 2, 9, 0, tzinfo=UTC))],
            ["user:sam"],
        )
        assert copy.consolidate() == 1
        with copy.graph.read() as conn:  # the conversation's (user:sam's day has a digest of its own)
            (digest,) = [d for d, key in copy.graph.all_digests(conn).items() if not is_day_key(key)]
        assert copy.read(digest).memory.metadata["messages"] == 5
        assert "June 9" in copy.read(digest).memory.content
        # Erasing the one memory that called Beatriz "Bea" takes the alias back, there as here (the restore gave
        # every mention all the entity's aliases, so the alias outlived its only source).
        for store in (engine, copy):
            store.erase(ids["bea"], confirm=ids["bea"])
        assert _aliases(copy, "Beatriz Costa") == _aliases(engine, "Beatriz Costa") == []
        assert "Bea" not in {a for *_, aliases in _entities(copy) for a in aliases}


def _entities(eng: Engine) -> list[tuple[str, str, str, list[str]]]:
    with eng.graph.read() as conn:
        return eng.graph.export_entities(conn)


def _aliases(eng: Engine, name: str) -> list[str]:
    return next(aliases for _id, n, _t, aliases in _entities(eng) if n == name)


def test_an_export_written_before_conversations_and_mentions_were_kept_still_imports(
    engine: Engine, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    """Older files have no conversation lines and no memory's mentioned_as: the messages rejoin their
    conversation by its id and scopes (and are digested), and each mention takes the entity as it is."""
    engine.write_conversation("chat-1", CHAT, ["user:sam"])
    engine.write(
        "Beatriz Costa leads design.", ["user:sam"], entities=[EntityIn("Beatriz Costa", "person", ("Bea",))]
    )
    buf = io.StringIO()
    assert engine.export(buf).conversations == 1
    old = []
    for raw in buf.getvalue().splitlines():
        rec = json.loads(raw)
        if rec["type"] == "conversation":
            continue
        rec.pop("mentioned_as", None)
        old.append(json.dumps(rec) + "\n")
    result = Engine.import_export(tmp_path / "old", io.StringIO("".join(old)), embedder=embedder)
    assert result.conversations == 0  # none said: placed by their metadata
    with Engine.open(tmp_path / "old", embedder=embedder, warm=False) as copy:
        assert copy.consolidate() == 1
        with copy.graph.read() as conn:
            (digest,) = copy.graph.all_digests(conn)
        assert copy.read(digest).memory.metadata["messages"] == 4
        assert _aliases(copy, "Beatriz Costa") == ["Bea"]


def test_import_refuses_a_conversation_or_mention_it_cannot_place_naming_the_line(
    engine: Engine, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    engine.write_conversation("chat-1", CHAT, ["user:sam"])
    buf = io.StringIO()
    engine.export(buf)
    lines = buf.getvalue().splitlines()
    n = next(i for i, raw in enumerate(lines, 1) if json.loads(raw)["type"] == "conversation")
    conv = json.loads(lines[n - 1])
    m = next(i for i, raw in enumerate(lines, 1) if json.loads(raw).get("mentioned_as"))
    mem = json.loads(lines[m - 1])
    bad = {
        "a message not in the file": (
            n,
            {**conv, "messages": [*conv["messages"], "f" * 32]},
            "names memory f{32}",
        ),
        "a malformed key": (n, {**conv, "key": "../etc"}, "is not a conversation key"),
        "no messages": (n, {**conv, "messages": []}, "non-empty list"),
        "an entity it does not mention": (
            m,
            {**mem, "mentioned_as": {**mem["mentioned_as"], "nobody": ["Nobody", "person", []]}},
            "does not mention",
        ),
        "a malformed mention": (m, {**mem, "mentioned_as": {e: "x" for e in mem["mentioned_as"]}}, "must be"),
    }
    for name, (at, record, error) in bad.items():
        changed = [*lines[: at - 1], json.dumps(record), *lines[at:]]
        target = tmp_path / name.replace(" ", "-")
        with pytest.raises(InvalidInput, match=f"line {at}: .*{error}"):
            Engine.import_export(target, io.StringIO("\n".join(changed) + "\n"), embedder=embedder)
        assert not target.exists(), f"{name}: a refused import created {target}"


def test_a_scope_export_carries_no_alias_another_scope_gave_its_entities(
    engine: Engine, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    """An alias given in team:mna only is that team's word (docs/security.md: a token of user:ana never learns
    it). Exporting user:ana for Ana must not hand it over with her entity, nor spell the entity as another
    team named it; the whole-store export keeps it."""
    engine.write("Ana works at Acme Corp.", ["user:ana"], entities=[EntityIn("Acme Corp", "organization")])
    engine.write(
        "The takeover target is ACME CORP, codename Nightshade.",
        ["team:mna"],
        entities=[EntityIn("ACME CORP", "company", ("Project Nightshade",))],
    )
    buf = io.StringIO()
    engine.export(buf, scope="user:ana")
    text = buf.getvalue()
    assert "Nightshade" not in text
    assert "ACME CORP" not in text
    assert '"company"' not in text
    Engine.import_export(tmp_path / "ana", io.StringIO(text), embedder=embedder)
    with Engine.open(tmp_path / "ana", embedder=embedder, warm=False) as copy:
        (hit,) = copy.recall("where does Ana work", ["user:ana"], k=1)
        assert "Acme Corp" in hit.memory.entities
    whole = io.StringIO()
    engine.export(whole)
    assert "Project Nightshade" in whole.getvalue()


def test_import_refuses_a_scope_tree_with_a_loop_changing_nothing(
    engine: Engine, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    """A file whose scopes are their own ancestors (a scope its own parent, or two each other's) was imported:
    a grant on one then covered the other, and a merge planted the loop in a store with its own history."""
    engine.write("Something in a.", ["project:a"])
    buf = io.StringIO()
    engine.export(buf)
    head, *rest = buf.getvalue().splitlines()
    at = "2024-01-01T00:00:00+00:00"
    loops = {
        "its own parent": [{"type": "scope", "id": "project:a", "parent": "project:a", "created_at": at}],
        "each other's": [
            {"type": "scope", "id": "project:b", "parent": "project:a", "created_at": at},
            {"type": "scope", "id": "project:a", "parent": "project:b", "created_at": at},
        ],
        "given twice": [
            {"type": "scope", "id": "project:a", "parent": None, "created_at": at},
            {"type": "scope", "id": "project:a", "parent": "team:x", "created_at": at},
        ],
    }
    memories = [r for r in rest if json.loads(r)["type"] != "scope"]
    with Engine.open(tmp_path / "mine", embedder=embedder, warm=False) as mine:
        mine.write("Mine.", ["user:me"])
        before = _everything(mine)
        for name, scopes in loops.items():
            text = "\n".join([head, *(json.dumps(s) for s in scopes), *memories]) + "\n"
            with pytest.raises(InvalidInput, match=f"line {len(scopes) + 1}: .*(inside it|same scope again)"):
                mine.merge_export(io.StringIO(text))
            assert _everything(mine) == before, name
            target = tmp_path / name.replace(" ", "-").replace("'", "")
            with pytest.raises(InvalidInput):
                Engine.import_export(target, io.StringIO(text), embedder=embedder)
            assert not target.exists()


def test_import_refuses_a_version_pointer_without_its_supersedes_record_changing_nothing(
    engine: Engine, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    """A memory's ``supersedes`` or ``superseded_by`` came in as the file said, with or without the edge that
    joins the two versions: erasing a version finds the pointers to it along that edge, so a pointer without
    one would keep the erased memory's id (a hash of its words) in the other version. The file is refused,
    naming the line, and nothing is written; the export of a real store imports as before."""
    old = engine.write("Ana works at Acme.", ["user:ana"]).id
    new = engine.amend(old, "Ana works at Globex.").id
    buf = io.StringIO()
    engine.export(buf)
    lines = [json.loads(x) for x in buf.getvalue().splitlines()]
    assert (
        Engine.import_export(tmp_path / "fine", io.StringIO(buf.getvalue()), embedder=embedder).memories == 2
    )
    line_of = {x["id"]: n for n, x in enumerate(lines, 1) if x["type"] == "memory"}
    unjoined = "\n".join(json.dumps(x) for x in lines if x["type"] != "supersedes") + "\n"
    elsewhere = "".join(
        json.dumps({**x, "supersedes": "f" * 32} if x.get("id") == new else x) + "\n" for x in lines
    )
    first = min((old, new), key=line_of.__getitem__)
    bad = {
        "no record": (
            unjoined,
            f"line {line_of[first]}: memory {first}'s supersede(s|d_by) names ({old}|{new})",
        ),
        "a memory not in the file": (
            elsewhere,
            f"line {line_of[new]}: memory {new}'s supersedes names (memory )?f{{32}}",
        ),
    }
    for name, (text, error) in bad.items():
        target = tmp_path / name.replace(" ", "-")
        with pytest.raises(InvalidInput, match=error):
            Engine.import_export(target, io.StringIO(text), embedder=embedder)
        assert not target.exists(), f"{name}: a refused import created {target}"


def test_a_scope_export_never_names_a_memory_outside_it_as_what_ended_a_relation(
    engine: Engine, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    """A relation closed by a newer memory that now lives only in another team's scope was exported by a
    ``--scope`` export with that memory's id in ``ended_by`` (attack16): the file handed over the id of a memory
    the team cannot read, and the import stored the dangling id. The relation still reads as ended, by nothing
    the file names."""
    ana, acme, globex = (
        EntityIn("Ana Lima", "person"),
        EntityIn("Acme Corp", "org"),
        EntityIn("Globex", "org"),
    )
    old = engine.write(
        "Ana Lima works at Acme Corp.",
        ["team:x"],
        kind="fact",
        entities=[ana, acme],
        relations=[RelationIn("Ana Lima", "works_at", "Acme Corp")],
    )
    new = engine.write(
        "Ana Lima works at Globex now.",
        ["team:x", "team:y"],
        kind="fact",
        entities=[ana, globex],
        relations=[RelationIn("Ana Lima", "works_at", "Globex")],
    )
    assert new.supersedes == (old.id,)
    engine.unlink(new.id, "team:x")  # now only where team:x's readers cannot read
    buf = io.StringIO()
    engine.export(buf, scope="team:x")
    assert new.id not in buf.getvalue()
    Engine.import_export(tmp_path / "copy", io.StringIO(buf.getvalue()), embedder=embedder)
    with Engine.open(tmp_path / "copy", embedder=embedder, warm=False) as copy:
        with copy.graph.read() as conn:
            (relation,) = copy.graph.export_relations(conn)
        assert relation[3] == old.id
        assert relation[6] is not None  # still ended
        assert relation[7] is None  # by nothing the file names


def _version_links_file(engine: Engine) -> tuple[list[dict[str, object]], str, str]:
    a = engine.write("Ana likes green tea.", ["team:x"], relations=[RelationIn("Ana", "likes", "green tea")])
    b = engine.write("Bruno likes black coffee.", ["team:x"])
    buf = io.StringIO()
    engine.export(buf)
    return [json.loads(line) for line in buf.getvalue().splitlines()], a.id, b.id


def test_import_refuses_version_links_and_relations_naming_memories_it_does_not_hold(
    engine: Engine, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    """A file whose memory points (``supersedes``, ``superseded_by``, a ``supersedes`` line) at a memory it
    does not hold, or at itself, or two memories superseding each other, was imported (attack16): the memory came
    back superseded by nothing, out of every current recall (its owner saw it lost), and a relation of a memory
    not in the file was dropped without a word, as was one naming an entity the file does not hold (and a
    memory's mention of one); version lines alone chained two unrelated memories, so erasing one erased the
    other. Each is refused naming its line, and nothing is written."""
    records, a, b = _version_links_file(engine)
    ghost = "f" * 32
    at = "2026-01-01T00:00:00+00:00"

    def memory(ls: list[dict[str, object]], mid: str) -> dict[str, object]:
        return next(r for r in ls if r["type"] == "memory" and r["id"] == mid)

    def relation(ls: list[dict[str, object]]) -> dict[str, object]:
        return next(r for r in ls if r["type"] == "relation")

    def line(ls: list[dict[str, object]], record: dict[str, object]) -> int:
        return ls.index(record) + 1

    cases = {
        "superseded by a memory not in the file": lambda ls: memory(ls, a).update(superseded_by=ghost),
        "superseding a memory not in the file": lambda ls: memory(ls, a).update(supersedes=ghost),
        "superseded by itself": lambda ls: memory(ls, a).update(superseded_by=a),
        "two memories superseding each other": lambda ls: (
            memory(ls, a).update(superseded_by=b, supersedes=b),
            memory(ls, b).update(superseded_by=a, supersedes=a),
        ),
        "a version line naming a memory not in the file": lambda ls: ls.append(
            {"type": "supersedes", "new": ghost, "old": a, "reason": "x", "at": at}
        ),
        "a version line naming one memory twice": lambda ls: ls.append(
            {"type": "supersedes", "new": a, "old": a, "reason": "x", "at": at}
        ),
        "a relation of a memory not in the file": lambda ls: relation(ls).update(memory_id=ghost),
        "a relation naming an entity not in the file": lambda ls: relation(ls).update(subject="nobody here"),
        "a relation with a predicate no write takes": lambda ls: relation(ls).update(predicate="x" * 500),
        "a mention of an entity not in the file": lambda ls: (
            next(r for r in ls if r["type"] == "entity" and r["id"] == "green tea").update(id="zzz"),
            memory(ls, a),  # refused on the line of the memory that mentions it
        )[1],
        "two unrelated memories chained by version lines": lambda ls: ls.extend(
            {"type": "supersedes", "new": new, "old": old, "reason": "x", "at": at}
            for new, old in ((a, b), (b, a))
        ),
    }
    with Engine.open(tmp_path / "mine", embedder=embedder, warm=False) as mine:
        mine.write("Mine.", ["user:me"])
        before = _everything(mine)
        for name, change in cases.items():
            ls = json.loads(json.dumps(records))
            where = change(ls)
            changed = [r for r, was in zip(ls, [*records, None], strict=False) if r != was]
            at = line(ls, where if isinstance(where, dict) else changed[0])
            text = "".join(json.dumps(r) + "\n" for r in ls)
            target = tmp_path / name.replace(" ", "-")
            with pytest.raises(InvalidInput, match=f"^line {at}: ") as refused:
                Engine.import_export(target, io.StringIO(text), embedder=embedder)
            assert refused.value.hint == "nothing was imported", name
            assert not target.exists(), name
            with pytest.raises(InvalidInput, match=f"^line {at}: "):
                mine.merge_export(io.StringIO(text))
            assert _everything(mine) == before, name


def test_a_scope_export_keeps_a_version_whose_newer_one_it_leaves_out_out_of_current(
    engine: Engine, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    """A memory superseded by a version now only in another scope was exported by ``--scope`` without its
    pointer and restored as current (attack16): "Ana Lima works at Acme Corp." came back in the team's
    ``list`` (and ``memory_read`` said current), where the team had seen it superseded. It comes back retired
    at the moment it was superseded, as a version whose newer one was erased does."""
    ana, acme, globex = (
        EntityIn("Ana Lima", "person"),
        EntityIn("Acme Corp", "org"),
        EntityIn("Globex", "org"),
    )
    old = engine.write(
        "Ana Lima works at Acme Corp.",
        ["team:x"],
        kind="fact",
        entities=[ana, acme],
        relations=[RelationIn("Ana Lima", "works_at", "Acme Corp")],
    )
    new = engine.write(
        "Ana Lima works at Globex now.",
        ["team:x", "team:y"],
        kind="fact",
        entities=[ana, globex],
        relations=[RelationIn("Ana Lima", "works_at", "Globex")],
    )
    engine.unlink(new.id, "team:x")
    assert [m.id for m in engine.list("team:x").items] == []
    was = engine.read(old.id).memory
    with engine.graph.read() as conn:
        (superseded_at,) = [at for n, o, _r, at in engine.graph.export_supersedes(conn) if o == old.id]
    buf = io.StringIO()
    engine.export(buf, scope="team:x")
    Engine.import_export(tmp_path / "copy", io.StringIO(buf.getvalue()), embedder=embedder)
    with Engine.open(tmp_path / "copy", embedder=embedder, warm=False) as copy:
        assert [m.id for m in copy.list("team:x").items] == []
        back = copy.read(old.id).memory
        assert back.status.value == "retired"
        assert back.retired_at == superseded_at  # when it was superseded, not when it was imported
        assert back.valid_to == was.valid_to
        assert [m.id for m in copy.list("team:x", include_retired=True).items] == [old.id]


def test_a_relation_keeps_its_memorys_spelling_of_its_ends_through_export_and_import(
    engine: Engine, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    """A relation's ends are shown as the memory that recorded it spelt them, never in the spelling another team
    stored for the entity (docs/security.md). A restored store keeps that, from this release's exports and from
    older ones (no names on their relation lines: the memory's mentions give them); a name that is not a
    spelling of its end is refused, naming the line."""
    b = Principal("B", client="tests", grants=(Grant.parse("agent:b=w"),))
    engine.write(
        "ZORBLAX CORPORATION is hiring.", ["agent:a"], entities=[EntityIn("ZORBLAX CORPORATION", "org")]
    )
    mine = engine.write(
        "Bo works at zorblax corporation.",
        ["agent:b"],
        relations=[RelationIn("Bo", "works_at", "zorblax corporation")],
        principal=b,
    ).id
    assert engine.read(mine, principal=b).relations == ("Bo —works_at→ zorblax corporation [? → open]",)
    buf = io.StringIO()
    engine.export(buf)
    lines = buf.getvalue().splitlines()
    n = next(i for i, raw in enumerate(lines, 1) if json.loads(raw)["type"] == "relation")
    rec = json.loads(lines[n - 1])
    older = {k: x for k, x in rec.items() if k not in ("subject_name", "object_name")}
    for name, record in (("this", rec), ("older", older)):
        changed = [*lines[: n - 1], json.dumps(record), *lines[n:]]
        Engine.import_export(tmp_path / name, io.StringIO("\n".join(changed) + "\n"), embedder=embedder)
        with Engine.open(tmp_path / name, embedder=embedder, warm=False) as copy:
            assert copy.read(mine, principal=b).relations == ("Bo —works_at→ zorblax corporation [? → open]",)
            paths = [p for h in copy.recall("Where does Bo work?", ["agent:b"], recipe="graph", principal=b)
                     for p in h.paths]  # fmt: skip
            assert paths == ["Bo —works_at→ zorblax corporation"]
    hostile = [*lines[: n - 1], json.dumps({**rec, "object_name": "Acme"}), *lines[n:]]
    with pytest.raises(InvalidInput, match=f"line {n}: .*object_name must be a spelling"):
        Engine.import_export(tmp_path / "hostile", io.StringIO("\n".join(hostile) + "\n"), embedder=embedder)
    assert not (tmp_path / "hostile").exists()
