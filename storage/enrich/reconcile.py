"""Reconciliation at write time: does a new memory update, contradict or repeat what is stored?

Run inside the write transaction, right after the new memory and its relations are inserted, against the
relations recorded by current memories that share a target scope with it:

- **update**: a new value for a functional predicate (``lives_in``, ``works_at``, ...) closes the previous
  relation's validity at the time the change took effect, and the memory that recorded it is superseded
  when none of its relations is still open (history then shows the chain). A statement older than the
  stored one ("moved to Lisbon in 2020" after "moved to Porto in 2023") is recorded as already closed
  instead, and its memory is the superseded one. "no longer" / "anymore" closes without a new value.
- **contradiction**: a different value for a fixed predicate (``born_in``), likes vs dislikes of the same
  thing, or a negation of a stored relation: both memories are kept and linked by ``CONTRADICTS``.
- **duplicate**: the same relation already recorded by another memory: reported.

Only memories the writer may read are considered, so a receipt never names anything from a scope the
writer cannot read; a memory is changed (closed, superseded) only if the writer may write all its scopes
(otherwise the conflict is linked as a contradiction instead).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from storage.domain.records import OpenRelation, entity_key
from storage.enrich import Fact
from storage.ports.canonical import CanonicalStore, Session

DEFAULT_FUNCTIONAL = (
    "lives_in", "works_at", "job_title", "phone", "email", "married_to", "studies_at", "reports_to",
    "partner_of",
)  # fmt: skip
FIXED = frozenset(("born_in", "birth_date", "birthday", "born_on"))
OPPOSITE = {"likes": "dislikes", "dislikes": "likes"}


@dataclass
class Outcome:
    """What reconciliation did for one new memory; ids only of memories the writer may read."""

    supersedes: list[str] = field(default_factory=list)
    superseded_by: str | None = None
    # Memories this one replaces from a later date (a planned change: its validity starts after now): their
    # validity ends then, and until then they stay current (``supersedes`` names only those replaced now).
    supersedes_later: list[str] = field(default_factory=list)
    contradicts: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    recorded: list[str] = field(default_factory=list)  # "Ana —lives_in→ Porto"

    def add(self, bucket: list[str], mid: str) -> None:
        if mid not in bucket:
            bucket.append(mid)


@dataclass(frozen=True, slots=True)
class Access:
    """The writer's view: may it read / write a memory in these scopes."""

    can_read: Callable[[Sequence[str]], bool]
    can_write: Callable[[Sequence[str]], bool]


SAME_STATEMENT_LIMIT = 32
"""How many earlier open tellings of one statement (subject, predicate, object) and of its opposite a new one is
compared with, newest first: duplicates reported, contradictions linked, and tellings closed by "no longer"."""


def _newest_tellings(
    graph: CanonicalStore, conn: Session, subject: str, predicate: str, obj: str, new_id: str, now: datetime
) -> list[OpenRelation]:
    # One more than the limit: a store that reads its own transaction's writes returns the new telling too.
    found = graph.open_relations(conn, subject, [predicate], obj, newest=SAME_STATEMENT_LIMIT + 1, at=now)
    return [r for r in found if r.memory_id != new_id][-SAME_STATEMENT_LIMIT:]


def reconcile(
    graph: CanonicalStore,
    conn: Session,
    *,
    new_id: str,
    scopes: Sequence[str],
    facts: Sequence[Fact],
    functional: frozenset[str],
    access: Access,
    now: datetime,
    related: Callable[[str], bool] = lambda _name: True,
    effective: datetime | None = None,
    exclude: Collection[str] = frozenset(),
    ends: Mapping[str, datetime | None] | None = None,
) -> tuple[Outcome, list[str]]:
    """Apply the rules above; returns the outcome and the ids of memories whose state changed (superseded:
    the caller records them in the change log). ``related(name)`` may say cheaply that no relation touches a
    subject yet (it must never say so wrongly). ``effective``: when a statement that names no time of its own
    took effect (default ``now``: an amend passes its ``effective_at``). ``exclude``: memories left alone (the
    version an amend replaces: the amend itself supersedes it). ``ends``: validity ends this transaction already
    changed (the plan a write moves reopened what it ended), for a store whose reads see only committed state."""
    out = Outcome()
    when = effective or now
    changed: list[str] = []
    targets = set(scopes)
    to_supersede: dict[str, tuple[str, datetime, str]] = {}  # old id -> (new id, valid_to, reason)
    closed: set[tuple[str, str, str, str]] = set()  # (memory id, subject, predicate, object) closed here
    starts: dict[str, datetime | None] = {}

    def started(r: OpenRelation, dated: bool) -> datetime | None:
        """When a stored relation took effect, as compared with a new statement: its own time for a dated
        statement; for an amend's undated one also its memory's valid_from (a write's undated statement is
        news of now, never older than what is stored)."""
        if dated or r.valid_from is not None:
            return r.valid_from if dated or effective is not None else None
        if effective is None:
            return None
        if r.memory_id not in starts:
            m = graph.fetch(conn, [r.memory_id]).get(r.memory_id)
            starts[r.memory_id] = m.valid_from if m is not None else None
        return starts[r.memory_id]

    for f in facts:
        if not related(f.subject):
            continue  # no relation has ever touched this subject: nothing stored to compare with
        obj_key = entity_key(f.object)
        # Only what can matter is fetched: the same relation (duplicate, negation), its opposite, and every
        # value only for predicates with one value (update, fixed). Keeps the cost flat as a subject's
        # likes and visits pile up; the same statement made again and again (in any scope: entities are
        # shared) is compared with its SAME_STATEMENT_LIMIT most recent tellings only.
        # A relation a planned change ends at a later date still holds now: newer news replaces it now
        # ("Ana works at Globex" after "Ana works at Initech from June" ends Acme today).
        found = _newest_tellings(graph, conn, f.subject, f.predicate, f.object, new_id, now)
        if f.predicate in OPPOSITE:
            found += _newest_tellings(graph, conn, f.subject, OPPOSITE[f.predicate], f.object, new_id, now)
        if f.status == "asserted" and (f.predicate in functional or f.predicate in FIXED):
            found += graph.open_relations(conn, f.subject, [f.predicate], other_than=f.object, at=now)
        rels = [
            r
            for r in found
            if r.memory_id != new_id
            and r.memory_id not in exclude
            and targets & set(r.scopes)
            and access.can_read(r.scopes)
        ]
        # Told out of order: a stored value that took effect after this statement makes it the older one.
        # An amend's undated statement took effect at its effective_at: a stored value whose memory became
        # valid after that is the newer one too (closing it then would end it before it began).
        at = f.at if f.dated else when
        later = sorted(
            (
                r
                for r in rels
                if r.predicate == f.predicate and (start := started(r, f.dated)) is not None and start > at
            ),
            key=lambda r: started(r, f.dated) or at,
        )
        for rel in rels:
            same_object = rel.object_id == obj_key
            writable = access.can_write(rel.scopes)
            if f.status == "negated":
                if rel.predicate != f.predicate or not same_object:
                    continue
                if f.ended and writable and rel not in later:
                    _close(graph, conn, rel, f.subject, f.at if f.dated else when, new_id, closed)
                    out.add(out.supersedes, rel.memory_id)
                    to_supersede[rel.memory_id] = (
                        new_id,
                        f.at if f.dated else when,
                        f"no longer {f.predicate}",
                    )
                else:
                    _contradict(graph, conn, out, new_id, rel.memory_id, f.predicate, now)
                continue
            if rel.predicate != f.predicate:  # likes vs dislikes of the same thing
                if same_object:
                    _contradict(graph, conn, out, new_id, rel.memory_id, f.predicate, now)
                continue
            if same_object:
                out.add(out.duplicates, rel.memory_id)
                continue
            if f.predicate in FIXED:
                _contradict(graph, conn, out, new_id, rel.memory_id, f.predicate, now)
            elif f.predicate in functional:
                if not writable:
                    _contradict(graph, conn, out, new_id, rel.memory_id, f.predicate, now)
                elif rel not in later:
                    # Newer news (or undated: the later telling wins). Closed when the change took effect,
                    # also when a value stored starts later still (a plan for June, then one for March ends
                    # the current value in March, not June: both would answer in April).
                    _close(graph, conn, rel, f.subject, f.at if f.dated else when, new_id, closed)
                    out.add(out.supersedes, rel.memory_id)
                    to_supersede[rel.memory_id] = (
                        new_id,
                        f.at if f.dated else when,
                        f"update: {f.predicate}",
                    )
        if later and f.status == "asserted" and f.predicate in functional:
            first = later[0]
            first_start = started(first, f.dated)
            assert first_start is not None
            if first.object_id != obj_key:
                graph.close_relation(
                    conn,
                    new_id,
                    f.subject,
                    f.predicate,
                    f.object,
                    valid_to=first_start,
                    ended_by=first.memory_id,
                )
                out.superseded_by = out.superseded_by or first.memory_id
                to_supersede[new_id] = (first.memory_id, first_start, f"update: {f.predicate}")
    for old, (new, valid_to, reason) in to_supersede.items():
        if _still_open(graph, conn, old, closed) or not graph.live_state(conn, old):
            continue
        if valid_to > now:
            # A planned change ("Ana works at Initech" valid from next June): what it replaces is still true
            # until then. Its validity ends at that date and it stays current, so that recall today answers
            # with it and recall as_of a later date with its successor. Superseding it now would hide both
            # until the date (issue #14); nothing needs to happen when the date passes, as every read view
            # compares validity with its own instant (``recall.visible``), as for a fact written with a valid_to.
            if old != new_id:
                stored = graph.fetch(conn, [old]).get(old)
                end = stored.valid_to if stored is not None else None
                if ends is not None and old in ends:
                    end = ends[old]
                if end is not None and end < valid_to:
                    # It already ends sooner (a plan told earlier that starts before this one ends it): this
                    # memory replaces that plan, not it, and the receipt must not say otherwise.
                    if old in out.supersedes:
                        out.supersedes.remove(old)
                    continue
            graph.end_validity(conn, old, valid_to=valid_to, by=new)
            if old == new_id:
                # This memory is the older news, but it holds until the newer one starts.
                out.superseded_by = None
            elif old in out.supersedes:
                out.supersedes.remove(old)
                out.add(out.supersedes_later, old)
            continue
        graph.supersede(conn, old, new, reason=reason, at=now, close_valid_to=valid_to)
        changed.append(old)
    out.recorded = [f"{f.subject} —{f.predicate}→ {f.object}" for f in facts if f.status == "asserted"]
    return out, changed


def _close(
    graph: CanonicalStore,
    conn: Session,
    rel: OpenRelation,
    subject: str,
    at: datetime,
    by: str,
    closed: set[tuple[str, str, str, str]],
) -> None:
    graph.close_relation(
        conn, rel.memory_id, subject, rel.predicate, rel.object_name, valid_to=at, ended_by=by
    )
    closed.add((rel.memory_id, entity_key(subject), rel.predicate, entity_key(rel.object_name)))


def _still_open(
    graph: CanonicalStore, conn: Session, memory_id: str, closed: set[tuple[str, str, str, str]]
) -> bool:
    """Whether a relation of the memory is still open once this transaction's closes are counted. A store
    whose reads inside a transaction see only committed state (FalkorDB buffers the transaction's writes) still
    shows the relations closed above as open: without this, "Ana now works at Globex" closed "works at Acme"
    there but left the memory that said it current."""
    return any(
        r.valid_to is None
        and (memory_id, entity_key(r.subject), r.predicate, entity_key(r.object)) not in closed
        for r in graph.relation_history(conn, [memory_id])
    )


def _contradict(
    graph: CanonicalStore, conn: Session, out: Outcome, new: str, old: str, predicate: str, now: datetime
) -> None:
    if old not in out.contradicts:
        graph.contradict(conn, new, old, predicate, now)
        out.contradicts.append(old)
