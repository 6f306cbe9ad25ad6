"""Records the canonical store and the engine exchange (no I/O): what a write creates, what a projection
needs, entities and relations as the graph holds them, and one change-log entry."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from storage.domain.models import EntityIn, MemoryKind, Provenance


def entity_key(name: str) -> str:
    """Entities are identified by their case-folded, whitespace-collapsed name."""
    return " ".join(name.casefold().split())


@dataclass(frozen=True, slots=True)
class NewMemory:
    id: str
    content: str
    kind: MemoryKind
    provenance: Provenance
    metadata: dict[str, Any]
    event_time: datetime
    event_time_source: str
    valid_from: datetime
    valid_to: datetime | None
    recorded_at: datetime
    vector: Sequence[float]
    supersedes: str | None = None


@dataclass(frozen=True, slots=True)
class NewRow:
    """A new memory with the scopes that hold it and the entities it mentions (``insert_many``)."""

    memory: NewMemory
    scopes: Sequence[str]
    entities: Sequence[EntityIn]


@dataclass(frozen=True, slots=True)
class ProjectionRow:
    """What the derived stores need of one memory."""

    id: str
    content: str
    kind: str
    scopes: tuple[str, ...]
    live: bool
    event_time: datetime
    vector: list[float]


@dataclass(frozen=True, slots=True)
class KnownEntity:
    id: str
    name: str
    aliases: tuple[str, ...]
    mentions: int
    relations: int
    mentions_in: tuple[tuple[str, int], ...] = ()  # (scope, memories there mentioning it)


@dataclass(frozen=True, slots=True)
class SameAs:
    """A ``SAME_AS`` proposal between two entities (``a``, the one a write named; ``b``, the known one it may be):
    ``pending`` until someone accepts or rejects it; ``accepted`` makes recall in ``scopes`` (the target scopes
    of the write that raised it) treat both as one entity. ``memory_id`` is the memory whose mention raised
    it: erasing that memory takes the proposal with it."""

    id: str
    a: str
    b: str
    tier: str
    score: float
    memory_id: str
    status: str
    created_at: datetime
    decided_at: datetime | None = None
    decided_by: str = ""
    scopes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Relation:
    """One RELATES edge seen from an entity: ``outgoing`` when that entity is the subject. Both ends are named
    as the recording memory spelt them (``own_name`` the entity it is seen from), never by the Entity node's
    display name, which may be the spelling another scope stored (docs/security.md)."""

    predicate: str
    memory_id: str
    other_id: str
    other_name: str
    outgoing: bool
    scopes: tuple[str, ...] = ()  # the recording memory's scopes (who may follow the edge)
    own_name: str = ""


@dataclass(frozen=True, slots=True)
class OpenRelation:
    """A RELATES edge still valid, as reconciliation sees it: the memory that recorded it and its scopes."""

    predicate: str
    object_id: str
    object_name: str
    memory_id: str
    valid_from: datetime | None
    recorded_at: datetime
    scopes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RelationState:
    """A relation a memory recorded, its ends named as that memory spelt them, with its validity."""

    subject: str
    predicate: str
    object: str
    memory_id: str
    valid_from: datetime | None
    valid_to: datetime | None
    ended_by: str | None


@dataclass(frozen=True, slots=True)
class Change:
    seq: int
    op: str
    memory_id: str
