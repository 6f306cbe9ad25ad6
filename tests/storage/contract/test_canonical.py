"""The canonical store's contract (``storage.ports.canonical.CanonicalStore``), for every adapter in conftest."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from storage import CachedEmbedder, EntityIn
from storage.domain.records import Change
from storage.ports.canonical import CanonicalStore
from tests.conftest import files_containing
from tests.storage.contract._records import T0, canary, needles, new_memory
from tests.storage.contract.conftest import CanonicalAdapter


def _insert(store: CanonicalStore, embedder: CachedEmbedder, content: str, scopes: list[str], seq: int,
            entities: tuple[EntityIn, ...] = (), supersedes: str | None = None) -> str:  # fmt: skip
    m = new_memory(embedder, content, supersedes=supersedes)
    with store.transaction() as tx:
        store.ensure_scopes(tx, scopes, T0)
        store.insert_memory(tx, m, scopes, entities)
        store.link(tx, m.id, scopes, T0)
        if entities:
            store.mention(tx, m.id, entities)
        store.append_changes(tx, [Change(seq, "add", m.id)], T0)
    return m.id


def test_a_committed_write_reads_back_whole(canonical: CanonicalStore, embedder: CachedEmbedder) -> None:
    mid = _insert(canonical, embedder, "Ana lives in Lisbon.", ["user:ana", "team:t"], 1, (EntityIn("Ana"),))
    with canonical.read() as s:
        m = canonical.fetch(s, [mid, "0" * 32])
        assert list(m) == [mid]  # a missing id is absent, not an error
        got = m[mid]
        assert (got.content, got.scopes, got.entities) == (
            "Ana lives in Lisbon.",
            ("team:t", "user:ana"),
            ("Ana",),
        )
        assert (got.metadata, got.provenance.client, got.event_time) == ({"k": "v"}, "pytest", T0)
        assert canonical.all_ids(s) == {mid: True}
        assert canonical.memory_count(s) == 1
        assert canonical.ids_with_prefix(s, mid[:8]) == [mid]
        assert sorted(canonical.scopes_of(s, mid)) == ["team:t", "user:ana"]
        vector = canonical.vector_of(s, mid)
        assert vector is not None
        assert len(vector) == embedder.dim
        row = canonical.projection_rows(s, [mid])[mid]
        assert (row.content, row.live, row.scopes) == ("Ana lives in Lisbon.", True, ("team:t", "user:ana"))
        assert [e.name for e in canonical.known_entities(s)] == ["Ana"]


def test_a_failed_transaction_leaves_nothing(canonical: CanonicalStore, embedder: CachedEmbedder) -> None:
    m = new_memory(embedder, "This write fails halfway.")

    def write_then_fail() -> None:
        with canonical.transaction() as tx:
            canonical.ensure_scopes(tx, ["user:ana"], T0)
            canonical.insert_memory(tx, m, ["user:ana"], ())
            canonical.append_changes(tx, [Change(1, "add", m.id)], T0)
            raise RuntimeError("failed halfway")

    with pytest.raises(RuntimeError, match="halfway"):
        write_then_fail()
    with canonical.read() as s:
        assert canonical.all_ids(s) == {}
        assert canonical.max_seq(s) == 0
        assert canonical.scope_parents(s)[0] == []


def test_versions_supersede_and_retire(canonical: CanonicalStore, embedder: CachedEmbedder) -> None:
    old = _insert(canonical, embedder, "Ana lives in Porto.", ["user:ana"], 1)
    new = _insert(canonical, embedder, "Ana lives in Lisbon.", ["user:ana"], 2, supersedes=old)
    with canonical.transaction() as tx:
        canonical.supersede(tx, old, new, reason="moved", at=T0, close_valid_to=T0)
        canonical.append_changes(tx, [Change(3, "supersede", old)], T0)
    with canonical.read() as s:
        assert set(canonical.chain(s, new)) == {old, new}
        got = canonical.fetch(s, [old, new])
        assert got[old].superseded_by == new
        assert got[new].supersedes == old
        assert canonical.all_ids(s) == {old: False, new: True}
        assert canonical.memory_count(s) == 2  # current or not
        assert canonical.live_state(s, old) is False
    with canonical.transaction() as tx:
        canonical.retire(tx, new, at=T0, valid_to=T0, reason="no longer true")
    with canonical.read() as s:
        got = canonical.fetch(s, [new])[new]
        assert (got.retired_at, got.retire_reason) == (T0, "no longer true")
        assert canonical.live_state(s, new) is False


def test_end_validity_closes_only_the_validity(canonical: CanonicalStore, embedder: CachedEmbedder) -> None:
    """A planned change's predecessor: its validity ends later, and it stays current (not superseded, not
    retired, live for every view); an earlier end stays, and no end goes before the start."""
    mid = _insert(canonical, embedder, "Ana works at Acme.", ["user:ana"], 1)
    later, sooner = T0 + timedelta(days=400), T0 + timedelta(days=100)
    with canonical.transaction() as tx:
        canonical.end_validity(tx, mid, valid_to=later)
        canonical.append_changes(tx, [Change(2, "update", mid)], T0)
    with canonical.read() as s:
        got = canonical.fetch(s, [mid])[mid]
        assert (got.valid_from, got.valid_to) == (T0, later)
        assert (got.superseded_by, got.retired_at) == (None, None)
        assert canonical.live_state(s, mid) is True
        assert canonical.all_ids(s) == {mid: True}
    with canonical.transaction() as tx:
        canonical.end_validity(tx, mid, valid_to=sooner)
        canonical.end_validity(tx, mid, valid_to=later)  # an earlier end stays
    with canonical.read() as s:
        assert canonical.fetch(s, [mid])[mid].valid_to == sooner
    with canonical.transaction() as tx:
        canonical.end_validity(tx, mid, valid_to=T0 - timedelta(days=1))  # never before it began
    with canonical.read() as s:
        assert canonical.fetch(s, [mid])[mid].valid_to == T0


def test_a_plan_s_end_is_kept_apart_and_outlives_its_undoing(
    canonical: CanonicalStore, embedder: CachedEmbedder
) -> None:
    """``end_validity(by=plan)`` keeps the end per plan (the earliest), also once the plan's cancellation has
    reopened the memory (``reopen_ended_by``): ``known_at`` answers with it (issue #14). Deleting the plan, or
    the memory, deletes it."""
    acme = _insert(
        canonical, embedder, "Ana works at Acme.", ["user:ana"], 1, (EntityIn("Ana"), EntityIn("Acme"))
    )
    june = _insert(canonical, embedder, "Ana works at Initech.", ["user:ana"], 2,
                   (EntityIn("Ana"), EntityIn("Initech")))  # fmt: skip
    other = _insert(canonical, embedder, "Ana works at Hooli.", ["user:ana"], 3, (EntityIn("Ana"),))
    start, sooner = T0 + timedelta(days=400), T0 + timedelta(days=300)
    with canonical.transaction() as tx:
        canonical.relate(tx, acme, "Ana", "works_at", "Acme", T0)
        canonical.close_relation(tx, acme, "Ana", "works_at", "Acme", valid_to=start, ended_by=june)
        canonical.end_validity(tx, acme, valid_to=start, by=june)
        canonical.end_validity(tx, acme, valid_to=start + timedelta(days=9), by=june)  # the earliest stays
        canonical.end_validity(tx, acme, valid_to=sooner, by=other)
        canonical.end_validity(tx, other, valid_to=sooner)  # no plan: nothing kept apart
    with canonical.read() as s:
        assert canonical.planned_ends(s, [acme, other, june]) == {
            acme: sorted([(june, start), (other, sooner)])
        }
        assert canonical.export_planned_ends(s) == sorted([(acme, june, start), (acme, other, sooner)])
    with canonical.transaction() as tx:  # what an import restores: the record alone, never the validity
        canonical.keep_planned_end(tx, june, other, sooner)
    with canonical.read() as s:
        assert canonical.planned_ends(s, [june]) == {june: [(other, sooner)]}
        assert canonical.fetch(s, [june])[june].valid_to is None
    with canonical.transaction() as tx:
        assert canonical.reopen_ended_by(tx, june, at=start) == [acme]
    with canonical.read() as s:
        assert canonical.fetch(s, [acme])[acme].valid_to == sooner
        assert canonical.planned_ends(s, [acme])[acme] == sorted([(june, start), (other, sooner)])
    with canonical.transaction() as tx:
        canonical.delete_memories(tx, [other])
    with canonical.read() as s:
        assert canonical.planned_ends(s, [acme]) == {acme: [(june, start)]}
    with canonical.transaction() as tx:
        canonical.delete_memories(tx, [acme])
    with canonical.read() as s:
        assert canonical.planned_ends(s, [acme]) == {}


def test_scopes_form_a_tree_and_hold_memories(canonical: CanonicalStore, embedder: CachedEmbedder) -> None:
    mid = _insert(canonical, embedder, "The website launches in May.", ["project:web"], 1)
    with canonical.transaction() as tx:
        canonical.ensure_scopes(tx, ["team:web", "user:ana"], T0)
        canonical.set_parent(tx, "project:web", "team:web")
        canonical.link(tx, mid, ["user:ana"], T0)
    with canonical.read() as s:
        scopes, parents = canonical.scope_parents(s)
        assert sorted(scopes) == ["project:web", "team:web", "user:ana"]
        assert parents == {"project:web": "team:web"}
        assert canonical.list_scope(s, "user:ana", after=None, live_only=True, limit=10) == [mid]
        assert canonical.scope_counts(s).get("user:ana") == 1
    with canonical.transaction() as tx:
        canonical.unlink(tx, mid, "user:ana")
        canonical.set_parent(tx, "project:web", None)
    with canonical.read() as s:
        assert canonical.scopes_of(s, mid) == ["project:web"]
        assert canonical.list_scope(s, "user:ana", after=None, live_only=True, limit=10) == []
        assert canonical.scope_parents(s)[1] == {}


def test_the_change_log_is_ordered_and_prunable(canonical: CanonicalStore, embedder: CachedEmbedder) -> None:
    ids = [
        _insert(canonical, embedder, f"Note number {i} about the garden.", ["user:ana"], i) for i in (1, 2, 3)
    ]
    with canonical.read() as s:
        assert canonical.max_seq(s) == 3
        assert canonical.oldest_change(s) == 1
        assert [(c.seq, c.op, c.memory_id) for c in canonical.changes_since(s, 1)] == [
            (2, "add", ids[1]),
            (3, "add", ids[2]),
        ]
        assert [c.seq for c in canonical.changes_since(s, 0, limit=2)] == [1, 2]
    with canonical.transaction() as tx:
        canonical.prune_changes(tx, 2)
    with canonical.read() as s:
        assert canonical.oldest_change(s) == 3
        assert canonical.max_seq(s) == 3
        assert len(canonical.all_ids(s)) == 3  # pruning the log never touches memories


def test_everything_survives_a_reopen(
    adapter: CanonicalAdapter, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    store = adapter.open(tmp_path, embedder)
    mid = _insert(store, embedder, "Bo prefers tea.", ["user:bo"], 1, (EntityIn("Bo", aliases=("Bobby",)),))
    store.close()
    store = adapter.open(tmp_path, embedder)
    try:
        with store.read() as s:
            assert store.fetch(s, [mid])[mid].content == "Bo prefers tea."
            assert store.max_seq(s) == 1
            assert [(e.name, e.aliases) for e in store.known_entities(s)] == [("Bo", ("Bobby",))]
    finally:
        store.close()


def test_the_id_secret_is_made_once_kept_across_a_reopen_and_replaced_only_when_asked(
    adapter: CanonicalAdapter, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    store = adapter.open(tmp_path, embedder)
    try:
        with store.read() as s:
            made = store.id_secret(s)
        assert len(made) == 64
        assert int(made, 16) != 0
    finally:
        store.close()
    store = adapter.open(tmp_path, embedder)
    try:
        with store.read() as s:
            assert store.id_secret(s) == made
        with store.transaction() as tx:
            store.set_id_secret(tx, "ef" * 32)
        with store.read() as s:
            assert store.id_secret(s) == "ef" * 32
    finally:
        store.close()


def test_erased_rows_leave_no_bytes_after_the_rewrite(
    adapter: CanonicalAdapter, canonical: CanonicalStore, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    secret, alias = canary("SECRET"), canary("Zqalias")
    gone = _insert(canonical, embedder, f"The vault code is {secret}.", ["user:ana"], 1,
                   (EntityIn("Vaultkeeper", aliases=(alias,)),))  # fmt: skip
    kept = _insert(canonical, embedder, "The garden gate is green.", ["user:ana"], 2)
    with canonical.read() as s:
        vector = canonical.vector_of(s, gone)
    assert vector is not None
    patterns = {"content": secret.encode(), "alias": alias.encode(), **needles(vector, gone)}
    canonical.checkpoint()
    roots = adapter.roots(tmp_path)

    def left() -> dict[str, list[Path]]:
        found = {what: [p for r in roots for p in files_containing(r, b)] for what, b in patterns.items()}
        return {what: paths for what, paths in found.items() if paths}

    # The scan sees the row before. Its vector is not always there byte for byte: Kùzu bit-packs a column chunk
    # of INT16 (the half-precision numbers) when its values span less than 16 bits, so it is only checked to
    # be gone after (it goes with the row: the rewrite copies the rows that are left).
    assert {"content", "alias", "id hex"} <= set(left())

    with canonical.transaction() as tx:
        assert canonical.delete_memories(tx, [gone]) == 1  # "Vaultkeeper": no other memory mentions it
        canonical.prune_changes(tx, 1)
    canonical.rebuild()

    assert left() == {}
    with canonical.read() as s:
        assert list(canonical.all_ids(s)) == [kept]
        assert canonical.known_entities(s) == []


def test_reads_in_parallel_answer_as_reads_in_turn(
    canonical: CanonicalStore, embedder: CachedEmbedder
) -> None:
    """``read_each`` (the graph lane's independent mentions/relations queries of one walk stage) gives the
    answers one-by-one reads give, in the caller's order, with or without worker threads."""
    from concurrent.futures import ThreadPoolExecutor

    names = [f"Person{i}" for i in range(6)]
    for i, name in enumerate(names):
        for j in range(i + 1):
            _insert(canonical, embedder, f"{name} note {j}", ["user:ana"], 10 * i + j + 1, (EntityIn(name),))
    keys = [e.id for e in sorted(_known(canonical), key=lambda e: e.name)]

    def mentions(s: object, entity: str) -> list[str]:
        return canonical.mentioning(s, entity, scopes=["user:ana"], live_only=True, limit=100)

    with canonical.read() as s:
        in_turn = [mentions(s, e) for e in keys]
        assert [len(ids) for ids in in_turn] == [1, 2, 3, 4, 5, 6]
        assert canonical.read_each(s, mentions, keys) == in_turn
        with ThreadPoolExecutor(max_workers=2) as pool:
            assert canonical.read_each(s, mentions, keys, pool) == in_turn
            assert canonical.read_each(s, mentions, list(reversed(keys)), pool) == in_turn[::-1]


def _known(canonical: CanonicalStore) -> list:
    with canonical.read() as s:
        return list(canonical.known_entities(s))


def test_aliases_given_are_those_of_mentions_in_the_scopes_asked(
    canonical: CanonicalStore, embedder: CachedEmbedder
) -> None:
    """``aliases_given`` answers from the MENTIONS edges of memories in the given scopes only: an alias another
    team gave an entity must not resolve for a reader of this team's scopes (attack8 F1)."""
    _insert(canonical, embedder, "Nightjar launches in March.", ["team:secret"], 1,
            (EntityIn("Operation Nightjar", aliases=("ONJ7",)),))  # fmt: skip
    _insert(
        canonical, embedder, "Nightjar is on our list.", ["team:att"], 2, (EntityIn("Operation Nightjar"),)
    )
    _insert(canonical, embedder, "Nightjar, or OpN.", ["team:att", "team:b"], 3,
            (EntityIn("Operation Nightjar", aliases=("OpN",)),))  # fmt: skip
    key = next(e.id for e in _known(canonical) if e.name == "Operation Nightjar")
    with canonical.read() as s:
        assert canonical.aliases_given(s, key, scopes=["team:att"]) == {"OpN"}
        assert canonical.aliases_given(s, key, scopes=["team:secret", "team:b"]) == {"ONJ7", "OpN"}
        assert canonical.aliases_given(s, key, scopes=["team:none"]) == set()


def test_names_given_are_those_of_mentions_in_the_scopes_asked(
    canonical: CanonicalStore, embedder: CachedEmbedder
) -> None:
    """``names_given`` answers from the MENTIONS edges of memories in the given scopes only: the spelling another
    team stored for an entity is not one its reader was given."""
    _insert(
        canonical,
        embedder,
        "ZORBLAX CORPORATION is hiring.",
        ["team:a"],
        1,
        (EntityIn("ZORBLAX CORPORATION"),),
    )
    _insert(
        canonical, embedder, "We met zorblax corporation.", ["team:b"], 2, (EntityIn("zorblax corporation"),)
    )
    with canonical.read() as s:
        key = "zorblax corporation"
        assert canonical.names_given(s, key, scopes=["team:b"]) == {"zorblax corporation"}
        assert canonical.names_given(s, key, scopes=["team:a", "team:b"]) == {
            "ZORBLAX CORPORATION",
            "zorblax corporation",
        }
        assert canonical.names_given(s, key, scopes=["team:none"]) == set()


def test_a_relations_ends_are_named_as_its_memory_spelt_them(
    canonical: CanonicalStore, embedder: CachedEmbedder
) -> None:
    """``relations``, ``relation_history`` and ``open_relations`` name each end as the recording memory spelt it
    (kept on the edge), not by the entity's stored name, which may be another team's spelling."""
    _insert(
        canonical,
        embedder,
        "ZORBLAX CORPORATION is hiring.",
        ["team:a"],
        1,
        (EntityIn("ZORBLAX CORPORATION"),),
    )
    mid = _insert(canonical, embedder, "Bo works at zorblax corporation.", ["team:b"], 2,
                  (EntityIn("Bo"), EntityIn("zorblax corporation")))  # fmt: skip
    with canonical.transaction() as tx:
        canonical.relate(tx, mid, "Bo", "works_at", "zorblax corporation", T0)
    with canonical.read() as s:
        (out,) = canonical.relations(s, "bo", limit=5, scopes=["team:b"])
        (back,) = canonical.relations(s, "zorblax corporation", limit=5)
        (state,) = canonical.relation_history(s, [mid])
        (open_,) = canonical.open_relations(s, "Bo", ["works_at"])
    assert (out.own_name, out.other_name, out.outgoing) == ("Bo", "zorblax corporation", True)
    assert (back.own_name, back.other_name, back.outgoing) == ("zorblax corporation", "Bo", False)
    assert (state.subject, state.object) == ("Bo", "zorblax corporation")
    assert open_.object_name == "zorblax corporation"


def test_aliases_merge_into_an_existing_entity_write_after_write(
    canonical: CanonicalStore, embedder: CachedEmbedder
) -> None:
    """Memory after memory naming the same entities with new aliases: each write merges its aliases into the
    entity's, and the store keeps answering. On FalkorDB the merge's fold once shadowed the write's own
    ``UNWIND ... AS x`` and the server died with a segmentation fault after about sixty such writes."""
    for i in range(120):
        given = (f"A{i}",) if i % 3 == 0 else ()
        names = ("Globex", "Porto", f"Site {i % 7}")
        _insert(canonical, embedder, f"{', '.join(names)}: note {i}.", ["user:a"], 10 + i,
                tuple(EntityIn(n, aliases=given) for n in names))  # fmt: skip
    known = {e.name: e for e in _known(canonical)}
    every = {f"A{i}" for i in range(0, 120, 3)}
    assert set(known["Globex"].aliases) == set(known["Porto"].aliases) == every
    assert set(known["Site 0"].aliases) == {f"A{i}" for i in range(0, 120, 21)}
    with canonical.read() as s:
        assert canonical.aliases_given(s, known["Globex"].id, scopes=["user:a"]) == every


def test_open_relations_keeps_the_newest_tellings_and_leaves_out_an_object(
    canonical: CanonicalStore, embedder: CachedEmbedder
) -> None:
    """Reconciliation compares a statement with its most recent tellings only (``newest``, cut before the
    recording memories are read) and asks a one-value predicate for the *other* values (``other_than``): the
    cost of a write stays flat however often the same thing was said."""
    from datetime import timedelta

    ents = (EntityIn("Ana"), EntityIn("Coffee"), EntityIn("Tea"))
    ids = []
    for n in range(6):
        mid = _insert(canonical, embedder, f"Ana likes coffee ({n}).", ["user:ana"], n + 1, ents)
        with canonical.transaction() as tx:
            canonical.relate(tx, mid, "Ana", "likes", "Coffee", T0 + timedelta(minutes=n))
        ids.append(mid)
    tea = _insert(canonical, embedder, "Ana likes tea.", ["user:ana"], 7, ents)
    with canonical.transaction() as tx:
        canonical.relate(tx, tea, "Ana", "likes", "Tea", T0 + timedelta(minutes=9))
    with canonical.read() as s:
        every = canonical.open_relations(s, "Ana", ["likes"], "Coffee")
        assert [r.memory_id for r in every] == ids  # oldest first
        newest = canonical.open_relations(s, "Ana", ["likes"], "Coffee", newest=3)
        assert [r.memory_id for r in newest] == ids[3:]  # the three most recent, still oldest first
        others = canonical.open_relations(s, "Ana", ["likes"], other_than="Coffee")
        assert [(r.object_name, r.memory_id) for r in others] == [("Tea", tea)]
        assert len(canonical.open_relations(s, "Ana", ["likes"])) == 7


def test_a_relation_ended_at_a_later_date_is_open_until_then(
    canonical: CanonicalStore, embedder: CachedEmbedder
) -> None:
    """A planned change ends the relation it replaces at a later date: ``open_relations(at=...)`` still returns
    it before that date, and ``close_relation`` may end it sooner (news that it ended now), never later."""
    ents = (EntityIn("Ana"), EntityIn("Acme"))
    acme = _insert(canonical, embedder, "Ana works at Acme.", ["user:ana"], 1, ents)
    later = T0 + timedelta(days=400)
    with canonical.transaction() as tx:
        canonical.relate(tx, acme, "Ana", "works_at", "Acme", T0)
        canonical.close_relation(tx, acme, "Ana", "works_at", "Acme", valid_to=later, ended_by="plan")
    with canonical.read() as s:
        assert canonical.open_relations(s, "Ana", ["works_at"]) == []  # not open for ever
        (still,) = canonical.open_relations(s, "Ana", ["works_at"], at=T0)
        assert still.memory_id == acme
        (mine,) = canonical.open_relations(s, "Ana", ["works_at"], "Acme", newest=2, at=T0)
        assert mine.memory_id == acme
        assert canonical.open_relations(s, "Ana", ["works_at"], at=later) == []
    with canonical.transaction() as tx:  # a later end does not move it
        canonical.close_relation(tx, acme, "Ana", "works_at", "Acme", valid_to=later + timedelta(days=1),
                                 ended_by="other")  # fmt: skip
    with canonical.read() as s:
        (state,) = canonical.relation_history(s, [acme])
        assert (state.valid_to, state.ended_by) == (later, "plan")
    with canonical.transaction() as tx:  # a sooner one does
        canonical.close_relation(tx, acme, "Ana", "works_at", "Acme", valid_to=T0 + timedelta(days=1),
                                 ended_by="news")  # fmt: skip
    with canonical.read() as s:
        (state,) = canonical.relation_history(s, [acme])
        assert (state.valid_to, state.ended_by) == (T0 + timedelta(days=1), "news")


def test_a_cancelled_plan_reopens_what_it_ended(canonical: CanonicalStore, embedder: CachedEmbedder) -> None:
    """``reopen_ended_by``: the relations a plan ended at its start are open again, and the memories that
    recorded them valid with no end; another end (another date, another closer) is left alone."""
    start = T0 + timedelta(days=400)
    acme = _insert(
        canonical, embedder, "Ana works at Acme.", ["user:ana"], 1, (EntityIn("Ana"), EntityIn("Acme"))
    )
    plan = _insert(canonical, embedder, "Ana works at Initech.", ["user:ana"], 2,
                   (EntityIn("Ana"), EntityIn("Initech")))  # fmt: skip
    bob = _insert(
        canonical, embedder, "Bob works at Acme.", ["user:ana"], 3, (EntityIn("Bob"), EntityIn("Acme"))
    )
    with canonical.transaction() as tx:
        canonical.relate(tx, acme, "Ana", "works_at", "Acme", T0)
        canonical.relate(tx, plan, "Ana", "works_at", "Initech", T0)
        canonical.relate(tx, bob, "Bob", "works_at", "Acme", T0)
        canonical.close_relation(tx, acme, "Ana", "works_at", "Acme", valid_to=start, ended_by=plan)
        canonical.end_validity(tx, acme, valid_to=start)
        canonical.close_relation(tx, bob, "Bob", "works_at", "Acme", valid_to=start, ended_by="someone else")
        canonical.end_validity(tx, bob, valid_to=start)
    with canonical.transaction() as tx:
        assert canonical.reopen_ended_by(tx, plan, at=start + timedelta(days=1)) == []  # another date
    with canonical.transaction() as tx:
        assert canonical.reopen_ended_by(tx, plan, at=start) == [acme]
    with canonical.read() as s:
        got = canonical.fetch(s, [acme, bob])
        assert (got[acme].valid_to, got[bob].valid_to) == (None, start)
        (state,) = canonical.relation_history(s, [acme])
        assert (state.valid_to, state.ended_by) == (None, None)
        assert {r.memory_id for r in canonical.open_relations(s, "Ana", ["works_at"])} == {acme, plan}


def test_a_later_end_holds_for_every_predicate_asked_at_once(
    canonical: CanonicalStore, embedder: CachedEmbedder
) -> None:
    """``open_relations(at=...)`` with several predicates: each is open or not at ``at``, not at a time the
    answer for the one before left behind (the Kùzu adapter's row loop once rebound the argument)."""
    ana = (EntityIn("Ana"), EntityIn("Acme"), EntityIn("Lisbon"))
    job = _insert(canonical, embedder, "Ana works at Acme.", ["user:ana"], 1, ana)
    home = _insert(canonical, embedder, "Ana lives in Lisbon.", ["user:ana"], 2, ana)
    with canonical.transaction() as tx:
        canonical.relate(tx, job, "Ana", "works_at", "Acme", T0 + timedelta(days=20))  # told later
        canonical.relate(tx, home, "Ana", "lives_in", "Lisbon", T0)
        canonical.close_relation(tx, home, "Ana", "lives_in", "Lisbon", valid_to=T0 + timedelta(days=10),
                                 ended_by="plan")  # fmt: skip
    with canonical.read() as s:
        got = canonical.open_relations(s, "Ana", ["works_at", "lives_in"], at=T0 + timedelta(days=1))
        assert sorted(r.predicate for r in got) == ["lives_in", "works_at"]


def test_open_relations_in_scopes_are_cut_after_the_scope_filter(
    canonical: CanonicalStore, embedder: CachedEmbedder
) -> None:
    """``scopes`` keeps the edges whose memory shares one of them, before ``newest`` cuts: what another scope
    says about the same (shared) entity never crowds them out (attack 18: derived relations)."""
    from datetime import timedelta

    own = _insert(canonical, embedder, "Udaipur is in Rajasthan.", ["team:a"], 1,
                  (EntityIn("Udaipur"), EntityIn("Rajasthan")))  # fmt: skip
    with canonical.transaction() as tx:
        canonical.relate(tx, own, "Udaipur", "located_in", "Rajasthan", T0)
    for n in range(5):
        mid = _insert(canonical, embedder, f"Udaipur is in zone {n}.", ["team:b"], n + 2,
                      (EntityIn("Udaipur"), EntityIn(f"Zone {n}")))  # fmt: skip
        with canonical.transaction() as tx:
            canonical.relate(tx, mid, "Udaipur", "located_in", f"Zone {n}", T0 + timedelta(minutes=n + 1))
    with canonical.read() as s:
        crowded = canonical.open_relations(s, "Udaipur", ["located_in"], newest=2)
        assert own not in [r.memory_id for r in crowded]
        mine = canonical.open_relations(s, "Udaipur", ["located_in"], newest=2, scopes=["team:a", "user:x"])
        assert [(r.memory_id, r.scopes) for r in mine] == [(own, ("team:a",))]
        assert canonical.open_relations(s, "Udaipur", ["located_in"], scopes=[]) == []
        assert len(canonical.open_relations(s, "Udaipur", ["located_in"], scopes=["team:b"])) == 5


def test_a_bulk_insert_reads_as_the_same_inserts_one_by_one(
    canonical: CanonicalStore, embedder: CachedEmbedder
) -> None:
    """``insert_many`` (a bulk write's rows) and ``propose_many`` leave what the one-at-a-time calls leave, and
    ``present`` names the memories that exist."""
    from storage.domain.records import NewRow, SameAs

    rows = [
        NewRow(new_memory(embedder, "Ana lives in Lisbon."), ["user:ana", "team:t"], [EntityIn("Ana")]),
        NewRow(new_memory(embedder, "Anna plays the cello."), ["team:t"], [EntityIn("Anna")]),
        NewRow(new_memory(embedder, "The kiln fires at dawn."), ["team:t"], []),
    ]
    ids = [r.memory.id for r in rows]
    with canonical.transaction() as tx:
        assert canonical.present(tx, ids) == set()
        canonical.insert_many(tx, rows, T0)
        canonical.append_changes(tx, [Change(i + 1, "add", mid) for i, mid in enumerate(ids)], T0)
    proposal = SameAs("p" * 32, "Anna", "Ana", "fuzzy", 0.9, ids[1], "pending", T0, scopes=("team:t",))
    with canonical.transaction() as tx:
        assert canonical.proposable(tx, [proposal]) == [True]
        canonical.propose_many(tx, [proposal])
    with canonical.read() as s:
        assert canonical.present(s, [*ids, "0" * 32]) == set(ids)
        got = canonical.fetch(s, ids)
        assert [got[m].content for m in ids] == [r.memory.content for r in rows]
        assert [sorted(canonical.scopes_of(s, m)) for m in ids] == [
            ["team:t", "user:ana"],
            ["team:t"],
            ["team:t"],
        ]
        assert [got[m].entities for m in ids] == [("Ana",), ("Anna",), ()]
        assert sorted(e.name for e in canonical.known_entities(s)) == ["Ana", "Anna"]
        assert canonical.all_ids(s) == dict.fromkeys(ids, True)
        row = canonical.projection_rows(s, [ids[0]])[ids[0]]
        assert (row.content, row.live, row.scopes) == ("Ana lives in Lisbon.", True, ("team:t", "user:ana"))
        [shown] = canonical.same_as(s)
        assert (shown.id, {shown.a, shown.b}, shown.status) == ("p" * 32, {"Ana", "Anna"}, "pending")
        assert canonical.pending_same_count(s, "team:t") == 1


def test_file_space_counts_what_a_rebuild_gives_back(
    canonical: CanonicalStore, embedder: CachedEmbedder
) -> None:
    """``file_space`` is what the engine's compactor reads (storage.engine.compaction): the free part never
    exceeds the whole, and a rebuild leaves no more of either than there was."""
    ids = [_insert(canonical, embedder, f"Memory number {i} of a store that shrinks.", ["user:ana"], i + 1)
           for i in range(40)]  # fmt: skip
    with canonical.transaction() as tx:
        canonical.delete_memories(tx, ids[::2])
    canonical.checkpoint()
    before = canonical.file_space()
    assert 0 <= before.free <= before.total
    assert 0 <= before.log <= before.total
    canonical.rebuild()
    after = canonical.file_space()
    assert 0 <= after.free <= after.total
    assert after.total <= before.total
    with canonical.read() as s:
        assert sorted(canonical.all_ids(s)) == sorted(ids[1::2])


def test_reads_of_many_ids_answer_each_id_once(canonical: CanonicalStore, embedder: CachedEmbedder) -> None:
    """``fetch`` and ``visible_among`` over more ids than one store statement looks up (the Kùzu adapter joins
    at most 32 lookups in one): every present id once, whole; missing, repeated and invisible ids as they
    would be one at a time."""
    from datetime import timedelta

    from storage.domain.records import NewRow

    contents = [f"Memory number {i} mentions the kiln." for i in range(70)]
    rows = [
        NewRow(new_memory(embedder, c), ["team:t" if i % 3 else "user:bo"], [])
        for i, c in enumerate(contents)
    ]
    ids = [r.memory.id for r in rows]
    with canonical.transaction() as tx:
        canonical.ensure_scopes(tx, ["team:t", "user:bo"], T0)
        canonical.insert_many(tx, rows, T0)
        canonical.append_changes(tx, [Change(i + 1, "add", mid) for i, mid in enumerate(ids)], T0)
    asked = [*ids[:40], "0" * 32, *ids[:5], *ids[40:], "f" * 32]
    with canonical.read() as s:
        got = canonical.fetch(s, asked)
        assert list(got) == ids
        assert [got[m].content for m in ids] == contents
        assert [got[m].scopes for m in ids] == [("team:t",) if i % 3 else ("user:bo",) for i in range(70)]
        seen = canonical.visible_among(s, "kiln", asked, scopes=["team:t"], now=T0 + timedelta(days=1))
        assert seen == {m for i, m in enumerate(ids) if i % 3}


def test_an_entitys_relations_either_way_read_with_their_direction_every_time(
    canonical: CanonicalStore, embedder: CachedEmbedder
) -> None:
    """An entity both subject and object of relations: each edge seen from it says which way it points and
    names its ends, newest first, whether read with a scope filter, read whole, or served from what an adapter
    kept of an earlier read (a third read at one commit is one)."""
    ana, bo = (EntityIn("Ana"), EntityIn("Bo"))
    lisbon = EntityIn("Lisbon")
    first = _insert(canonical, embedder, "Ana knows Bo.", ["team:a"], 1, (ana, bo))
    second = _insert(canonical, embedder, "Bo lives in Lisbon.", ["team:b"], 2, (bo, lisbon))
    with canonical.transaction() as tx:
        canonical.relate(tx, first, "Ana", "knows", "Bo", T0)
        canonical.relate(tx, second, "Bo", "lives_in", "Lisbon", T0 + timedelta(seconds=1))
    want = [("lives_in", second, "lisbon", "Lisbon", True, "Bo"), ("knows", first, "ana", "Ana", False, "Bo")]
    with canonical.read() as s:
        for _ in range(4):
            got = canonical.relations(s, "bo", limit=5)
            assert [
                (r.predicate, r.memory_id, r.other_id, r.other_name, r.outgoing, r.own_name) for r in got
            ] == want
            assert [r.scopes for r in got] == [("team:b",), ("team:a",)]
            (mine,) = canonical.relations(s, "bo", limit=5, scopes=["team:a"])
            assert (mine.predicate, mine.other_name, mine.outgoing) == ("knows", "Ana", False)
            assert [r.predicate for r in canonical.relations(s, "bo", limit=1)] == ["lives_in"]


def test_a_relation_of_an_entity_to_itself_takes_one_place_in_its_window(
    canonical: CanonicalStore, embedder: CachedEmbedder
) -> None:
    """An undirected match meets an edge from an entity to itself from both ends: read as two relations, each
    self-relation took two of the window's places, and with 8 of them among Lisbon's newest the graph lane's
    20-edge window lost the older Lisbon -capital_of-> Portugal (Hotel Aria's country) although the entity
    had 17 distinct relations. Each edge is one relation, in every read (whole, filtered, kept)."""
    lisbon, portugal = EntityIn("Lisbon"), EntityIn("Portugal")
    older = _insert(
        canonical, embedder, "Lisbon is the capital of Portugal.", ["team:a"], 1, (lisbon, portugal)
    )
    selfs = [
        _insert(canonical, embedder, f"Lisbon, also Lisbon {i}.", ["team:a"], 2 + i, (lisbon,))
        for i in range(4)
    ]
    with canonical.transaction() as tx:
        canonical.relate(tx, older, "Lisbon", "capital_of", "Portugal", T0)
        for i, m in enumerate(selfs):
            canonical.relate(tx, m, "Lisbon", "alias_of", "Lisbon", T0 + timedelta(seconds=1 + i))
    want = [(m, "lisbon") for m in reversed(selfs)] + [(older, "portugal")]
    with canonical.read() as s:
        for _ in range(3):
            for scopes in (None, ["team:a"]):
                got = canonical.relations(s, "lisbon", limit=5, scopes=scopes)
                assert [(r.memory_id, r.other_id) for r in got] == want
                assert [(r.memory_id, r.other_id) for r in canonical.relations(s, "lisbon", limit=2)] == want[
                    :2
                ]
