"""The engine over each canonical adapter, with the real projections: what a user relies on, end to end.

Writes, versions and scopes through the engine's use cases; the projections catching up after a crash
between the canonical commit and theirs; and erasure that leaves no byte of a memory in any adapter's files.
"""

from __future__ import annotations

import io
import shutil
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from scopes import Grant, Principal
from storage import CachedEmbedder, EntityIn, RelationIn, WriteItem
from storage.domain.errors import InvalidInput, ScopeDenied
from storage.domain.records import Change
from storage.engine.core import EngineCore
from storage.enrich.results import LlmResult, LlmStatement, Usage
from tests.conftest import files_containing
from tests.storage.contract._records import T0, canary, needles, new_memory
from tests.storage.contract.conftest import CanonicalAdapter

OpenEngine = Callable[[Path], EngineCore]


def test_writes_are_read_back_and_recalled_by_every_lane(open_engine: OpenEngine, tmp_path: Path) -> None:
    eng = open_engine(tmp_path / "data")
    r = eng.write("Ana moved to Lisbon in 2021.", ["user:ana"])
    again = eng.write("Ana moved to Lisbon in 2021.", ["user:ana"])
    assert (r.status, again.status, again.id) == ("added", "duplicate", r.id)
    assert eng.read(r.id).memory.content == "Ana moved to Lisbon in 2021."
    hits = eng.recall("Where did Ana move?", ["user:ana"])
    assert hits[0].memory.id == r.id
    assert set(hits[0].lanes) == {"bm25", "vector", "graph"}
    assert eng.verify().ok


def test_versions_keep_history(open_engine: OpenEngine, tmp_path: Path) -> None:
    eng = open_engine(tmp_path / "data")
    old = eng.write("Bo's office is on floor 3.", ["user:bo"])
    new = eng.amend(old.id, "Bo's office is on floor 5.")
    assert [h.memory.id for h in eng.recall("Bo office floor", ["user:bo"])] == [new.id]
    history = eng.recall("Bo office floor", ["user:bo"], include_history=True)
    assert {old.id, new.id} <= {h.memory.id for h in history} | {v.id for h in history for v in h.via}
    assert eng.read(old.id).memory.superseded_by == new.id
    eng.retire(new.id, reason="moved out")
    assert eng.recall("Bo office floor", ["user:bo"]) == []
    assert eng.verify().ok


def test_scopes_bound_what_recall_sees(open_engine: OpenEngine, tmp_path: Path) -> None:
    eng = open_engine(tmp_path / "data")
    eng.create_scope("project:web", parent="team:web")
    mine = eng.write("The launch date is May 4.", ["team:web"])
    eng.write("The launch party is at Rosa's.", ["user:cy"])
    assert [h.memory.id for h in eng.recall("launch", ["project:web"])] == [
        mine.id
    ]  # inherited from the parent
    assert all(h.memory.id != mine.id for h in eng.recall("launch", ["user:cy"]))
    eng.link(mine.id, "user:cy")
    assert mine.id in {h.memory.id for h in eng.recall("launch", ["user:cy"])}
    eng.unlink(mine.id, "user:cy")
    assert all(h.memory.id != mine.id for h in eng.recall("launch", ["user:cy"]))
    assert eng.verify().ok


def test_projections_catch_up_after_a_crash_between_the_commits(
    adapter: CanonicalAdapter, open_engine: OpenEngine, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    data = tmp_path / "data"
    eng = open_engine(data)
    first = eng.write("Cy keeps bees.", ["user:cy"])
    eng.close()
    # The crash: a commit reached the canonical store and its change log, and the process died before any
    # projection applied it (exactly what the reconciler's writer does before the projector runs).
    store = adapter.open(data, embedder)
    m = new_memory(embedder, "Cy's hives are behind the orchard.")
    with store.transaction() as tx:
        seq = store.max_seq(tx) + 1
        store.ensure_scopes(tx, ["user:cy"], T0)
        store.insert_memory(tx, m, ["user:cy"], ())
        store.link(tx, m.id, ["user:cy"], T0)
        store.append_changes(tx, [Change(seq, "add", m.id)], T0)
    store.close()
    # And a projection lost outright (its directory deleted): rebuilt, not replayed.
    shutil.rmtree(data / "text")

    eng = open_engine(data)
    report = eng.verify()
    assert report.ok
    assert report.counts == {adapter.name: 2, "lancedb": 2, "tantivy": 2}
    assert set(report.watermarks.values()) == {seq}
    found = {h.memory.id for h in eng.recall("Where are Cy's hives?", ["user:cy"])}
    assert {m.id, first.id} <= found


def test_erasure_leaves_no_content_vector_id_or_alias_bytes(
    adapter: CanonicalAdapter, open_engine: OpenEngine, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    data = tmp_path / "data"
    eng = open_engine(data)
    secret, alias = canary("SECRET"), canary("Zqalias")
    keep = eng.write("Dee waters the ferns on Fridays.", ["user:dee"])
    gone = eng.write_many(
        [
            WriteItem(
                f"Dee's safe code is {secret}.", ["user:dee"], entities=[EntityIn("Dee", aliases=(alias,))]
            )
        ]
    )[0]
    vector = np.asarray(embedder.embed([f"Dee's safe code is {secret}."])[0])
    patterns = {"content": secret.encode(), "alias": alias.encode(), **needles(vector, gone.id)}
    roots = [data, *adapter.roots(data)]

    def left() -> dict[str, list[Path]]:
        found = {what: [p for r in roots for p in files_containing(r, b)] for what, b in patterns.items()}
        return {what: sorted(set(paths)) for what, paths in found.items() if paths}

    assert {"content", "alias", "id hex"} <= set(left())

    receipt = eng.erase(gone.id, confirm=gone.id, reason="contract")

    assert list(receipt.erased) == [gone.id]
    assert receipt.per_store == {adapter.name: 1, "lancedb": 1, "tantivy": 1}
    assert left() == {}
    assert [h.memory.id for h in eng.recall("Dee", ["user:dee"])] == [keep.id]
    assert eng.verify().ok


def test_same_as_proposals_are_canonical_survive_a_reopen_and_go_with_the_memory_that_raised_them(
    adapter: CanonicalAdapter, open_engine: OpenEngine, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    data = tmp_path / "data"
    eng = open_engine(data)
    surname = canary("Zq").capitalize()
    known = eng.write(f"I had lunch with John {surname} at the harbour.", ["user:dee"])
    gone = eng.write_many(
        [WriteItem(f"Jon {surname} sent the contract.", ["user:dee"], entities=[EntityIn(f"Jon {surname}")])]
    )[0]
    [pid] = gone.proposals
    [proposal] = eng.entity_proposals()
    assert (proposal.id, proposal.a, proposal.b, proposal.memory_id) == (
        pid,
        f"Jon {surname}",
        f"John {surname}",
        gone.id,
    )
    assert eng.decide_proposal(pid[:12], "accept").status == "accepted"
    eng.close()

    # Canonical: a new process rebuilds its lexicon from the store, accepted merge included.
    eng = open_engine(data)
    assert [p.status for p in eng.entity_proposals("all")] == ["accepted"]
    lunch = eng.recall(f"Where did I have lunch with Jon {surname}?", ["user:dee"])
    assert "graph" in next(h.lanes for h in lunch if h.memory.id == known.id)

    vector = np.asarray(embedder.embed([f"Jon {surname} sent the contract."])[0])
    patterns = {"new name": f"Jon {surname}".encode(), **needles(vector, gone.id)}
    roots = [data, *adapter.roots(data)]

    def left() -> dict[str, list[Path]]:
        found = {what: [p for r in roots for p in files_containing(r, b)] for what, b in patterns.items()}
        return {what: sorted(set(paths)) for what, paths in found.items() if paths}

    assert {"new name", "id hex"} <= set(left())
    eng.erase(gone.id, confirm=gone.id, reason="contract")
    assert eng.entity_proposals("all") == []
    assert left() == {}
    lunch = eng.recall(f"Where did I have lunch with John {surname}?", ["user:dee"])
    assert [h.memory.id for h in lunch] == [known.id]
    assert eng.verify().ok


def test_a_statement_made_again_and_again_is_compared_with_its_newest_tellings(
    open_engine: OpenEngine, tmp_path: Path
) -> None:
    """The same statement told many times (a team's agents, a long-running scope) must not make each further
    write slower and its receipt longer: it is compared with its SAME_STATEMENT_LIMIT newest tellings."""
    from storage.enrich.reconcile import SAME_STATEMENT_LIMIT

    engine = open_engine(tmp_path / "data")
    told = [
        engine.write(f"Ana likes green tea (note {n}).", ["user:sam"]).id
        for n in range(SAME_STATEMENT_LIMIT + 8)
    ]
    again = engine.write("Ana likes green tea, still.", ["user:sam"])
    assert sorted(again.duplicates) == sorted(told[-SAME_STATEMENT_LIMIT:])
    hates = engine.write("Ana hates green tea.", ["user:sam"])
    newest = [*told, again.id][-SAME_STATEMENT_LIMIT:]
    assert sorted(hates.contradicts) == sorted(newest)


def test_proposals_page_in_order_and_stop_at_the_pending_cap_of_a_scope(
    open_engine: OpenEngine, tmp_path: Path
) -> None:
    """attack9 F4 on each adapter: ``same_as`` pages by (created_at, id) from a cursor, and ``pending_same_count``
    counts a scope's pending proposals, so a scope at the cap stores its writes and raises no more proposals."""
    eng = open_engine(tmp_path / "data")
    eng.pending_cap = 3  # the store's count is what is under contract here, not the default's size
    surnames = ["Kowalczyk", "Abernathy", "Okonkwo", "Lindqvist", "Marchetti"]
    eng.write_many([WriteItem("Roster.", ["team:a"], entities=[EntityIn(f"John {s}") for s in surnames])])
    probe = eng.write_many(
        [WriteItem("Calls.", ["team:a"], entities=[EntityIn(f"Jon {s}") for s in surnames])]
    )[0]
    assert len(probe.proposals) == 3
    assert len(probe.not_proposed) == 2
    assert set(probe.not_proposed) < {f"Jon {s} ~ John {s}" for s in surnames}
    assert {f"Jon {s}" for s in surnames} <= set(eng.read(probe.id).memory.entities)  # stored as written
    # Another scope has its own cap.
    eng.write("I met John Abbotsford.", ["team:b"])
    other = eng.write("Jon Abbotsford called.", ["team:b"])
    assert len(other.proposals) == 1

    listed = eng.entity_proposals("all")
    pages, cursor = [], None
    while True:
        page = eng.entity_proposal_page("pending", limit=1, cursor=cursor)
        pages.append([p.id for p in page.items])
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert pages == [[p.id] for p in listed]
    assert [p.id for p in eng.entity_proposal_page("pending", limit=200).items] == [p.id for p in listed]

    # A decision makes room: the held-back pair is proposed the next time it is written.
    rejected = eng.decide_proposal(probe.proposals[0], "reject")
    assert rejected.status == "rejected"
    held = probe.not_proposed[0].split(" ~ ")[0]
    again = eng.write(f"{held} wrote back.", ["team:a"])
    assert (len(again.proposals), again.not_proposed) == (1, ())
    assert eng.verify().ok


def test_export_then_import_keeps_contradictions_model_passes_and_proposals(
    open_engine: OpenEngine, tmp_path: Path
) -> None:
    """What memory_read shows (contradictions, the model pass's outcome, relations and their validity) and the
    entity proposals come back from an export imported into a fresh store of the same adapter."""

    class Model:
        model = "sampling"

        def extract(self, content: str, *, written_at: datetime, speaker: str | None) -> LlmResult:
            return LlmResult((LlmStatement("Ana", "works_at", "Acme", "asserted"),), Usage(), "m1", 1)

    eng = open_engine(tmp_path / "data")
    ids = [
        eng.write(text, ["user:sam"]).id
        for text in (
            "I love coffee.",
            "I hate coffee.",
            "Ana lives in Lisbon.",
            "Ana moved to Porto in March 2023.",
            "I had lunch with John Smith at the harbour.",
            "Yesterday Jon Smith sent the signed contract.",
        )
    ]
    bea = eng.write(
        "Beatriz Costa leads design.", ["user:sam"], entities=[EntityIn("Beatriz Costa", "person", ("Bea",))]
    ).id
    eng.write("Beatriz Costa prefers tea.", ["user:sam"], entities=[EntityIn("Beatriz Costa", "person")])
    eng.use_sampling()
    ids.append(eng.write("Big news from Ana: she signed with Acme.", ["user:sam"], extractor=Model()).id)
    assert eng.sampler is not None
    assert eng.sampler.wait_idle(30)
    buf = io.StringIO()
    summary = eng.export(buf)
    assert (summary.contradictions, summary.enrichments, summary.proposals) == (1, 1, 1)
    copy = open_engine(tmp_path / "copy")
    restored = copy.merge_export(io.StringIO(buf.getvalue()))
    assert (restored.contradictions, restored.enrichments, restored.proposals) == (1, 1, 1)
    assert [copy.read(i) for i in ids] == [eng.read(i) for i in ids]
    with eng.graph.read() as a, copy.graph.read() as b:
        assert copy.graph.same_as(b) == eng.graph.same_as(a)
        assert sorted(copy.graph.export_relations(b)) == sorted(eng.graph.export_relations(a))
    assert copy.verify().ok
    # Each mention kept what its memory gave: erasing the one that said "Bea" takes the alias back there too.
    copy.erase(bea, confirm=bea)
    with copy.graph.read() as b:
        assert next(al for _i, n, _t, al in copy.graph.export_entities(b) if n == "Beatriz Costa") == []


def test_amend_reconciles_against_other_memories_as_a_write_does(
    open_engine: OpenEngine, tmp_path: Path
) -> None:
    eng = open_engine(tmp_path / "data")
    acme = eng.write("Ana works at Acme.", ["user:sam"])
    note = eng.write("Ana likes tea.", ["user:sam"])
    new = eng.amend(note.id, "Ana now works at Globex.")
    assert new.also_supersedes == (acme.id,)
    assert eng.read(acme.id).memory.superseded_by == new.id
    assert {note.id, new.id} <= {m.id for m in eng.read(note.id).versions}
    bo = eng.write("Bo works at Initech.", ["user:sam"])
    ended = eng.amend(bo.id, "Bo no longer works at Initech.")
    assert eng.read(ended.id).relations == ()
    assert eng.read(bo.id).relations[0].endswith(f"ended by {ended.id}]")
    assert eng.verify().ok


def test_a_new_value_written_supersedes_the_memory_that_held_the_old_one(
    open_engine: OpenEngine, tmp_path: Path
) -> None:
    # On FalkorDB the relation was closed but its memory stayed current: the check for a relation still open
    # read the committed state, without this transaction's close.
    eng = open_engine(tmp_path / "data")
    acme = eng.write("Ana works at Acme.", ["user:sam"])
    globex = eng.write("Ana now works at Globex.", ["user:sam"])
    assert globex.supersedes == (acme.id,)
    assert eng.read(acme.id).memory.superseded_by == globex.id
    assert acme.id not in [h.memory.id for h in eng.recall("where does Ana work", ["user:sam"])]


def test_another_scopes_relations_never_take_a_readers_place_in_the_graph_walk(
    open_engine: OpenEngine, tmp_path: Path
) -> None:
    """Bo records 70 relations about Lisbon in his own scope, newer than Ana's: her two-hop path through Lisbon
    stays (the walk's window of an entity's newest relations is chosen among those her scopes hold). A memory
    linked into her scope brings its relations along, and unlinked takes them away."""
    eng = open_engine(tmp_path / "data")
    eng.write(
        "Hotel Aria is in Lisbon.", ["user:ana"], relations=[RelationIn("Hotel Aria", "located_in", "Lisbon")]
    )
    capital = eng.write(
        "Lisbon is the capital of Portugal.",
        ["user:cy"],
        relations=[RelationIn("Lisbon", "capital_of", "Portugal")],
    )
    # More than the lane keeps of an entity over every scope (64): Ana's window is then read from the store.
    eng.write_many(
        [
            WriteItem(
                f"Lisbon hosts summit number {i}.",
                ["user:bo"],
                relations=[RelationIn("Lisbon", "hosts", f"Summit {i}")],
            )
            for i in range(70)
        ]
    )
    path = "Hotel Aria —located_in→ Lisbon —capital_of→ Portugal"

    def paths() -> set[str]:
        return {
            p
            for h in eng.recall("Which country is Hotel Aria in?", ["user:ana"], recipe="graph")
            for p in h.paths
        }

    assert path not in paths()  # Cy's relation is not Ana's to follow
    eng.link(capital.id, "user:ana")
    assert path in paths()
    bo = eng.recall("What happens in Lisbon?", ["user:bo"], recipe="graph")  # Bo's walk is kept too
    assert any("Summit" in p for h in bo for p in h.paths)
    assert not any("Summit" in p for p in paths())
    eng.unlink(capital.id, "user:ana")
    assert path not in paths()
    assert eng.verify().ok


def test_recall_names_the_current_memories_a_result_conflicts_with(
    open_engine: OpenEngine, tmp_path: Path
) -> None:
    """Issue 15 on each adapter (``contradictions_of``): both sides of a contradiction name each other in
    recall; a memory with no link names none; a retired side is named no more."""
    engine = open_engine(tmp_path / "data")
    yes = engine.write("Ana is allergic to peanuts", ["user:ana"], kind="fact")
    no = engine.write("Ana is not allergic to peanuts", ["user:ana"], kind="fact")
    other = engine.write("Ana lives in Porto", ["user:ana"], kind="fact")
    got = {h.memory.id: h.conflicts for h in engine.recall("Ana peanuts Porto", ["user:ana"])}
    assert got == {yes.id: (no.id,), no.id: (yes.id,), other.id: ()}
    engine.retire(yes.id)
    after = {h.memory.id: h.conflicts for h in engine.recall("Ana peanuts", ["user:ana"])}
    assert yes.id not in after
    assert after[no.id] == ()


def test_a_paraphrase_in_the_same_scope_is_named_and_folds_on_request(
    open_engine: OpenEngine, tmp_path: Path
) -> None:
    """Issue 15 on each adapter (``current_texts``): a near-duplicate is named in the receipt, and folds when
    asked; a retired one is no candidate."""
    engine = open_engine(tmp_path / "data")
    first = engine.write("I'm allergic to peanuts", ["user:ana"], kind="fact")
    folded = engine.write("I have a peanut allergy", ["user:ana"], kind="fact", on_near_duplicate="fold")
    assert (folded.status, folded.id, folded.near_duplicates[0][0]) == ("folded", first.id, first.id)
    engine.retire(first.id)
    engine.reconciler.wait_fresh()
    again = engine.write("I have a peanut allergy", ["user:ana"], kind="fact", on_near_duplicate="report")
    assert (again.status, again.near_duplicates) == ("added", ())


def test_erasing_the_memory_that_ended_a_relation_reopens_it_and_leaves_the_rest(
    open_engine: OpenEngine, tmp_path: Path
) -> None:
    """The erased memory ended a relation another memory recorded (that memory stays current: it still holds an
    open relation) and gave an alias to an entity others mention: after the erase the relation is open again,
    the alias is gone, its own entity is gone, and the other memory reads and recalls as before."""
    eng = open_engine(tmp_path / "data")
    before = eng.write(
        "Dara works at Acme and lives in Porto.", ["user:sam"], entities=[EntityIn("Dara", "person", ("D.",))]
    )
    gone = eng.write(
        "Dara now works at Globex.", ["user:sam"], entities=[EntityIn("Dara", "person", ("Dee",))]
    )
    assert any(line.endswith(f"ended by {gone.id}]") for line in eng.read(before.id).relations)
    bystander = eng.write("Ines lives in Lyon.", ["user:sam"])
    kept_lines = eng.read(bystander.id).relations

    receipt = eng.erase(gone.id, confirm=gone.id)

    assert (receipt.erased, receipt.entities_deleted) == ((gone.id,), 1)  # Globex, named by it alone
    assert sorted(eng.read(before.id).relations) == [
        "Dara —lives_in→ Porto [? → open]",
        "Dara —works_at→ Acme [? → open]",
    ]
    assert eng.read(before.id).memory.status.value == "current"
    assert eng.read(bystander.id).relations == kept_lines
    assert [h.memory.id for h in eng.recall("where does Dara work", ["user:sam"])][:1] == [before.id]
    with eng.graph.read() as conn:
        entities = {name: aliases for _id, name, _t, aliases in eng.graph.export_entities(conn)}
    assert "Globex" not in entities
    assert entities["Dara"] == ["D."]
    assert eng.verify().ok


def _employers(
    eng: EngineCore, *, as_of: datetime | None = None, known_at: datetime | None = None
) -> list[str]:
    """Ana's employers that recall in ``user:ana`` answers, sorted."""
    hits = eng.recall("where does Ana work", ["user:ana"], as_of=as_of, known_at=known_at)
    return sorted(h.memory.content for h in hits if "works at" in h.memory.content)


def test_a_planned_change_is_current_from_its_date_on_every_canonical_store(
    open_engine: OpenEngine, tmp_path: Path
) -> None:
    """Issue #14 over each canonical store: a new employer valid from a later date leaves the current one
    current until then (reads in a shared store's transaction see only committed state, so each rule is
    checked there too); news of now replaces both; retiring a plan reopens what it was to end."""
    eng = open_engine(tmp_path / "data")
    ana = ["user:ana"]
    starts = datetime.now(UTC).replace(microsecond=0) + timedelta(days=400)
    later = starts + timedelta(days=30)

    def employers(as_of: datetime | None = None) -> list[str]:
        return _employers(eng, as_of=as_of)

    acme = eng.write("Ana works at Acme.", ana, kind="fact").id
    plan = eng.write("Ana works at Initech.", ana, kind="fact", valid_from=starts)
    assert (plan.supersedes, plan.supersedes_later) == ((), (acme,))
    assert employers() == ["Ana works at Acme."]
    assert employers(as_of=later) == ["Ana works at Initech."]
    assert eng.read(acme).memory.valid_to == starts
    assert eng.verify().ok

    eng.retire(plan.id, reason="the offer fell through")
    assert employers(as_of=later) == ["Ana works at Acme."]
    assert eng.read(acme).memory.valid_to is None

    plan = eng.write("Ana works at Hooli.", ana, kind="fact", valid_from=starts)
    assert plan.supersedes_later == (acme,)
    globex = eng.write("Ana works at Globex.", ana, kind="fact")
    assert sorted(globex.supersedes) == sorted([acme, plan.id])
    assert employers() == ["Ana works at Globex."]
    assert employers(as_of=later) == ["Ana works at Globex."]
    assert eng.verify().ok


def test_two_plans_for_one_value_on_every_canonical_store(open_engine: OpenEngine, tmp_path: Path) -> None:
    """Two planned changes of one employer on each canonical store: one told later but starting sooner ends
    the current value at its own date; the sooner one cancelled or erased, the later one ends the value (a
    shared store's reads in a transaction do not see its writes, so the cancel reads what the plan left)."""
    eng = open_engine(tmp_path / "data")
    ana = ["user:ana"]
    now = datetime.now(UTC).replace(microsecond=0)

    def employers(days: int) -> list[str]:
        return _employers(eng, as_of=now + timedelta(days=days))

    acme = eng.write("Ana works at Acme.", ana, kind="fact").id
    eng.write("Ana works at Initech.", ana, kind="fact", valid_from=now + timedelta(days=400))
    globex = eng.write("Ana works at Globex.", ana, kind="fact", valid_from=now + timedelta(days=300))
    assert globex.supersedes_later == (acme,)
    assert employers(350) == ["Ana works at Globex."]
    eng.retire(globex.id, reason="the Globex offer fell through")
    assert employers(350) == ["Ana works at Acme."]
    assert employers(450) == ["Ana works at Initech."]
    assert eng.read(acme).memory.valid_to == now + timedelta(days=400)
    hooli = eng.write("Ana works at Hooli.", ana, kind="fact", valid_from=now + timedelta(days=200))
    assert employers(250) == ["Ana works at Hooli."]
    eng.erase(hooli.id, confirm=hooli.id)
    assert employers(250) == ["Ana works at Acme."]
    assert employers(450) == ["Ana works at Initech."]
    assert eng.verify().ok


def test_a_plan_purged_with_its_scope_ends_nothing_on_every_canonical_store(
    open_engine: OpenEngine, tmp_path: Path
) -> None:
    """A plan in project:hr only ends the Acme shared by user:ana and project:hr; purging project:hr deletes
    the plan, so user:ana's Acme holds past the plan's date again (as after erase)."""
    eng = open_engine(tmp_path / "data")
    now = datetime.now(UTC).replace(microsecond=0)
    acme = eng.write("Ana works at Acme.", ["user:ana", "project:hr"], kind="fact").id
    plan = eng.write(
        "Ana works at Initech.", ["project:hr"], kind="fact", valid_from=now + timedelta(days=400)
    )
    assert plan.supersedes_later == (acme,)
    eng.purge("project:hr", confirm="project:hr")
    hits = eng.recall("where does Ana work", ["user:ana"], as_of=now + timedelta(days=450))
    assert [h.memory.content for h in hits if "works at" in h.memory.content] == ["Ana works at Acme."]
    assert eng.read(acme).memory.valid_to is None
    assert eng.verify().ok


def test_a_plan_written_again_with_another_date_moves_on_every_canonical_store(
    open_engine: OpenEngine, tmp_path: Path
) -> None:
    """The same words as a plan with another valid_from move the plan, earlier then later, on each canonical
    store (a shared store's reads in the transaction still show the end the moved plan gave Acme: the new
    end must be written all the same)."""
    eng = open_engine(tmp_path / "data")
    ana = ["user:ana"]
    now = datetime.now(UTC).replace(microsecond=0)

    def employers(days: int) -> list[str]:
        return _employers(eng, as_of=now + timedelta(days=days))

    acme = eng.write("Ana works at Acme.", ana, kind="fact").id
    june = eng.write("Ana works at Initech.", ana, kind="fact", valid_from=now + timedelta(days=300))
    later = eng.write("Ana works at Initech.", ana, kind="fact", valid_from=now + timedelta(days=400))
    assert (later.status, later.supersedes, later.supersedes_later) == ("added", (june.id,), (acme,))
    assert employers(350) == ["Ana works at Acme."]
    assert employers(450) == ["Ana works at Initech."]
    assert eng.read(acme).memory.valid_to == now + timedelta(days=400)
    sooner = eng.write("Ana works at Initech.", ana, kind="fact", valid_from=now + timedelta(days=200))
    assert (sooner.status, sooner.supersedes, sooner.supersedes_later) == ("added", (later.id,), (acme,))
    assert employers(250) == ["Ana works at Initech."]
    assert eng.read(acme).memory.valid_to == now + timedelta(days=200)
    assert eng.read(june.id).memory.superseded_by == later.id
    assert eng.verify().ok


def test_what_was_known_while_a_plan_stood_on_every_canonical_store(
    open_engine: OpenEngine, tmp_path: Path
) -> None:
    """known_at between a plan and its cancellation, as_of after its date: the plan alone, on each canonical
    store; known now: the old value alone. The end the plan gave Acme is kept apart from Acme's validity,
    which the cancellation reopened."""
    eng = open_engine(tmp_path / "data")
    ana = ["user:ana"]
    starts = datetime.now(UTC).replace(microsecond=0) + timedelta(days=400)
    later = starts + timedelta(days=30)

    def employers(as_of: datetime | None = None, known_at: datetime | None = None) -> list[str]:
        return _employers(eng, as_of=as_of, known_at=known_at)

    eng.write("Ana works at Acme.", ana, kind="fact")
    plan = eng.write("Ana works at Initech.", ana, kind="fact", valid_from=starts)
    eng.retire(plan.id, reason="the offer fell through")
    stored = eng.read(plan.id).memory
    assert stored.retired_at is not None
    between = stored.recorded_at + (stored.retired_at - stored.recorded_at) / 2
    assert employers(as_of=later, known_at=between) == ["Ana works at Initech."]
    assert employers(as_of=later, known_at=datetime.now(UTC)) == ["Ana works at Acme."]
    assert employers(as_of=later) == ["Ana works at Acme."]


def test_a_plan_ending_a_value_the_mover_may_not_write_stays_put_on_every_canonical_store(
    open_engine: OpenEngine, tmp_path: Path
) -> None:
    """A writer of project:b alone moves a plan of project:b that ends an Acme kept in project:a too: refused
    before anything changes, on each canonical store (a shared store applies an intent's writes at the commit,
    so the check reads only what was there before). Then the plan and the value erased: no end a plan gave is
    left naming either (attack22a)."""
    eng = open_engine(tmp_path / "data")
    a, b = "project:a", "project:b"
    mover = Principal("b-writer", client="tests", grants=(Grant.parse(f"{b}=w"),))
    now = datetime.now(UTC).replace(microsecond=0)
    acme = eng.write("Ana works at Acme.", [a, b], kind="fact").id
    plan = eng.write("Ana works at Initech.", [b], kind="fact", valid_from=now + timedelta(days=300))
    with pytest.raises(ScopeDenied):
        eng.write(
            "Ana works at Initech.", [b], kind="fact", valid_from=now + timedelta(days=200), principal=mover
        )
    assert eng.read(acme).memory.valid_to == now + timedelta(days=300)
    assert eng.read(plan.id).memory.superseded_by is None
    moved = eng.write("Ana works at Initech.", [b], kind="fact", valid_from=now + timedelta(days=200))
    assert moved.supersedes == (plan.id,)
    with eng.graph.read() as conn:
        assert {(m, by) for m, by, _ in eng.graph.export_planned_ends(conn)} == {
            (acme, plan.id),
            (acme, moved.id),
        }
    eng.erase(moved.id, confirm=moved.id)
    with eng.graph.read() as conn:
        assert eng.graph.export_planned_ends(conn) == []
    assert eng.read(acme).memory.valid_to is None
    assert eng.verify().ok


def test_a_plan_with_an_end_keeps_it_when_moved_on_every_canonical_store(
    open_engine: OpenEngine, tmp_path: Path
) -> None:
    """Initech from day 300 to day 350, moved to day 200 with no end given: it still ends on day 350, on each
    canonical store; moved past that end with none, refused and nothing changed (attack22a)."""
    eng = open_engine(tmp_path / "data")
    ana = ["user:ana"]
    now = datetime.now(UTC).replace(microsecond=0)
    acme = eng.write("Ana works at Acme.", ana, kind="fact").id
    plan = eng.write(
        "Ana works at Initech.",
        ana,
        kind="fact",
        valid_from=now + timedelta(days=300),
        valid_to=now + timedelta(days=350),
    )
    with pytest.raises(InvalidInput):
        eng.write("Ana works at Initech.", ana, kind="fact", valid_from=now + timedelta(days=360))
    assert eng.read(plan.id).memory.superseded_by is None
    assert eng.read(acme).memory.valid_to == now + timedelta(days=300)
    moved = eng.write("Ana works at Initech.", ana, kind="fact", valid_from=now + timedelta(days=200))
    assert moved.supersedes == (plan.id,)
    assert eng.read(moved.id).memory.valid_to == now + timedelta(days=350)
    assert eng.read(acme).memory.valid_to == now + timedelta(days=200)
    assert eng.verify().ok


def test_erasing_a_moved_plan_and_its_value_leaves_no_id_or_words_on_every_canonical_store(
    adapter: CanonicalAdapter, open_engine: OpenEngine, tmp_path: Path
) -> None:
    """A value, a plan for it moved twice (each move kept a PlannedEnd record naming the value and the plan),
    then the plan erased, then the value: no id of any of them, nor their words, is left in any file of the
    data directory or the graph server's (attack22a)."""
    data = tmp_path / "data"
    eng = open_engine(data)
    ana = ["user:ana"]
    now = datetime.now(UTC).replace(microsecond=0)
    plan_words, value_words = canary("PLAN"), canary("VALUE")
    eng.write("Dee waters the ferns on Fridays.", ["user:dee"])
    acme = eng.write(f"Ana works at Acme ({value_words}).", ana, kind="fact").id
    plans = [
        eng.write(
            f"Ana works at Initech ({plan_words}).", ana, kind="fact", valid_from=now + timedelta(days=n)
        ).id
        for n in (300, 400, 200)
    ]
    patterns = {"plan words": plan_words.encode(), "value words": value_words.encode()}
    patterns |= {f"id {i}": m.encode() for i, m in enumerate([acme, *plans])}
    roots = [data, *adapter.roots(data)]

    def left() -> set[str]:
        return {what for what, b in patterns.items() if any(files_containing(r, b) for r in roots)}

    assert left() == set(patterns)
    eng.erase(plans[1], confirm=plans[1])
    assert left() == {"value words", "id 0"}
    assert eng.read(acme).memory.valid_to is None
    eng.erase(acme, confirm=acme)
    assert left() == set()
    assert eng.verify().ok
