"""A memory superseded by another (a new value for a functional predicate at write time, Claude's reconcile
decision, or Claude's extraction pass) is no longer current, so a digest that still says its words is wrong:
it is withdrawn in the same transaction, as for an amend or a retire, and rebuilt from what is current."""

from __future__ import annotations

from storage import Engine, RelationIn
from tests.storage.test_claude_decide import Api, decision
from tests.storage.test_day_digests import digests_of, only_day_digest

PLAIN = [
    "Ana is allergic to peanuts.",
    "Ana prefers window seats on long flights.",
    "Ana's sister Ines visits her on June 3.",
]


def porto_day(engine: Engine, *also: str) -> tuple[str, str]:
    """Four plain memories of one day in user:ana, one of them saying where Ana lives (in ``also`` too); the
    day digest of user:ana."""
    porto = engine.write(
        "Ana lives in Porto, near the river.",
        ["user:ana", *also],
        relations=[RelationIn("Ana", "lives_in", "Porto")],
    ).id
    for line in PLAIN:
        engine.write(line, ["user:ana"])
    engine.consolidate()
    digest = only_day_digest(engine)
    assert "Porto" in engine.read(digest).memory.content
    return porto, digest


def test_a_value_superseded_at_write_time_leaves_the_day_digest_at_once(engine: Engine) -> None:
    porto, old = porto_day(engine)
    lisbon = engine.write(
        "Ana lives in Lisbon now.", ["user:ana"], relations=[RelationIn("Ana", "lives_in", "Lisbon")]
    )
    assert lisbon.supersedes == (porto,)
    assert old not in digests_of(engine)  # at once: no digest says Ana lives in Porto any more
    hits = engine.recall("where does Ana live Porto", ["user:ana"], kinds=["summary"])
    assert all("Porto" not in h.memory.content for h in hits)
    engine.consolidate()
    rebuilt = engine.read(only_day_digest(engine)).memory
    assert "Porto" not in rebuilt.content
    assert "Lisbon" in rebuilt.content
    assert porto not in rebuilt.metadata["sources"]


def test_a_memory_claude_decides_is_updated_leaves_the_day_digest(engine: Engine) -> None:
    jazz = engine.write(
        "Ana likes jazz, mostly Coltrane.", ["user:ana"], relations=[RelationIn("Ana", "likes", "jazz")]
    ).id
    for line in PLAIN:
        engine.write(line, ["user:ana"])
    engine.consolidate()
    old = only_day_digest(engine)
    assert "Coltrane" in engine.read(old).memory.content
    api = Api(decision({"id": jazz[:12], "relation": "updates", "reason": "moved on"}))
    api.switch_on(engine)
    engine.write("Ana likes rock these days.", ["user:ana"], relations=[RelationIn("Ana", "likes", "rock")])
    assert engine.wait_enriched()
    assert engine.read(jazz).memory.status == "superseded"
    assert old not in digests_of(engine)
    engine.consolidate()
    assert "Coltrane" not in engine.read(only_day_digest(engine)).memory.content


def test_a_value_claudes_extraction_supersedes_leaves_the_day_digest(engine: Engine) -> None:
    porto, old = porto_day(engine)
    api = Api(decision())
    api.statements = [{"subject": "Ana", "predicate": "lives_in", "object": "Lisbon", "status": "asserted"}]
    api.switch_on(engine)
    engine.write("Big news from Ana today: she has the keys to her new flat.", ["user:ana"])
    assert engine.wait_enriched()
    assert engine.read(porto).memory.status == "superseded"
    assert old not in digests_of(engine)
    engine.consolidate()
    assert "Porto" not in engine.read(only_day_digest(engine)).memory.content


def test_a_value_an_amend_supersedes_in_another_memory_leaves_the_day_digest(engine: Engine) -> None:
    porto, old = porto_day(engine, "team:family")
    # the amended memory is in another scope: only the memory it ends is a source of user:ana's day digest
    note = engine.write("Ana called about the flat.", ["team:family"]).id
    receipt = engine.amend(note, "Ana lives in Lisbon now.")  # the offline extraction reads lives_in Lisbon
    assert porto in receipt.also_supersedes
    assert old not in digests_of(engine)
    engine.consolidate()
    assert "Porto" not in engine.read(only_day_digest(engine)).memory.content
