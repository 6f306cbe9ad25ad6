"""What a recall asks (``Query``), what a lane answers (``Found``), the ``Lane`` protocol every lane
implements, and the canonical visibility rules every lane and the pipeline apply."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

import numpy as np

from storage.domain.models import Memory, MemoryKind, Status
from storage.recall.recipes import Recipe
from storage.recall.understanding import Interval


@dataclass(frozen=True, slots=True)
class Query:
    text: str
    scopes: tuple[str, ...]
    k: int
    now: datetime  # the wall clock: what is current is decided at this instant
    as_of: datetime | None = None
    include_history: bool = False
    kinds: tuple[MemoryKind, ...] | None = None
    since: datetime | None = None
    until: datetime | None = None
    search_text: str = ""  # the words given to BM25 and the vector lane (time expressions removed)
    intervals: tuple[Interval, ...] = ()  # time windows named in the query, resolved against the caller's now
    token_budget: int | None = None
    known_at: datetime | None = None  # transaction time: what the store believed at this instant
    cut_chars: int | None = None  # the caller shows at most this many characters of each result
    # A principal with grants: names and aliases resolve only from what its scopes hold (the graph lane).
    restricted: bool = False
    # The caller's present (its ``now``), against which the salience rule measures a memory's age.
    present: datetime | None = None
    # The query's embedding, once the vector lane has prepared it.
    vector: np.ndarray | None = field(default=None, compare=False, repr=False)

    @property
    def live_only(self) -> bool:
        return not self.include_history and self.as_of is None and self.known_at is None

    @property
    def valid_time(self) -> datetime | None:
        """The valid-time instant the answer is about, when it is not now."""
        return self.as_of if self.as_of is not None else self.known_at

    @property
    def words(self) -> str:
        return self.search_text or self.text


@dataclass(frozen=True, slots=True)
class Found:
    """A lane's answer: ranked ids, and for some of them statements saying how they were reached."""

    ids: list[str]
    paths: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    vectors: Mapping[str, np.ndarray] = field(default_factory=dict)  # stored vectors, unit length, if at hand
    # Memories that themselves state a relation on a path from an entity named in the query: id -> hops.
    statements: Mapping[str, int] = field(default_factory=dict)


class Lane(Protocol):
    """A search lane: at most ``depth`` ids within the query's scopes, best first.

    ``prepare`` does the lane's work that should not share the cores with other lanes, before they start; it
    returns the query, completed with what it computed, and returns a query it already completed unchanged (the
    engine prepares a query while the projections catch up, then runs the pipeline on it). It reads no
    projection.
    """

    name: str

    def prepare(self, q: Query) -> Query: ...

    def search(self, q: Query, depth: int, recipe: Recipe) -> Found: ...


def lane_live_only(q: Query, recipe: Recipe) -> bool:
    # Following version chains, the text lanes also search superseded versions: a hit on one counts for the
    # chain's current version (``_Pool``), so the words of earlier versions lead to the current one.
    return q.live_only and not recipe.follow_versions


def visible(
    m: Memory,
    q: Query,
    replaced_at: datetime | None = None,
    ended_at: datetime | None = None,
    planned_end: datetime | None = None,
) -> bool:
    """Whether the query may see this memory at all: one of its scopes, and its time view (current and
    valid now; valid at ``as_of``; anything with history). Decides which graph edges may be followed.

    With ``known_at`` (transaction time) the view is what the store believed then: recorded by then, not yet
    retired or superseded by then (``replaced_at``: when its successor was recorded, if known), and valid at
    ``as_of`` (default ``known_at``), a validity end written after ``known_at`` not yet counting (``ended_at``:
    when a planned change that ends a current memory's validity was recorded, if known). ``planned_end``: the
    earliest end a plan standing at ``known_at`` gave it (recorded by then, not yet cancelled, moved or
    overtaken), which counts even when the plan's withdrawal undid the end since.
    """
    if not set(m.scopes) & set(q.scopes):
        return False
    if q.known_at is not None:
        return _believed(m, q.known_at, q.as_of or q.known_at, replaced_at, ended_at, planned_end)
    if q.as_of is not None:
        return m.valid_at(q.as_of)
    return q.include_history or (m.status is Status.CURRENT and m.valid_at(q.now))


def _believed(
    m: Memory,
    known: datetime,
    valid: datetime,
    replaced_at: datetime | None,
    ended_at: datetime | None,
    planned_end: datetime | None = None,
) -> bool:
    if m.recorded_at > known:
        return False
    if m.retired_at is not None and m.retired_at <= known:
        return False
    if m.superseded_by is not None and (replaced_at is None or replaced_at <= known):
        return False
    # A validity end closed by a later supersession or retirement was not known yet.
    # So was one a planned change wrote later ("Ana works at Initech from June" ends Acme then).
    closed_later = (
        m.retired_at is not None or m.superseded_by is not None or (ended_at is not None and ended_at > known)
    )
    end = None if closed_later else m.valid_to
    if planned_end is not None and (end is None or planned_end < end):
        end = planned_end
    return m.valid_from <= valid and (end is None or valid < end)


def admissible(
    m: Memory,
    q: Query,
    replaced_at: datetime | None = None,
    ended_at: datetime | None = None,
    planned_end: datetime | None = None,
) -> bool:
    """The canonical filter on results: visible, of a requested kind, inside the event-time window (only memories
    with an event time are inside one)."""
    if not visible(m, q, replaced_at, ended_at, planned_end):
        return False
    if q.kinds and m.kind not in q.kinds:
        return False
    if q.since is None and q.until is None:
        return True
    # The window is on event time, which facts, preferences and undated notes do not have (their stored
    # event_time is only when they were written): they are in no window, rather than dated by their write.
    if not m.has_event_time:
        return False
    if q.since is not None and m.event_time < q.since:
        return False
    return not (q.until is not None and m.event_time >= q.until)
