"""Access control in the domain layer: every Engine operation checks the principal's grants, in one place.

Real stores in tmp_path, real model. Denials change nothing; memories a principal may not read look absent.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from scopes import Grant, Principal
from storage import (
    CachedEmbedder,
    Conflict,
    Engine,
    EntityIn,
    InvalidInput,
    NotFound,
    RelationIn,
    ScopeDenied,
    WriteItem,
)
from storage.engine.explore import neighbourhood
from storage.engine.state import content_id


def principal(name: str, *grants: str) -> Principal:
    return Principal(name, client="tests", grants=tuple(Grant.parse(g) for g in grants))


A = principal("A", "agent:a=w", "team:t=w")
B = principal("B", "agent:b=w", "team:t=w")
R = principal("R", "team:t=r")
ADMIN = principal("Admin", "team:t=admin")


@pytest.fixture
def seeded(engine: Engine) -> tuple[Engine, str, str]:
    private = engine.write("Agent A hides the spare key in the red box.", ["agent:a"], principal=A).id
    shared = engine.write("Team T deploys every Tuesday.", ["team:t"], principal=A).id
    return engine, private, shared


def test_recall_reads_only_granted_scopes(seeded: tuple[Engine, str, str]) -> None:
    engine, private, shared = seeded
    assert engine.recall("spare key red box", None, principal=A, k=5)[0].memory.id == private
    assert private not in [h.memory.id for h in engine.recall("spare key red box", None, principal=B, k=20)]
    with pytest.raises(ScopeDenied, match="B may not recall in agent:a") as denied:
        engine.recall("key", ["agent:a"], principal=B)
    assert "'r' grant on agent:a" in denied.value.hint
    with pytest.raises(ScopeDenied):  # one forbidden scope among allowed ones is enough to refuse
        engine.recall("key", ["team:t", "agent:a"], principal=B)
    hits = engine.recall("when does the team deploy", ["team:t"], principal=R)
    assert hits[0].memory.id == shared
    assert hits[0].memory.provenance.principal == "A"
    assert hits[0].memory.provenance.client == "tests"
    # A denial does not depend on whether the scope exists.
    with pytest.raises(ScopeDenied):
        engine.recall("key", ["agent:never-created"], principal=B)


def test_shared_memories_show_only_the_scopes_the_reader_may_see(seeded: tuple[Engine, str, str]) -> None:
    engine, private, _ = seeded
    engine.link(private, "team:t", principal=A)
    hit = engine.recall("spare key red box", ["team:t"], principal=B)[0]
    assert hit.memory.id == private
    assert hit.memory.scopes == ("team:t",)
    assert engine.read(private, principal=B).memory.scopes == ("team:t",)
    assert engine.read(private).memory.scopes == ("agent:a", "team:t")
    # Changing it needs w on every scope it is in.
    with pytest.raises(ScopeDenied, match="belongs to scopes you cannot write"):
        engine.retire(private, principal=B)
    with pytest.raises(ScopeDenied):
        engine.amend(private, "Poisoned.", principal=B)
    engine.retire(private, principal=A)


def test_invisible_memories_look_absent(seeded: tuple[Engine, str, str]) -> None:
    engine, private, _ = seeded
    ops: list[Callable[[], Any]] = [
        lambda: engine.read(private, principal=B),
        lambda: engine.amend(private, "B rewrites A's note.", principal=B),
        lambda: engine.retire(private, principal=B),
        lambda: engine.link(private, "agent:b", principal=B),
        lambda: engine.unlink(private, "team:t", principal=B),
    ]
    for op in ops:
        with pytest.raises(NotFound) as exc:
            op()
        assert exc.value.message == f"no memory with id {private}"
    assert engine.read(private).memory.status.value == "current"


def test_reader_cannot_change_anything(seeded: tuple[Engine, str, str]) -> None:
    engine, _, shared = seeded
    before = engine.verify()
    for op in (
        lambda: engine.write("R writes.", ["team:t"], principal=R),
        lambda: engine.amend(shared, "Team T deploys on Fridays.", principal=R),
        lambda: engine.retire(shared, principal=R),
        lambda: engine.link(shared, "team:t", principal=R),
        lambda: engine.unlink(shared, "team:t", principal=R),
        lambda: engine.create_scope("agent:r", "team:t", principal=R),
        lambda: engine.purge("team:t", confirm="team:t", principal=R),
    ):
        with pytest.raises(ScopeDenied):
            op()
    after = engine.verify()
    assert (after.canonical_memories, after.canonical_seq) == (
        before.canonical_memories,
        before.canonical_seq,
    )
    assert engine.read(shared).memory.status.value == "current"


def test_purge_and_scope_management_need_admin(seeded: tuple[Engine, str, str]) -> None:
    engine, _, _ = seeded
    with pytest.raises(ScopeDenied, match="A may not purge in team:t"):
        engine.purge("team:t", confirm="team:t", principal=A)
    with pytest.raises(ScopeDenied):
        engine.create_scope("agent:x", "team:t", principal=A)
    with pytest.raises(ScopeDenied):  # admin on team:t does not reach a scope outside it
        engine.create_scope("agent:a", "team:t", principal=ADMIN)
    with pytest.raises(ScopeDenied):  # nor may it place its scopes inside someone else's
        engine.create_scope("agent:y", "agent:a", principal=ADMIN)
    engine.create_scope("agent:x", "team:t", principal=ADMIN)
    assert engine.purge("team:t", confirm="team:t", principal=ADMIN).memories_deleted == 1
    assert engine.verify().ok


def test_names_others_hold_cannot_be_created_by_a_token(engine: Engine) -> None:
    engine.reserve_scopes(
        lambda: {
            "agent:planner": frozenset({"planner"}),
            "project:home": frozenset({""}),  # the local user's default scope
            "agent:helper": frozenset({"Admin"}),  # granted to the creator itself
        }
    )
    for name in ("agent:planner", "project:home", "user:ana"):
        with pytest.raises(ScopeDenied, match=f"Admin may not create {name}: the name is in use or reserved"):
            engine.create_scope(name, "team:t", principal=ADMIN)
    assert engine.create_scope("agent:helper", "team:t", principal=ADMIN).parent == "team:t"
    own_user = principal("ana", "user:ana=admin", "team:t=admin")
    assert engine.create_scope("user:ana", "team:t", principal=own_user).parent == "team:t"
    # The local user places any name; a token then cannot take it over.
    engine.create_scope("agent:planner", "team:ops")
    with pytest.raises(ScopeDenied, match="the name is in use or reserved"):
        engine.create_scope("agent:planner", "team:t", principal=ADMIN)
    assert {s.id: s.parent for s in engine.list_scopes()}["agent:planner"] == "team:ops"

    def broken() -> dict[str, frozenset[str]]:
        raise ValueError("the token file is damaged")

    engine.reserve_scopes(broken)  # fails closed
    with pytest.raises(ScopeDenied):
        engine.create_scope("project:new", "team:t", principal=ADMIN)


def test_create_never_moves_and_move_needs_admin_on_both_sides(engine: Engine) -> None:
    other = principal("Other", "team:u=admin")
    both = principal("Both", "team:t=admin", "team:u=admin")
    engine.create_scope("project:p", "team:t", principal=ADMIN)
    assert engine.create_scope("project:p", "team:t", principal=ADMIN).parent == "team:t"
    with pytest.raises(Conflict, match="already exists inside team:t") as moved:
        engine.create_scope("project:p", "team:u", principal=both)
    assert "call move_scope" in moved.value.hint
    with pytest.raises(Conflict, match="already exists inside team:t"):
        engine.create_scope("project:p", None)
    with pytest.raises(ScopeDenied):
        engine.create_scope("project:p", "team:u", principal=other)
    for who in (ADMIN, other):
        with pytest.raises(ScopeDenied, match="may not move scopes"):
            engine.move_scope("project:p", "team:u", principal=who)
    assert engine.move_scope("project:p", "team:u", principal=both).parent == "team:u"
    with pytest.raises(ScopeDenied):  # to the top level: admin on the scope itself, which team:u gives
        engine.move_scope("project:p", None, principal=ADMIN)
    assert engine.move_scope("project:p", None, principal=other).parent is None


def test_write_receipts_do_not_confirm_content_stored_elsewhere(seeded: tuple[Engine, str, str]) -> None:
    engine, private, _ = seeded
    probe = engine.write("Agent A hides the spare key in the red box.", ["agent:b"], principal=B)
    assert probe.status == "added"  # not "linked": B must not learn that A wrote the same words
    assert probe.scopes == ("agent:b",)
    assert probe.id != private  # a memory of B's own, not A's
    assert engine.read(private).memory.scopes == ("agent:a",)


def test_list_scopes_and_subtrees_are_filtered(seeded: tuple[Engine, str, str]) -> None:
    engine, _, _ = seeded
    engine.create_scope("agent:planner", "team:t")
    engine.move_scope("team:t", "org:acme")
    assert [s.id for s in engine.list_scopes(principal=R)] == ["agent:planner", "team:t"]
    team = {s.id: s for s in engine.list_scopes(principal=R)}["team:t"]
    assert team.parent is None  # org:acme is not R's to see
    assert team.memories == 1
    assert [s.id for s in engine.list_scopes("org:acme")] == ["agent:planner", "org:acme", "team:t"]
    assert [s.id for s in engine.list_scopes("team:t", principal=R)] == ["agent:planner", "team:t"]
    with pytest.raises(ScopeDenied):
        engine.list_scopes("org:acme", principal=R)
    with pytest.raises(ScopeDenied):
        engine.list("agent:a", principal=B)
    assert [m.id for m in engine.list("team:t", principal=R).items]


def test_inheritance_reads_ancestors_and_descendants_on_request(engine: Engine) -> None:
    engine.create_scope("project:site", parent="user:ana")
    up = engine.write("Ana prefers tabs over spaces.", ["user:ana"]).id
    down = engine.write("The site deploys from the main branch.", ["project:site"]).id
    assert up in [h.memory.id for h in engine.recall("tabs or spaces", ["project:site"])]
    assert down not in [h.memory.id for h in engine.recall("site deploys main branch", ["user:ana"])]
    assert down in [
        h.memory.id for h in engine.recall("site deploys main branch", ["user:ana"], descendants=True)
    ]
    # Inheritance never widens a grant: a principal with r on the child only does not read the parent.
    child_only = principal("site-bot", "project:site=r")
    assert up not in [
        h.memory.id for h in engine.recall("tabs or spaces", ["project:site"], principal=child_only)
    ]


def test_link_and_unlink_keep_the_projections_in_step(engine: Engine) -> None:
    mid = engine.write("The office wifi password rotates monthly.", ["user:ana"]).id
    linked = engine.link(mid, "team:ops")
    assert (linked.scopes, linked.changed) == (("team:ops", "user:ana"), True)
    assert not engine.link(mid, "team:ops").changed
    assert [h.memory.id for h in engine.recall("wifi password", ["team:ops"])] == [mid]
    assert engine.verify().ok
    unlinked = engine.unlink(mid, "user:ana")
    assert unlinked.scopes == ("team:ops",)
    assert engine.recall("wifi password", ["user:ana"]) == []
    assert [h.memory.id for h in engine.recall("wifi password", ["team:ops"])] == [mid]
    with pytest.raises(Conflict, match="only scope") as last:
        engine.unlink(mid, "team:ops")
    assert "retire" in last.value.hint
    with pytest.raises(NotFound, match="is not in user:ana"):
        engine.unlink(mid, "user:ana")
    report = engine.verify()
    assert report.ok
    assert engine.reindex().ok
    assert [h.memory.id for h in engine.recall("wifi password", ["team:ops"])] == [mid]


def test_moving_scopes(engine: Engine) -> None:
    engine.create_scope("project:site", parent="user:ana")
    moved = engine.move_scope("project:site", "team:web")
    assert moved.parent == "team:web"
    assert engine.move_scope("project:site", None).parent is None
    with pytest.raises(NotFound):
        engine.move_scope("project:nope", "team:web")
    engine.move_scope("team:web", parent="project:site")
    with pytest.raises(InvalidInput, match="its own ancestor"):
        engine.move_scope("project:site", "team:web")


def test_the_audit_log_records_who_did_what_without_content(seeded: tuple[Engine, str, str]) -> None:
    engine, private, shared = seeded
    engine.amend(shared, "Team T deploys every Wednesday.", principal=B)
    engine.retire(private, principal=A)
    engine.purge("team:t", confirm="team:t", principal=ADMIN)
    events = engine.audit.events()
    assert [(e["op"], e["principal"]) for e in events] == [
        ("write", "A"),
        ("write", "A"),
        ("amend", "B"),
        ("retire", "A"),
        ("purge", "Admin"),
    ]
    assert events[0]["ids"] == [private]
    assert events[0]["client"] == "tests"
    assert events[-1]["memories_deleted"] == 2
    assert events[-1]["ids"] == []
    text = engine.audit.path.read_text()
    assert "Tuesday" not in text
    assert "Wednesday" not in text


def test_erase_needs_admin_on_every_scope_of_every_version(seeded: tuple[Engine, str, str]) -> None:
    engine, private, shared = seeded
    newer = engine.amend(shared, "Team T deploys every Thursday.", principal=A).id
    for who in (A, B, R):
        with pytest.raises(ScopeDenied, match="may not erase in team:t"):
            engine.erase(newer, confirm=newer, principal=who)
    with pytest.raises(NotFound):  # the admin of team:t cannot see agent:a: the memory looks absent
        engine.erase(private, confirm=private, principal=ADMIN)
    assert engine.read(shared).memory.id == shared  # nothing was erased by the refused calls
    receipt = engine.erase(newer, confirm=newer, principal=ADMIN)
    assert set(receipt.erased) == {shared, newer}
    assert engine.audit.events()[-1]["op"] == "erase"
    assert "Thursday" not in engine.audit.path.read_text()
    assert engine.read(private).memory.id == private


def test_guessed_words_of_another_team_open_nothing_of_theirs(engine: Engine) -> None:
    """Attack F1: B writes, word for word, a memory A stored where B may not read. B must get a memory of its
    own: not A's id, metadata, relations, writer or entities."""
    text = "Zorblax Corp will acquire the target in March."
    theirs = engine.write_many(
        [
            WriteItem(
                content=text,
                scopes=["agent:a"],
                metadata={"owner": "alice-private-meta"},
                relations=[
                    RelationIn(subject="Zorblax Corp", predicate="acquires", object="Hidden Target Inc")
                ],
            )
        ],
        principal=A,
    )[0]
    mine = engine.write(text, ["agent:b"], principal=B)
    assert mine.status == "added"
    assert mine.id != theirs.id
    assert "Hidden Target Inc" not in mine.entities
    record = engine.read(mine.id, principal=B)
    assert record.memory.metadata == {}
    assert record.memory.provenance.principal == "B"
    assert "Hidden Target Inc" not in record.memory.entities
    found = engine.recall("Which company is Zorblax Corp buying?", ["agent:b"], principal=B, k=5)
    assert [h.memory.id for h in found] == [mine.id]
    assert not any("Hidden Target" in p for h in found for p in h.paths)
    # Writing it again is a duplicate of B's own memory; A's is untouched and still A's alone.
    assert engine.write(text, ["agent:b"], principal=B).status == "duplicate"
    assert engine.read(theirs.id, principal=A).memory.scopes == ("agent:a",)
    with pytest.raises(NotFound):
        engine.read(theirs.id, principal=B)


def test_a_reader_of_a_separate_memory_cannot_test_which_other_scopes_it_went_to(engine: Engine) -> None:
    """A memory of B's own (its words were A's where B may not read) has an id salted by the scopes B wrote it
    to. A reader of one of them sees its words and id, and must not be able to test a guess of the others."""
    text = "The merger closes on Friday."
    engine.write(text, ["agent:a"], principal=A)
    writer = principal("W", "team:t=w", "team:legal=w")
    mine = engine.write(text, ["team:t", "team:legal"], principal=writer)
    reader = principal("R", "team:t=r")
    seen = engine.read(mine.id, principal=reader).memory
    assert seen.scopes == ("team:t",)

    def guess(scopes: str) -> str:
        return content_id(seen.content, salt="separate:" + scopes)

    assert guess("team:hr,team:t") != seen.id
    assert guess("team:legal,team:t") != seen.id  # the right guess must not be told apart
    # Written again there, it is still a duplicate of that memory.
    assert engine.write(text, ["team:t", "team:legal"], principal=writer).status == "duplicate"


def test_a_reader_of_a_proposal_cannot_test_which_other_scopes_it_applies_to(engine: Engine) -> None:
    writer = principal("W", "team:t=w", "team:legal=w")
    engine.write("Katherine Johnson leads the budget review.", ["team:t", "team:legal"], principal=writer)
    engine.write("I hear Katherine Johnston runs the warehouse.", ["team:t", "team:legal"], principal=writer)
    reader = principal("R", "team:t=r")
    shown = engine.entity_proposals(principal=reader)
    assert len(shown) == 1
    p = shown[0]
    assert p.scopes == ("team:t",)
    ka, kb = sorted((p.a.casefold(), p.b.casefold()))

    def guess(scopes: str) -> str:
        return hashlib.sha256(f"same_as\0{ka}\0{kb}\0{scopes}".encode()).hexdigest()[:32]

    assert guess("team:hr,team:t") != p.id
    assert guess("team:legal,team:t") != p.id  # the right guess must not be told apart


def test_a_separate_memory_from_before_secrets_keeps_its_id_and_its_duplicates(
    data_dir: Path, embedder: CachedEmbedder
) -> None:
    text = "The merger closes on Friday."
    with Engine.open(data_dir, embedder=embedder, warm=False) as old:
        old.reconciler.submit(lambda tx: old.graph.set_id_secret(tx.conn, ""))  # as a store made before
        old.write(text, ["agent:a"], principal=A)
        before = old.write(text, ["agent:b"], principal=B)
        assert before.id == content_id(text, salt="separate:agent:b")
        old.reconciler.submit(lambda tx: old.graph.set_id_secret(tx.conn, "cd" * 32))
    with Engine.open(data_dir, embedder=embedder, warm=False) as store:
        again = store.write(text, ["agent:b"], principal=B)
        assert again.status == "duplicate"
        assert again.id == before.id


def test_another_capitalisation_does_not_reveal_a_name_another_team_stored(engine: Engine) -> None:
    """Attack F5: a name written in lower case must not come back in the spelling another team stored."""
    engine.write("Zorblax Corporation sent the invoice.", ["agent:a"], principal=A)
    probe = engine.write("zorblax corporation invoice arrived", ["agent:b"], principal=B)
    assert not any(e.casefold() == "zorblax corporation" for e in probe.entities)
    assert "Zorblax Corporation" not in engine.read(probe.id, principal=B).memory.entities
    # The same name written as stored, or by someone who may read it, is kept.
    assert (
        "Zorblax Corporation" in engine.write("Zorblax Corporation paid.", ["agent:b"], principal=B).entities
    )
    assert (
        "Zorblax Corporation" in engine.write("zorblax corporation paid", ["agent:a"], principal=A).entities
    )


def test_a_relation_end_is_not_shown_in_the_spelling_another_team_stored(engine: Engine) -> None:
    """Attack F5 through relations: B writes "zorblax corporation" (a relation it gives, as a calling model
    does) where A stored "ZORBLAX CORPORATION". B's receipt keeps B's spelling, but B's memory_read relations,
    recall paths and the entity view showed A's, telling B that another team stored that name."""
    engine.write(
        "ZORBLAX CORPORATION is hiring in Porto.",
        ["agent:a"],
        entities=[EntityIn("ZORBLAX CORPORATION", "org")],
        principal=A,
    )
    mine = engine.write(
        "Bo works at zorblax corporation.",
        ["agent:b"],
        relations=[RelationIn("Bo", "works_at", "zorblax corporation")],
        principal=B,
    )
    assert mine.relations == ("Bo —works_at→ zorblax corporation",)  # the receipt already holds
    shown = [
        *engine.read(mine.id, principal=B).relations,
        *(
            p
            for h in engine.recall("Where does Bo work?", ["agent:b"], recipe="graph", principal=B)
            for p in h.paths
        ),
        *(n.label for n in neighbourhood(engine, entity="Bo", principal=B).nodes),
    ]
    assert any("zorblax corporation" in x for x in shown)
    assert not any("ZORBLAX" in x for x in shown)


def _zorblax(engine: Engine) -> str:
    """A stores the name as "ZORBLAX CORPORATION"; B then records a relation to it as "zorblax corporation"."""
    engine.write(
        "ZORBLAX CORPORATION is hiring in Porto.",
        ["agent:a"],
        entities=[EntityIn("ZORBLAX CORPORATION", "org")],
        principal=A,
    )
    return engine.write(
        "Bo works at zorblax corporation.",
        ["agent:b"],
        relations=[RelationIn("Bo", "works_at", "zorblax corporation")],
        principal=B,
    ).id


def test_a_path_from_a_named_entity_does_not_start_with_another_teams_spelling(engine: Engine) -> None:
    """B asks about the entity itself: the walk starts at it, and the path (and the reason recall gives) began
    with the name the lexicon matched, the spelling the last team to write it stored ("Zorblax Corporation",
    C's), not B's own."""
    mine = _zorblax(engine)
    engine.write(
        "Zorblax Corporation opened an office.",
        ["agent:c"],
        entities=[EntityIn("Zorblax Corporation", "org")],
        principal=principal("C", "agent:c=w"),
    )
    hits = engine.recall("Who works at zorblax corporation?", ["agent:b"], recipe="graph", principal=B)
    paths = [p for h in hits for p in h.paths]
    assert paths == ["zorblax corporation ←works_at— Bo"]
    hood = neighbourhood(engine, memory=mine, principal=B)
    assert {n.label for n in hood.nodes if n.kind == "entity"} == {"Bo", "zorblax corporation"}


def test_a_name_i_wrote_before_is_not_given_back_in_another_teams_spelling(engine: Engine) -> None:
    """Once B has named the entity itself ("zorblax corporation"), a later write of B naming it again in lower
    case, with no entities or relations given, came back with A's stored spelling in the receipt's entities
    and relations (the offline extractor names a known entity by the lexicon's display name, and B may know
    the entity): B learnt how another team wrote it."""
    _zorblax(engine)
    later = engine.write("Cy works at zorblax corporation.", ["agent:b"], principal=B)
    record = engine.read(later.id, principal=B)
    shown = [*later.entities, *later.relations, *record.memory.entities, *record.relations]
    assert "zorblax corporation" in later.entities
    assert "Cy —works_at→ zorblax corporation" in later.relations
    assert not any("ZORBLAX" in x for x in shown)


def test_an_amend_does_not_carry_a_relation_over_in_another_teams_spelling(engine: Engine) -> None:
    """amend carries the old version's relations whose ends the new text names; it took the ends' names from the
    entities (A's "ZORBLAX CORPORATION") and gave them to the new version as its own entities, so B's new
    version named, and its relations showed, the spelling A stored."""
    mine = _zorblax(engine)
    new = engine.amend(mine, "Bo still works at zorblax corporation, now remotely.", principal=B)
    record = engine.read(new.id, principal=B)
    shown = [*record.memory.entities, *record.relations]
    assert any("zorblax corporation" in x for x in shown)
    assert not any("ZORBLAX" in x for x in shown)


def test_a_same_as_proposal_names_no_entity_in_another_teams_spelling(engine: Engine) -> None:
    """B's write raises a SAME_AS proposal against an entity B knows as "jonathan smithers"; the listing (the
    entities tool, `mnemograph entities list`) named it by its stored name, A's "Jonathan SMITHERS"."""
    engine.write(
        "Jonathan SMITHERS joined.",
        ["agent:a"],
        entities=[EntityIn("Jonathan SMITHERS", "person")],
        principal=A,
    )
    engine.write(
        "jonathan smithers called.",
        ["agent:b"],
        entities=[EntityIn("jonathan smithers", "person")],
        principal=B,
    )
    raised = engine.write(
        "Jonathon Smithers called again.",
        ["agent:b"],
        entities=[EntityIn("Jonathon Smithers", "person")],
        principal=B,
    )
    assert raised.proposals
    listed = engine.entity_proposals("all", principal=B)
    assert {(p.a, p.b) for p in listed} == {("Jonathon Smithers", "jonathan smithers")}
    decided = engine.decide_proposal(listed[0].id, "reject", principal=B)
    assert (decided.a, decided.b) == ("Jonathon Smithers", "jonathan smithers")


def test_amending_to_another_teams_words_opens_nothing_of_theirs(engine: Engine) -> None:
    """attack12: B amends its own memory to, word for word, a memory A stored where B may not read. The amend
    joined A's memory (linked it into agent:b), so B read its id, metadata, writer and start time (the receipt's
    valid_from was A's): a guessed sentence opened A's memory, as a write no longer does. B must get a memory of
    its own, as a write of those words gets."""
    text = "Zorblax Corp will acquire the target in March."
    theirs = engine.write_many(
        [WriteItem(content=text, scopes=["agent:a"], metadata={"owner": "alice-private-meta"})], principal=A
    )[0]
    draft = engine.write("Zorblax Corp might buy something.", ["agent:b"], principal=B)
    mine = engine.amend(draft.id, text, principal=B)
    assert mine.id != theirs.id
    record = engine.read(mine.id, principal=B)
    assert record.memory.metadata == {}
    assert record.memory.provenance.principal == "B"
    assert engine.read(theirs.id, principal=A).memory.scopes == ("agent:a",)
    with pytest.raises(NotFound):
        engine.read(theirs.id, principal=B)
    # The memory of its own is what B's later write of the same words joins: B's, not A's.
    assert engine.write(text, ["agent:b"], principal=B).id == mine.id


@pytest.mark.parametrize(
    ("theirs", "probe"),
    [
        ("The vendor is zorblax corp.", "we met zorblax corp again."),  # a name stored in lower case
        ("Quibbleton is a vendor we use.", "Quibbleton. That was it."),  # one word opening a sentence
    ],
)
def test_a_write_does_not_tell_which_names_another_team_knows(
    engine: Engine, theirs: str, probe: str
) -> None:
    """The write path matches the text against every team's entity names. A name that the text alone would not
    make an entity (lower case, or one capitalised word opening a sentence) came back in B's receipt, and in its
    memory's entities, only when some team B cannot read had stored it: a probe for which names exist elsewhere.
    B's write must read the same whether or not A stored the name."""
    name = probe.split(".")[0].removeprefix("we met ").removesuffix(" again")
    before = engine.write(probe, ["agent:b"], principal=B)
    engine.write(theirs, ["agent:a"], principal=A, entities=[EntityIn(name)])
    after = engine.write(probe + " Later.", ["agent:b"], principal=B)
    assert after.entities == before.entities
    assert (
        engine.read(after.id, principal=B).memory.entities
        == engine.read(before.id, principal=B).memory.entities
    )
    amended = engine.amend(before.id, probe + " Amended.", principal=B)
    assert (
        engine.read(amended.id, principal=B).memory.entities
        == engine.read(before.id, principal=B).memory.entities
    )
    # Once B may read a memory naming it, the name is B's to see.
    engine.write(theirs, ["team:t"], principal=A, entities=[EntityIn(name)])
    assert name in engine.write(probe + " Again.", ["agent:b"], principal=B).entities
