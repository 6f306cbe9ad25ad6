"""Derived relations and the contradiction sweep attacked from another team's seat (attack 18): what one team
writes must not decide what another team's memories derive."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from scopes import Grant, Principal
from storage import CachedEmbedder, Engine, RelationIn
from storage.engine import derived as derived_engine
from storage.enrich import transitive as tr
from tests.conftest import files_containing
from tests.storage.test_claude_decide import Api, decision
from tests.storage.test_derived import derived


def test_another_teams_statements_about_a_shared_place_never_crowd_out_a_teams_own_chain(
    engine: Engine,
) -> None:
    # Entities are shared between scopes: team:b saying where Udaipur is, more than the fan-out bound, must not
    # hide team:a's own "Udaipur is in Rajasthan" from the chain team:a's next statement starts.
    alice = Principal("alice", client="t", grants=(Grant.parse("team:a=w"),))
    bob = Principal("bob", client="t", grants=(Grant.parse("team:b=w"),))
    engine.write("Udaipur is in Rajasthan.", ["team:a"], kind="fact", principal=alice,
                 relations=[RelationIn("Udaipur", "located_in", "Rajasthan")])  # fmt: skip
    for n in range(tr.FANOUT + 2):
        engine.write(f"Udaipur is in sales zone {n}.", ["team:b"], kind="fact", principal=bob,
                     relations=[RelationIn("Udaipur", "located_in", f"Zone {n}")])  # fmt: skip
    engine.write("The Grand Palm is in Udaipur.", ["team:a"], kind="fact", principal=alice,
                 relations=[RelationIn("Grand Palm", "located_in", "Udaipur")])  # fmt: skip
    engine.consolidate()
    assert "Grand Palm located in Rajasthan" in " ".join(derived(engine).values())


def test_erasing_a_source_leaves_no_trace_of_the_derivation_nor_of_its_group(
    tmp_path: Path, embedder: CachedEmbedder
) -> None:
    # The derivation's group is named by a hash of its sources' ids (each a hash of its content): left behind
    # with the source that stays, it would confirm to anyone holding the erased words that they were stored,
    # and chained with that source; the derived memory's id, kept as the group's digest, likewise.
    data = tmp_path / "data"
    canary = f"Villa{uuid.uuid4().hex[:12]}"
    with Engine.open(data, embedder=embedder, warm=False) as engine:
        h = engine.write(f"{canary} is located in Udaipur.", ["team:a"], kind="fact",
                         relations=[RelationIn(canary, "located_in", "Udaipur")]).id  # fmt: skip
        c = engine.write("Udaipur is in Rajasthan.", ["team:a"], kind="fact",
                         relations=[RelationIn("Udaipur", "located_in", "Rajasthan")]).id  # fmt: skip
        engine.consolidate()
        (mid,) = derived(engine)
        engine.erase(h, confirm=h)
        engine.consolidate()
        assert derived(engine) == {}
        assert engine.derived_relation(mid) is None  # nor in the process's memory
        assert engine.read(c).memory.status == "current"
    key = tr.derived_key(h, c)
    for needle in (canary, h, mid, key.removeprefix(tr.DERIVED_PREFIX)):
        assert files_containing(data, needle.encode()) == [], needle


def test_a_source_claude_decides_is_updated_takes_its_derivation_with_it(engine: Engine) -> None:
    # The rules leave located_in open (not functional); Claude's decision that the new statement updates the
    # old one supersedes it after the write returned. What the old one justified must go then, as it does when
    # the rules, an amend or a retire supersede a source.
    h = engine.write("The Grand Palm is in Udaipur.", ["user:ana"], kind="fact",
                     relations=[RelationIn("Grand Palm", "located_in", "Udaipur")]).id  # fmt: skip
    c = engine.write("Udaipur is in Rajasthan.", ["user:ana"], kind="fact",
                     relations=[RelationIn("Udaipur", "located_in", "Rajasthan")]).id  # fmt: skip
    engine.consolidate()
    assert "Grand Palm located in Rajasthan" in " ".join(derived(engine).values())
    api = Api(decision({"id": c[:12], "relation": "updates", "reason": "the district was moved"}))
    api.switch_on(engine)
    new = engine.write("Udaipur is now in the new Mewar state.", ["user:ana"], kind="fact",
                       relations=[RelationIn("Udaipur", "located_in", "Mewar")]).id  # fmt: skip
    assert engine.wait_enriched()
    assert engine.read(c).memory.superseded_by == new
    assert "Rajasthan" not in " ".join(derived(engine).values())  # gone with the decision, not later
    engine.consolidate()
    assert list(derived(engine).values()) == [
        "Grand Palm located in Mewar (derived: Grand Palm located in Udaipur; Udaipur located in Mewar)"
    ]
    assert h


def test_a_source_the_claude_extraction_pass_supersedes_takes_its_derivation_with_it(engine: Engine) -> None:
    # A store that keeps one container per thing: the statement Claude reads in a later memory's words
    # supersedes the source through the rules, after the write returned.
    engine.functional = engine.functional | {"located_in"}
    engine.write("The Grand Palm is in Udaipur.", ["user:ana"], kind="fact",
                 relations=[RelationIn("Grand Palm", "located_in", "Udaipur")])  # fmt: skip
    c = engine.write("Udaipur is in Rajasthan.", ["user:ana"], kind="fact",
                     relations=[RelationIn("Udaipur", "located_in", "Rajasthan")]).id  # fmt: skip
    engine.consolidate()
    assert "Grand Palm located in Rajasthan" in " ".join(derived(engine).values())
    api = Api(decision())
    api.statements = [
        {"subject": "Udaipur", "predicate": "located_in", "object": "Mewar", "status": "asserted"}
    ]
    api.switch_on(engine)
    new = engine.write("Big news: the district moved to the new Mewar state.", ["user:ana"], kind="fact").id
    assert engine.wait_enriched()
    assert engine.read(c).memory.superseded_by == new
    assert "Rajasthan" not in " ".join(derived(engine).values())  # gone with the pass, not later


def test_the_sweep_reaches_every_subject_however_many_there_are(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One call reads a bounded window of subjects; calling again must move on, not read the same window again
    # (a store with more subjects than the window had the rest never swept).
    monkeypatch.setattr(derived_engine, "SWEEP_SUBJECTS", 2)
    # Written while lives_in held several values (a links and imports sweep by themselves: only what the rules
    # of the time let through is left for the command).
    functional = engine.functional
    engine.functional = frozenset()
    for person in ("Ana", "Bruno", "Carla", "Duarte"):
        engine.write(f"{person} lives in Porto.", ["team:a"], kind="fact",
                     relations=[RelationIn(person, "lives_in", "Porto")])  # fmt: skip
        engine.write(f"{person} lives in Braga.", ["team:a"], kind="fact",
                     relations=[RelationIn(person, "lives_in", "Braga")])  # fmt: skip
    engine.functional = functional
    linked = []
    while got := engine.sweep_contradictions():
        linked += got
    assert len(linked) == 4
