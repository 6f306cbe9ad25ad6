"""``delete_memories`` under contract: what deleting a memory takes with it and what it leaves, for every adapter.

One store holds a memory to delete that touches everything a deletion must handle (it amended an older version
and was amended in turn, ended a relation another memory recorded, recorded relations of its own, one of them to
an entity it does not mention, raised a SAME_AS proposal, has a model pass record, and gave names and aliases to
entities others mention too), among memories that must come out untouched. Deleted alone, and among 40 other
memories (a purge's many ids), the store must read the same afterwards.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from storage import CachedEmbedder, EntityIn
from storage.domain.records import Change, SameAs
from storage.ports.canonical import CanonicalStore
from tests.storage.contract._records import T0, new_memory

NEWER_ERASED = "its newer version was erased"
AMENDED_AT = T0 + timedelta(hours=5)


def _memory(
    store: CanonicalStore,
    embedder: CachedEmbedder,
    content: str,
    hours: int,
    entities: tuple[EntityIn, ...],
    *,
    supersedes: str | None = None,
) -> str:
    m = new_memory(embedder, content, at=T0 + timedelta(hours=hours), supersedes=supersedes)
    with store.transaction() as tx:
        store.ensure_scopes(tx, ["user:ana"], T0)
        store.insert_memory(tx, m, ["user:ana"], entities)
        store.link(tx, m.id, ["user:ana"], T0)
        if entities:
            store.mention(tx, m.id, entities)
        store.append_changes(tx, [Change(hours + 1, "add", m.id)], T0)
    return m.id


def _enrichment(store: CanonicalStore, memory_id: str) -> None:
    with store.transaction() as tx:
        store.record_enrichment(
            tx,
            memory_id,
            {"status": "done", "detail": "", "model": "m", "input_tokens": 1, "output_tokens": 1,
             "cache_read_tokens": 0, "cache_write_tokens": 0, "at": T0},
        )  # fmt: skip


def _proposal(store: CanonicalStore, pid: str, a: str, b: str, memory_id: str) -> None:
    with store.transaction() as tx:
        store.propose_same(
            tx, SameAs(pid, a, b, "fuzzy", 0.9, memory_id, "pending", T0, scopes=("user:ana",))
        )


@pytest.mark.parametrize("others", [0, 40], ids=["alone", "among many"])
def test_deleting_a_memory_takes_what_it_recorded_and_leaves_the_rest_as_it_was(
    canonical: CanonicalStore, embedder: CachedEmbedder, others: int
) -> None:
    store = canonical
    older = _memory(
        store,
        embedder,
        "Bruno works at Acme.",
        0,
        (EntityIn("Bruno", "person", ("Bru",)), EntityIn("Acme", "org")),
    )
    with store.transaction() as tx:
        store.relate(tx, older, "Bruno", "works_at", "Acme", T0)
    _enrichment(store, older)
    # Only a relation keeps Initech: nothing mentions it (an import, or an end another memory named).
    with store.transaction() as tx:
        store.restore_entities(tx, [("initech", "Initech", "org", [])])
    gone = _memory(
        store,
        embedder,
        "Bruno works at Globex now, and visited Lisbon and Zurich.",
        1,
        (
            EntityIn("Bruno", "person", ("B.",)),
            EntityIn("Globex", "org", ("Globex Inc",)),
            EntityIn("Lisbon", "place"),
            EntityIn("Zurich", "place"),
        ),
        supersedes=older,
    )
    with store.transaction() as tx:
        store.supersede(tx, older, gone, reason="update: works_at", at=AMENDED_AT, close_valid_to=AMENDED_AT)
    with store.transaction() as tx:
        store.relate(tx, gone, "Bruno", "works_at", "Globex", T0)
        store.relate(tx, gone, "Initech", "hired", "Bruno", T0)  # from an entity it does not mention
        store.close_relation(tx, older, "Bruno", "works_at", "Acme", valid_to=AMENDED_AT, ended_by=gone)
    _enrichment(store, gone)
    newer = _memory(
        store,
        embedder,
        "Bruno leads the Globex data team.",
        2,
        (EntityIn("Bruno", "person", ("Bruno G.",)), EntityIn("Globex", "org", ("GBX",))),
        supersedes=gone,
    )
    with store.transaction() as tx:
        store.supersede(tx, gone, newer, reason="amended", at=AMENDED_AT, close_valid_to=AMENDED_AT)
    other = _memory(store, embedder, "Bruno Silva flew to Lisbon.", 3, (EntityIn("Bruno Silva", "person"),))
    with store.transaction() as tx:
        store.relate(
            tx, other, "Bruno Silva", "visited", "Lisbon", T0
        )  # keeps Lisbon, which it does not mention
    _proposal(store, "p-gone", "Globex", "Acme", gone)
    _proposal(store, "p-other", "Bruno Silva", "Bruno", other)
    fillers = [
        _memory(store, embedder, f"Filler note {k}.", 10 + k, (EntityIn(f"Filler{k}"),))
        for k in range(others)
    ]

    with store.transaction() as tx:
        deleted = store.delete_memories(tx, [gone, *fillers])

    # Zurich (mentioned by it alone) and Initech (an end of its relation alone) go; Lisbon stays for a relation.
    assert deleted == 2 + others
    with store.read() as s:
        got = store.fetch(s, [older, gone, newer, other])
        assert set(got) == {older, newer, other}
        # The version it amended is no longer superseded, and is retired when it was superseded.
        assert (got[older].superseded_by, got[older].retired_at) == (None, AMENDED_AT)
        assert (got[older].retire_reason, got[older].valid_to) == (NEWER_ERASED, AMENDED_AT)
        # The version that amended it points at nothing, and stays current.
        assert (got[newer].supersedes, got[newer].superseded_by, got[newer].retired_at) == (None, None, None)
        assert store.live_state(s, newer) is True
        assert store.export_supersedes(s) == []
        # Its relations are gone; the one it ended is open again; the others' stay as they were.
        relations = {
            (a, b, p, mid, vt, by) for a, b, p, mid, _at, _vf, vt, by, *_said in store.export_relations(s)
        }
        assert relations == {
            ("bruno", "acme", "works_at", older, None, None),
            ("bruno silva", "lisbon", "visited", other, None, None),
        }
        assert store.enrichment_of(s, gone) is None
        assert store.enrichment_of(s, older) is not None
        assert [p.id for p in store.same_as(s)] == ["p-other"]
        # What stays mentioned keeps only what the remaining mentions gave it, the earliest first.
        entities = {i: (n, t, a) for i, n, t, a in store.export_entities(s)}
        assert entities == {
            "acme": ("Acme", "org", []),
            "bruno": ("Bruno", "person", ["Bru", "Bruno G."]),
            "bruno silva": ("Bruno Silva", "person", []),
            "globex": ("Globex", "org", ["GBX"]),
            "lisbon": ("Lisbon", "thing", []),  # no mention left to give it a type
        }
        assert [m.id for m in store.fetch(s, fillers).values()] == []
