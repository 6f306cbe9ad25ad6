"""The contradiction sweep runs by itself where the write-time rules cannot see a conflict: a link that puts a
memory beside another value of the same functional statement, and an import that brings two values its file
never linked. Both are flagged at once (``CONTRADICTS``, recall's ``conflicts_with``), neither is superseded,
and the link is audited as a sweep."""

from __future__ import annotations

import io
import json
from pathlib import Path

from scopes import Grant, Principal
from storage import CachedEmbedder, Engine, RelationIn


def two_homes(engine: Engine) -> tuple[str, str]:
    """Where Ana lives, told in two scopes that share nothing: the rules compared neither with the other."""
    porto = engine.write(
        "Ana lives in Porto.", ["user:ana"], relations=[RelationIn("Ana", "lives_in", "Porto")]
    ).id
    lisbon = engine.write(
        "Ana lives in Lisbon.", ["team:family"], relations=[RelationIn("Ana", "lives_in", "Lisbon")]
    ).id
    assert engine.read(porto).contradicts == ()
    return porto, lisbon


def test_a_link_that_puts_two_values_side_by_side_flags_them_at_once(engine: Engine) -> None:
    porto, lisbon = two_homes(engine)
    engine.link(lisbon, "user:ana")
    reader = Principal("ana-phone", client="t", grants=(Grant.parse("user:ana=r"),))
    hits = {h.memory.id: h for h in engine.recall("Where does Ana live?", ["user:ana"], principal=reader)}
    assert hits[porto].conflicts == (lisbon,)
    assert hits[lisbon].conflicts == (porto,)
    assert engine.read(porto).memory.status == "current"  # flagged, never superseded
    assert engine.read(lisbon).memory.status == "current"
    log = [json.loads(line) for line in (engine.data_dir / "audit.jsonl").read_text().splitlines()]
    assert [set(e["ids"]) for e in log if e["op"] == "sweep"] == [{porto, lisbon}]


def test_an_import_flags_two_values_its_file_never_linked(
    engine: Engine, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    porto, lisbon = two_homes(engine)
    out = io.StringIO()
    engine.export(out)
    lines = []
    for line in out.getvalue().splitlines():
        rec = json.loads(line)
        if rec.get("type") == "memory" and rec["id"] == lisbon:  # a hand-made file: both in user:ana
            rec["scopes"] = {"user:ana": next(iter(rec["scopes"].values()))}
        lines.append(json.dumps(rec))
    Engine.import_export(tmp_path / "copy", io.StringIO("\n".join(lines) + "\n"), embedder=embedder)
    with Engine.open(tmp_path / "copy", embedder=embedder, warm=False) as copy:
        assert copy.read(porto).contradicts == (lisbon,)
        assert copy.read(lisbon).memory.status == "current"


def test_a_link_into_a_scope_without_another_value_flags_nothing(engine: Engine) -> None:
    porto, _ = two_homes(engine)
    engine.link(porto, "team:work")
    assert engine.read(porto).contradicts == ()


def test_a_chain_through_a_relation_claude_read_is_derived_without_a_rebuild(engine: Engine) -> None:
    """The writer gave no relation; Claude's extraction reads "Udaipur located_in Rajasthan" after the commit."""
    from tests.storage.test_claude_decide import Api, decision
    from tests.storage.test_derived import HOTEL, IN_CITY, derived

    engine.write(HOTEL, ["user:ana"], kind="fact", relations=[IN_CITY])
    api = Api(decision())
    api.statements = [
        {"subject": "Udaipur", "predicate": "located_in", "object": "Rajasthan", "status": "asserted"}
    ]
    api.switch_on(engine)
    engine.write("Udaipur is a lovely city in the west of Rajasthan.", ["user:ana"], kind="fact")
    assert engine.wait_enriched()
    engine.consolidate()  # the consolidator's usual round, not mnemograph digests' look through every subject
    assert [t.split(" (")[0] for t in derived(engine).values()] == ["Grand Palm located in Rajasthan"]
