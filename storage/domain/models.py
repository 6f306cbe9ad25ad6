"""Domain records: what the engine accepts and returns. Plain frozen dataclasses, no I/O.

Times are timezone-aware UTC ``datetime``s everywhere; naive inputs are taken as UTC.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

# Documented limits (docs/limits.md). Requests past them are refused with InvalidInput, never truncated.
MAX_CONTENT_CHARS = 32_000
MAX_QUERY_CHARS = 4_000
MAX_SCOPES_PER_CALL = 16
MAX_ENTITIES = 64
MAX_RELATIONS = 64
MAX_NAME_CHARS = 200
MAX_METADATA_BYTES = 16_384
MAX_K = 100
MAX_REASON_CHARS = 1_000
MAX_PROPOSAL_PAGE = 200  # SAME_AS proposals per page of a listing (storage.engine.resolution)
MAX_TOKEN_BUDGET = 100_000
MAX_GROUP_KEY_CHARS = 100


class MemoryKind(StrEnum):
    FACT = "fact"
    EVENT = "event"
    PREFERENCE = "preference"
    NOTE = "note"
    MESSAGE = "message"
    SUMMARY = "summary"


class Status(StrEnum):
    CURRENT = "current"
    SUPERSEDED = "superseded"
    RETIRED = "retired"


WriteStatus = Literal["added", "duplicate", "linked", "folded"]
Lane = Literal["bm25", "vector", "graph"]


@dataclass(frozen=True, slots=True)
class EntityIn:
    """An entity the caller already knows is mentioned (the calling LLM usually does)."""

    name: str
    type: str = "thing"
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RelationIn:
    """A (subject, predicate, object) statement between two entities, e.g. (Ana, works_at, Acme)."""

    subject: str
    predicate: str
    object: str


@dataclass(frozen=True, slots=True)
class WriteItem:
    """One memory to write (see ``Engine.write``). ``vector`` may be supplied when it was computed with
    the data directory's own embedder (bulk imports, benchmarks); otherwise the engine embeds."""

    content: str
    scopes: Sequence[str]
    kind: str = "note"
    event_time: datetime | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    entities: Sequence[EntityIn] | None = None
    relations: Sequence[RelationIn] | None = None
    metadata: Mapping[str, Any] | None = None
    source: str = ""
    vector: Sequence[float] | None = None


@dataclass(frozen=True, slots=True)
class Provenance:
    principal: str
    client: str
    source: str


@dataclass(frozen=True, slots=True)
class Memory:
    """One immutable memory. Only ``valid_to``, ``retired_at``/``retire_reason`` and ``superseded_by`` ever change."""

    id: str
    content: str
    kind: MemoryKind
    scopes: tuple[str, ...]
    entities: tuple[str, ...]
    provenance: Provenance
    metadata: dict[str, Any]
    event_time: datetime
    event_time_source: Literal["caller", "content", "recorded"]
    valid_from: datetime
    valid_to: datetime | None
    recorded_at: datetime
    retired_at: datetime | None
    retire_reason: str
    supersedes: str | None
    superseded_by: str | None

    @property
    def status(self) -> Status:
        if self.retired_at is not None:
            return Status.RETIRED
        if self.superseded_by is not None:
            return Status.SUPERSEDED
        return Status.CURRENT

    @property
    def has_event_time(self) -> bool:
        """Whether something happened at ``event_time``: events and messages always; notes and summaries when
        the caller or the content gave the time. Facts and preferences hold over a validity interval instead;
        their ``event_time`` is only when they were written, and time expressions in a query never boost them."""
        return dated(self.kind, self.event_time_source)

    @property
    def dated_at(self) -> datetime | None:
        """``event_time`` when the memory has one (``has_event_time``), else None."""
        return self.event_time if self.has_event_time else None

    def valid_at(self, t: datetime) -> bool:
        """True when the memory's valid-time interval [valid_from, valid_to) contains ``t``."""
        return self.valid_from <= t and (self.valid_to is None or t < self.valid_to)


def dated(kind: MemoryKind | str, event_time_source: str) -> bool:
    """``Memory.has_event_time`` for a memory not read back yet (a write's receipt)."""
    if kind in (MemoryKind.EVENT, MemoryKind.MESSAGE):
        return True
    if kind in (MemoryKind.FACT, MemoryKind.PREFERENCE):
        return False
    return event_time_source != "recorded"


@dataclass(frozen=True, slots=True)
class WriteReceipt:
    """A write's outcome. The reconciliation fields (``storage.enrich.reconcile``) name only memories the
    writer may read: ``supersedes`` (updated by this one), ``supersedes_later`` (updated by this one from its
    later ``valid_from`` on: current until then), ``superseded_by`` (this one was older news),
    ``contradicts`` (conflicting, both kept) and ``duplicates`` (already stating the same relation)."""

    id: str
    status: WriteStatus
    scopes: tuple[str, ...]
    entities: tuple[str, ...]
    event_time: datetime | None  # None: a fact, preference or undated note
    relations: tuple[str, ...] = ()
    supersedes: tuple[str, ...] = ()
    superseded_by: str | None = None
    contradicts: tuple[str, ...] = ()
    duplicates: tuple[str, ...] = ()
    # Replaced from this memory's later valid_from on (a planned change): current until then, their validity
    # ending there (``supersedes`` names those replaced now).
    supersedes_later: tuple[str, ...] = ()
    # Entity resolution (storage.engine.resolution): names linked to a known entity ("Jonhson -> Johnson
    # (fuzzy)"), the ids of SAME_AS proposals this write raised, and pairs ("Jon Smith ~ John Smith") it did not
    # propose because a scope already holds the cap of pending proposals.
    resolved: tuple[str, ...] = ()
    proposals: tuple[str, ...] = ()
    not_proposed: tuple[str, ...] = ()
    # Current memories sharing a target scope that say the same thing in other words, with the cosine of the
    # two embeddings, nearest first (storage.enrich.near). With ``status == "folded"`` the first is ``id``.
    near_duplicates: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True, slots=True)
class AmendReceipt:
    id: str
    supersedes: str
    scopes: tuple[str, ...]
    valid_from: datetime
    # Reconciliation of the new version against other memories, as a write's receipt reports it.
    also_supersedes: tuple[str, ...] = ()  # other memories whose statement the new version ended or updated
    contradicts: tuple[str, ...] = ()
    # A stored value that took effect after effective_at: the new version is already the older one.
    superseded_by: str | None = None


@dataclass(frozen=True, slots=True)
class LinkReceipt:
    """A link or unlink: the memory and every scope it now belongs to (those the caller may see)."""

    id: str
    scopes: tuple[str, ...]
    changed: bool


@dataclass(frozen=True, slots=True)
class RetireReceipt:
    id: str
    retired_at: datetime
    valid_to: datetime


@dataclass(frozen=True, slots=True)
class PurgeReceipt:
    scope: str
    memories_deleted: int
    memories_unlinked: int
    entities_deleted: int
    per_store: dict[str, int]


@dataclass(frozen=True, slots=True)
class EraseReceipt:
    """What ``erase`` removed: the memory asked for and every version of it (amendments and re-assertions)."""

    id: str
    erased: tuple[str, ...]
    entities_deleted: int
    per_store: dict[str, int]


@dataclass(frozen=True, slots=True)
class TimeMatch:
    """The time rule applied to a result: how its event time sits against a time window in the query.

    ``rule`` is ``in_interval`` (inside the window), ``near_interval`` (outside, boosted less with distance)
    or ``outside_interval`` (too far to be boosted); ``factor`` multiplied the fused score. ``interval`` ends are ``None`` when open ("before May").
    """

    rule: Literal["in_interval", "near_interval", "outside_interval"]
    expression: str
    interval: tuple[datetime | None, datetime | None]
    factor: float


@dataclass(frozen=True, slots=True)
class SalienceMatch:
    """The salience rule applied to a result (``Recipe.salience``): its ``recency`` (1 now, 0.5 one half-life
    ago), how often the caller's own recalls returned it (``accesses``), the ``bonus`` added to its fused score,
    and whether that bonus changed its place among the re-scored results (``moved``: ``up`` or ``down``)."""

    recency: float
    accesses: int
    bonus: float
    moved: Literal["up", "down"] | None = None


@dataclass(frozen=True, slots=True)
class Hit:
    """One recall result and why it is here.

    ``lanes`` maps each lane that found the memory to its 1-based rank there (empty for a version added to
    complete a chain in a history answer). ``time`` is the time rule applied, if the query named a time.
    ``paths`` are entity-graph statements that led to it (``Hotel Aria —located_in→ Lisbon``). ``collapsed``
    are ids of near-duplicates folded into this result. ``via`` are ids of earlier versions of this memory
    that the lanes matched (their records, oldest last): the query found the chain through them, and the current
    version is shown. ``digest`` is set when the query matched a conversation's digest and this message of
    that conversation stands in its place (a digest is never shown as a source of truth over its messages).
    ``conflicts`` are ids of current memories the reader may read that a ``CONTRADICTS`` link ties to this one.
    """

    memory: Memory
    score: float
    lanes: dict[str, int]
    time: TimeMatch | None = None
    paths: tuple[str, ...] = ()
    collapsed: tuple[str, ...] = ()
    via: tuple[Memory, ...] = ()
    digest: str | None = None  # the id of the conversation digest whose match lifted this message here
    conflicts: tuple[str, ...] = ()
    salience: SalienceMatch | None = None  # set only when the recall asked for salience


class Recalled(list[Hit]):
    """Recall's results, best first (a plain list of ``Hit``), and how fresh they are: ``behind`` counts the
    committed changes the search indexes did not show yet when recall answered. 0 means every write
    acknowledged before the call was searchable; more means the projections are stalled or far behind (recall
    waited for them once, then answers at once while they make no progress) and newer writes may be missing."""

    def __init__(self, hits: Iterable[Hit] = (), *, behind: int = 0) -> None:
        super().__init__(hits)
        self.behind = behind


@dataclass(frozen=True, slots=True)
class MemoryRecord:
    """A memory with its whole version chain, oldest first (the memory itself included); the relations it
    recorded with their validity ("Ana —lives_in→ Lisbon [2023-03-01 → 2024-05-02]"), and the memories that
    contradict it (only those the reader may read)."""

    memory: Memory
    versions: tuple[Memory, ...]
    relations: tuple[str, ...] = ()
    contradicts: tuple[str, ...] = ()
    enrichment: str | None = None  # how the optional LLM pass went ("llm <model>: failed (...)"), if it ran


@dataclass(frozen=True, slots=True)
class Page:
    items: tuple[Memory, ...]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class ScopeInfo:
    id: str
    parent: str | None
    memories: int


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """Counts per store and the ids on which they disagree. ``ok`` only when there is no drift."""

    canonical_memories: int
    live_memories: int
    counts: dict[str, int]
    watermarks: dict[str, int]
    canonical_seq: int
    drift: dict[str, list[str]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(self.drift.values())


MAX_MESSAGES = 200  # per conversation_write call
MAX_CONVERSATION_ID_CHARS = 200
ROLES = ("user", "assistant", "system", "tool")


@dataclass(frozen=True, slots=True)
class MessageIn:
    """One message of a conversation handed over with ``Engine.write_conversation``. ``time``: when it was
    sent (default: when it is written); ``speaker``: who said it, by name; ``id``: the client's own message id,
    which keeps repeated words apart and makes re-sending it harmless."""

    role: str
    content: str
    time: datetime | None = None
    speaker: str | None = None
    id: str | None = None


@dataclass(frozen=True, slots=True)
class ConversationReceipt:
    """What ``write_conversation`` stored: one receipt per message, in the order given, and whether a digest is
    coming (the background consolidator builds it once the conversation is quiet)."""

    conversation: str
    messages: tuple[WriteReceipt, ...]
    digest: Literal["scheduled", "off"]
