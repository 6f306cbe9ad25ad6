"""Wire types shared by several tools: times, scope ids, entities, relations and the memory view.

Descriptions here are read by the calling model; they say what to send and what comes back.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    WithJsonSchema,
    model_validator,
)

from scopes import InvalidScopeId, ScopeId, ScopeKind
from storage.domain.models import MAX_NAME_CHARS, Memory, MemoryKind, Status


def _numeric(annotation: Any) -> bool:
    """An int or float field (optional or not) that takes no boolean."""
    if annotation in (int, float):
        return True
    options = get_args(annotation)
    return bool(options) and bool not in options and any(o in (int, float) for o in options)


def _parse_time(value: object) -> object:
    # Only ISO 8601 text (or a datetime from Python callers): a bare number is ambiguous (seconds? ms?), so it
    # is refused rather than guessed.
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str):
        raise ValueError("send a time as an ISO 8601 string, e.g. '2024-05-01T14:30:00Z' or '2024-05-01'")
    try:
        return datetime.fromisoformat(value.strip())
    except ValueError:
        raise ValueError(
            f"{value[:40]!r} is not an ISO 8601 time; send e.g. '2024-05-01T14:30:00Z' or '2024-05-01'"
        ) from None


def _as_utc(value: datetime) -> datetime:
    try:
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    except OverflowError:
        # The first day of year 1 east of UTC, or the last of year 9999 west of it: no datetime in UTC. A
        # ValueError makes it an invalid argument the caller can fix (an OverflowError was an internal error).
        raise ValueError(
            f"{value.isoformat()} is outside the years 1 to 9999 in UTC; send a time within them"
        ) from None


IsoTime = Annotated[
    datetime,
    BeforeValidator(_parse_time),
    AfterValidator(_as_utc),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]
"""An ISO 8601 time (date-only means midnight); without an offset it is taken as UTC."""


def _utc_if_naive(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


LocalIsoTime = Annotated[
    datetime,
    BeforeValidator(_parse_time),
    AfterValidator(_utc_if_naive),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]
"""An ISO 8601 time that keeps its UTC offset (the caller's local calendar matters); naive is UTC."""


def _scope_id(value: str) -> str:
    try:
        return str(ScopeId.parse(value))
    except InvalidScopeId as exc:
        raise ValueError(str(exc)) from None


_KINDS = "|".join(k.value for k in ScopeKind)
ScopeIdStr = Annotated[
    str,
    AfterValidator(_scope_id),
    # Published as a pattern for clients; enforced by ScopeId.parse, whose message says how to fix the id.
    Field(json_schema_extra={"pattern": f"^({_KINDS}):.+$", "examples": ["user:ana", "project:website"]}),
]
"""A scope id ``kind:name``; the kinds are user, agent, app, run, project, team, org."""


SHORT_ID_CHARS = 12
"""Hex characters of a memory id that tools show by default (docs/mcp.md, "Memory ids").

48 bits: among a million memories the chance that a given id's prefix is shared by another is 1e6 / 2**48
(about 4 in a billion), and the chance that any two of them share one is about 1e12 / 2 / 2**48 (0.2%). Every
tool takes the prefix back; one that has come to match two memories the caller may read is refused (naming
both full ids), never guessed. 12 hex characters cost about 7 tokens where the full 32 cost about 20.
"""


def short_id(mid: str) -> str:
    """The id as tools show it: its first ``SHORT_ID_CHARS`` characters (the full id with ``explain=true``, in
    ``memory_read`` and in ``erase``)."""
    return mid[:SHORT_ID_CHARS]


def short_ids(ids: Iterable[str]) -> list[str]:
    return [short_id(i) for i in ids]


class WireModel(BaseModel):
    """Base of every tool input: unknown fields are refused, so a misspelt argument is never silently dropped,
    and a JSON boolean is never taken for a number (pydantic reads ``true`` as 1 for an int field)."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _no_boolean_numbers(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for name, field in cls.model_fields.items():
                value = data.get(field.alias or name)
                if isinstance(value, bool) and _numeric(field.annotation):
                    raise ValueError(f"{name} must be a number, not {str(value).lower()}")
        return data


class EntityArg(WireModel):
    name: str = Field(
        max_length=MAX_NAME_CHARS, description="The entity's canonical name, e.g. 'Ana Lima' or 'Acme Corp'."
    )
    type: str = Field(
        default="thing",
        max_length=MAX_NAME_CHARS,
        description="What it is: person, organization, place, project, product, event, concept or thing.",
    )
    aliases: list[str] = Field(
        default_factory=list, max_length=16, description="Other names it goes by, e.g. ['Ana', 'A. Lima']."
    )


class RelationArg(WireModel):
    subject: str = Field(
        max_length=MAX_NAME_CHARS, description="Entity the statement is about, e.g. 'Ana Lima'."
    )
    predicate: str = Field(
        description="Short verb phrase in snake_case, e.g. 'works_at', 'lives_in', 'manages'."
    )
    object: str = Field(max_length=MAX_NAME_CHARS, description="The other entity, e.g. 'Acme Corp'.")


class ProvenanceView(BaseModel):
    principal: str = Field(description="Who wrote the memory.")
    client: str = Field(description="The MCP client it came through, when known.")
    source: str = Field(description="Where the content came from, when the writer said.")


class MemoryView(BaseModel):
    """A memory as stored: its content never changes, only its validity and status do."""

    id: str = Field(
        description="The memory's full id (32 hex characters; other tools show its first 12). Pass either to "
        "amend, retire or memory_read; erase's confirm needs this one."
    )
    content: str
    kind: MemoryKind
    status: Status = Field(description="current, superseded (amended; see superseded_by) or retired.")
    scopes: list[str] = Field(description="The scopes the memory belongs to.")
    entities: list[str] = Field(description="Entities the memory mentions.")
    provenance: ProvenanceView
    metadata: dict[str, Any]
    event_time: datetime = Field(description="When the event happened (or when it was recorded, if unknown).")
    event_time_source: Literal["caller", "content", "recorded"] = Field(
        description="Where event_time came from: given by the writer, read from the content, or the write time."
    )
    valid_from: datetime = Field(description="Since when the memory is true in the world.")
    valid_to: datetime | None = Field(
        description="Until when it is true; a date ahead is a known end (a planned change replaces it then); "
        "null when no end is known."
    )
    recorded_at: datetime = Field(description="When Mnemograph learned it.")
    retired_at: datetime | None = Field(description="When it was retired; null unless retired.")
    retire_reason: str
    supersedes: str | None = Field(description="The id of the version this one replaced, if any.")
    superseded_by: str | None = Field(
        description="The id of the version that replaced this one, if any (null also when you may not read it)."
    )

    @classmethod
    def of(cls, m: Memory) -> MemoryView:
        return cls(
            id=m.id,
            content=m.content,
            kind=m.kind,
            status=m.status,
            scopes=list(m.scopes),
            entities=list(m.entities),
            provenance=ProvenanceView(
                principal=m.provenance.principal, client=m.provenance.client, source=m.provenance.source
            ),
            metadata=m.metadata,
            event_time=m.event_time,
            event_time_source=m.event_time_source,
            valid_from=m.valid_from,
            valid_to=m.valid_to,
            recorded_at=m.recorded_at,
            retired_at=m.retired_at,
            retire_reason=m.retire_reason,
            # "" is a link to a version the reader may not see: shown as null (status still says superseded).
            supersedes=m.supersedes or None,
            superseded_by=m.superseded_by or None,
        )
