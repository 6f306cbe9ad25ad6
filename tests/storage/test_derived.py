"""Transitive relations the consolidator derives and the contradiction sweep (issue 15), as a user and as another
principal meet them: derived only where every source is readable, withdrawn and erased with its sources,
rebuildable, bounded; missed contradictions linked once, within a scope both memories share."""

from __future__ import annotations

import io
import json
import uuid
from pathlib import Path

from scopes import Grant, Principal
from storage import CachedEmbedder, Engine, NotFound, RelationIn
from storage.adapters.falkordb import local as falkordb_local
from storage.enrich import transitive as tr
from tests.conftest import files_containing

HOTEL = "The Grand Palm, a heritage hotel on the lake shore, is located in Udaipur."
CITY = "Udaipur belongs to Rajasthan."
IN_CITY = RelationIn("Grand Palm", "located_in", "Udaipur")
IN_STATE = RelationIn("Udaipur", "located_in", "Rajasthan")


def derived(engine: Engine) -> dict[str, str]:
    """derived memory id -> its content."""
    with engine.graph.read() as conn:
        ids = [d for d, key in engine.graph.all_digests(conn).items() if tr.is_derived_key(key)]
        return {i: m.content for i, m in engine.graph.fetch(conn, ids).items()}


def hotel_and_city(engine: Engine, hotel_scopes: list[str], city_scopes: list[str]) -> tuple[str, str]:
    h = engine.write(HOTEL, hotel_scopes, kind="fact", relations=[IN_CITY]).id
    c = engine.write(CITY, city_scopes, kind="fact", relations=[IN_STATE]).id
    engine.consolidate()
    return h, c


def test_a_chain_of_located_in_is_derived_in_the_background_naming_its_sources(engine: Engine) -> None:
    h, c = hotel_and_city(engine, ["user:ana"], ["user:ana"])
    ((mid, text),) = derived(engine).items()
    assert (
        text
        == "Grand Palm located in Rajasthan (derived: Grand Palm located in Udaipur; Udaipur located in Rajasthan)"
    )
    m = engine.read(mid).memory
    assert m.kind == "summary"
    assert m.provenance.source == "transitive"
    assert m.metadata["derived_from"] == [h, c]
    assert m.scopes == ("user:ana",)
    # told in the other order (the state first, then the hotel), the same chain is found
    engine.write("Mysore is in Karnataka.", ["user:ana"], kind="fact",
                 relations=[RelationIn("Mysore", "located_in", "Karnataka")])  # fmt: skip
    engine.write("The Lalitha Mahal is located in Mysore.", ["user:ana"], kind="fact",
                 relations=[RelationIn("Lalitha Mahal", "located_in", "Mysore")])  # fmt: skip
    engine.consolidate()
    assert any(t.startswith("Lalitha Mahal located in Karnataka") for t in derived(engine).values())


def test_containment_written_in_plain_words_is_chained_without_a_model(engine: Engine) -> None:
    """A user with no API key and a client that passes no relations: before, the offline extraction read no
    containment, so nothing was ever derived for them."""
    hotel = engine.write("The Grand Palm is located in Udaipur.", ["user:ana"], kind="fact")
    city = engine.write("Udaipur lies in Rajasthan.", ["user:ana"], kind="fact")
    assert hotel.relations == ("Grand Palm —located_in→ Udaipur",)
    assert city.relations == ("Udaipur —located_in→ Rajasthan",)
    engine.consolidate()
    assert list(derived(engine).values()) == [
        "Grand Palm located in Rajasthan (derived: Grand Palm located in Udaipur; Udaipur located in Rajasthan)"
    ]
    # an organisation "based in" a city is based_in (a person's is where they live), and chains the same way
    assert engine.write("Globex Inc is based in Berlin.", ["user:ana"]).relations == (
        "Globex Inc —based_in→ Berlin",
    )
    assert engine.write("Ana is based in Porto.", ["user:ana"]).relations == ("Ana —lives_in→ Porto",)
    # words that say more than containment are not read as it
    for text in (
        "Udaipur is not located in Gujarat.",
        "Ana lies in bed all Sunday.",
        "Tom is part of the problem.",
    ):
        assert engine.write(text, ["user:ana"]).relations == ()


def test_containment_said_in_the_past_is_not_chained_as_if_it_held_now(engine: Engine) -> None:
    """Found attacking session 19's containment phrases: "Acme was part of Globex" was read as Acme part of
    Globex today, so with "Globex is part of Initech" the consolidator derived that Acme is part of Initech,
    which no one said and which the writer's own words deny."""
    for text in (
        "Acme was part of Globex.",
        "The Annex was once located in Soho.",
        "Umbrella had been headquartered in Raccoon City.",
        "Sam was a member of the Chess Club.",
    ):
        assert engine.write(text, ["user:ana"], kind="fact").relations == (), text
    engine.write("Globex is part of Initech.", ["user:ana"], kind="fact")
    engine.write("Soho lies in London.", ["user:ana"], kind="fact")
    engine.consolidate()
    assert list(derived(engine).values()) == []
    # said in the present it is read, and chained
    assert engine.write("Acme is part of Globex.", ["user:ana"], kind="fact").relations == (
        "Acme —part_of→ Globex",
    )
    engine.consolidate()
    assert list(derived(engine).values()) == [
        "Acme part of Initech (derived: Acme part of Globex; Globex part of Initech)"
    ]


def test_a_reader_who_cannot_read_every_source_never_meets_the_derivation(engine: Engine) -> None:
    # The hotel is known to both teams; that Udaipur is in Rajasthan only to team:a.
    h, c = hotel_and_city(engine, ["team:a", "team:b"], ["team:a"])
    ((mid, _),) = derived(engine).items()
    assert engine.read(mid).memory.scopes == ("team:a",)
    bob = Principal("bob", client="t", grants=(Grant.parse("team:b=r"),))
    hits = engine.recall("Grand Palm Rajasthan", ["team:b"], kinds=["summary", "fact"], principal=bob, k=20)
    assert all("Rajasthan" not in x.memory.content for x in hits)
    try:
        engine.read(mid, principal=bob)
    except NotFound:
        pass
    else:
        raise AssertionError("team:b read a relation derived from a memory it cannot read")
    assert [m.id for m in engine.list("team:b", principal=bob).items] == [h]
    assert {s.id: s.memories for s in engine.list_scopes(principal=bob)}["team:b"] == 1
    out = io.StringIO()
    engine.export(out, scope="team:b")
    assert "Rajasthan" not in out.getvalue()
    # team:a may read both sources: there it is, and recall lifts its sources in its place.
    alice = Principal("alice", client="t", grants=(Grant.parse("team:a=r"),))
    hits = engine.recall("Which state is the Grand Palm hotel in?", ["team:a"], principal=alice, k=5)
    assert c in [x.memory.id for x in hits]
    assert mid not in [x.memory.id for x in hits]
    # once team:b may read the state too (the memory is linked there), the derivation is rebuilt there
    engine.link(c, "team:b")
    engine.consolidate()
    assert engine.read(mid).memory.scopes == ("team:a", "team:b")


def test_a_derivation_is_withdrawn_in_the_transaction_that_retires_amends_or_unlinks_a_source(
    engine: Engine,
) -> None:
    h, c = hotel_and_city(engine, ["user:ana", "team:a"], ["user:ana", "team:a"])
    (mid,) = derived(engine)
    engine.unlink(c, "team:a")
    assert derived(engine) == {}  # gone at once, not at the next consolidation
    engine.consolidate()
    (mid,) = derived(engine)
    assert engine.read(mid).memory.scopes == ("user:ana",)
    c2 = engine.amend(c, "Udaipur is a city in Rajasthan, India.").id  # the new version keeps the relation
    assert derived(engine) == {}  # the old words' derivation went in the amend's transaction
    engine.consolidate()
    ((mid, _),) = derived(engine).items()
    assert engine.read(mid).memory.metadata["derived_from"] == [h, c2]  # justified by the current version
    engine.retire(c2)
    assert derived(engine) == {}
    engine.consolidate()
    assert derived(engine) == {}  # nothing left to justify it
    assert h  # the hotel itself is untouched
    assert engine.read(h).memory.status == "current"


def test_an_update_that_supersedes_a_source_withdraws_the_derivation_in_its_write(engine: Engine) -> None:
    engine.functional = engine.functional | {"located_in"}  # a store that keeps one container per thing
    _, c = hotel_and_city(engine, ["user:ana"], ["user:ana"])
    assert len(derived(engine)) == 1
    receipt = engine.write("Udaipur is in Gujarat now.", ["user:ana"], kind="fact",
                           relations=[RelationIn("Udaipur", "located_in", "Gujarat")])  # fmt: skip
    assert receipt.supersedes == (c,)
    assert derived(engine) == {}  # gone in the write that superseded its source
    engine.consolidate()
    assert list(derived(engine).values()) == [
        "Grand Palm located in Gujarat (derived: Grand Palm located in Udaipur; Udaipur located in Gujarat)"
    ]


def test_erasing_a_source_erases_the_derivation_from_every_file(engine: Engine) -> None:
    canary = f"Villa{uuid.uuid4().hex[:12]}"
    h = engine.write(f"{canary} is located in Udaipur.", ["user:ana"], kind="fact",
                     relations=[RelationIn(canary, "located_in", "Udaipur")]).id  # fmt: skip
    engine.write(CITY, ["user:ana"], kind="fact", relations=[IN_STATE])
    engine.consolidate()
    ((mid, text),) = derived(engine).items()
    assert canary in text
    receipt = engine.erase(h, confirm=h)
    assert mid in receipt.erased
    engine.consolidate()
    assert derived(engine) == {}
    assert files_containing(engine.data_dir, canary.encode()) == []


def test_purging_a_sources_scope_erases_the_derivation_from_every_file(engine: Engine) -> None:
    canary = f"Villa{uuid.uuid4().hex[:12]}"
    engine.write(f"{canary} is part of the Oberoi group.", ["team:a"], kind="fact",
                 relations=[RelationIn(canary, "part_of", "Oberoi group")])  # fmt: skip
    engine.write("The Oberoi group is part of EIH.", ["team:a", "team:b"], kind="fact",
                 relations=[RelationIn("Oberoi group", "part_of", "EIH")])  # fmt: skip
    engine.consolidate()
    assert any(canary in t for t in derived(engine).values())
    engine.purge("team:a", confirm="team:a")
    engine.consolidate()
    assert derived(engine) == {}
    assert files_containing(engine.data_dir, canary.encode()) == []


def test_derivations_are_rebuildable_and_left_out_of_exports(engine: Engine) -> None:
    hotel_and_city(engine, ["user:ana"], ["user:ana"])
    (mid,) = derived(engine)
    out = io.StringIO()
    engine.export(out)
    assert mid not in out.getvalue()
    engine.erase(mid, confirm=mid)  # erased on its own: the rebuild derives it again
    assert derived(engine) == {}
    engine.rebuild_digests()
    assert list(derived(engine)) == [mid]


def test_an_imported_store_derives_again_what_the_export_left_out(
    engine: Engine, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    hotel_and_city(engine, ["user:ana"], ["user:ana"])
    ((_, text),) = derived(engine).items()
    out = io.StringIO()
    engine.export(out)
    Engine.import_export(tmp_path / "copy", io.StringIO(out.getvalue()), embedder=embedder)
    with Engine.open(tmp_path / "copy", embedder=embedder, warm=False) as copy:
        copy.consolidate()
        assert list(derived(copy).values()) == [text]


def test_mnemograph_digests_derives_chains_the_write_path_never_saw(engine: Engine) -> None:
    engine.transitive = frozenset()  # written before derivations (or with the predicate not yet listed)
    hotel_and_city(engine, ["user:ana"], ["user:ana"])
    assert derived(engine) == {}
    engine.transitive = frozenset(tr.DEFAULT_TRANSITIVE)
    engine.rebuild_digests()
    assert len(derived(engine)) == 1


def test_a_hostile_fan_out_is_bounded(engine: Engine) -> None:
    for n in range(3 * tr.FANOUT):
        engine.write(f"Room {n} is part of the Grand Palm.", ["user:ana"], kind="fact",
                     relations=[RelationIn(f"Room {n}", "part_of", "Grand Palm")])  # fmt: skip
    engine.write("The Grand Palm is part of the Oberoi group.", ["user:ana"], kind="fact",
                 relations=[RelationIn("Grand Palm", "part_of", "Oberoi group")])  # fmt: skip
    engine.consolidate()
    made = derived(engine)
    assert 0 < len(made) <= 4 * tr.FANOUT
    # a derivation is never the source of another: chains stay two statements long
    engine.write("The Oberoi group is part of EIH.", ["user:ana"], kind="fact",
                 relations=[RelationIn("Oberoi group", "part_of", "EIH")])  # fmt: skip
    engine.consolidate()
    assert not any(t.startswith("Room") and "EIH" in t for t in derived(engine).values())


def test_the_sweep_links_contradictions_the_write_time_rules_missed_once(engine: Engine) -> None:
    # Written to different scopes, the rules compared neither with the other; a link puts them side by side.
    a = engine.write("Ana was born in Porto.", ["team:a"], kind="fact",
                     relations=[RelationIn("Ana", "born_in", "Porto")]).id  # fmt: skip
    b = engine.write("Ana was born in Braga.", ["team:b"], kind="fact",
                     relations=[RelationIn("Ana", "born_in", "Braga")]).id  # fmt: skip
    assert engine.sweep_contradictions() == []  # no scope holds both: nobody sees them together
    engine.link(b, "team:a")  # the link sweeps what it put side by side (tests/storage/test_sweep_auto.py)
    assert engine.sweep_contradictions() == []  # linked once, by the link; idempotent
    reader = Principal("rui", client="t", grants=(Grant.parse("team:a=r"),))
    hits = {x.memory.id: x for x in engine.recall("Where was Ana born?", ["team:a"], principal=reader)}
    assert hits[a].conflicts == (b,)
    assert hits[b].conflicts == (a,)
    assert engine.read(a).memory.status == "current"
    assert engine.read(b).memory.status == "current"
    log = [json.loads(line) for line in (engine.data_dir / "audit.jsonl").read_text().splitlines()]
    assert any(e.get("op") == "sweep" and set(e.get("ids", [])) == {a, b} for e in log)


def test_the_sweep_runs_on_a_shared_falkordb_store_and_derives_nothing_there(
    tmp_path: Path, embedder: CachedEmbedder, falkordb: falkordb_local.LocalServer
) -> None:
    with Engine.open(tmp_path / "n1", embedder=embedder, warm=False, canonical=falkordb.url("shared")) as e:
        a = e.write("Ana was born in Porto.", ["team:a"], kind="fact",
                    relations=[RelationIn("Ana", "born_in", "Porto")]).id  # fmt: skip
        b = e.write("Ana was born in Braga.", ["team:b"], kind="fact",
                    relations=[RelationIn("Ana", "born_in", "Braga")]).id  # fmt: skip
        e.link(b, "team:a")
        assert e.sweep_contradictions() == []  # the link swept them
        assert e.read(a).contradicts == (b,)
        # Derivations are kept like conversations, which a shared store does not hold yet (docs/scale-out.md).
        hotel_and_city(e, ["user:ana"], ["user:ana"])
        assert derived(e) == {}
