"""``recall``: the memories that best match a query, with which search lanes found each one."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from storage.models import MAX_K, MAX_QUERY_CHARS, MAX_SCOPES_PER_CALL, Hit, MemoryKind, Status
from tools._spec import Caller, Hints, ToolSpec, blocking
from tools._wire import IsoTime, ProvenanceView, ScopeIdStr, WireModel

if TYPE_CHECKING:
    from storage import Engine


class RecallIn(WireModel):
    query: str = Field(
        min_length=1,
        max_length=MAX_QUERY_CHARS,
        description="What you want to know, in words or names, e.g. 'where does Ana work' or 'Acme contract'.",
    )
    scopes: list[ScopeIdStr] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_SCOPES_PER_CALL,
        description="Scopes to search (each also reads the scopes it sits inside). Omit for this session's "
        "default scope (or, with an access token, every scope you may read).",
    )
    descendants: bool = Field(
        default=False,
        description="Also search every scope placed inside the given ones (e.g. a team's agents).",
    )
    k: int = Field(default=10, ge=1, le=MAX_K, description="How many results at most.")
    as_of: IsoTime | None = Field(
        default=None,
        description="Answer as of this time (ISO 8601): what was true then, including since-replaced facts.",
    )
    include_history: bool = Field(
        default=False, description="Also return superseded and retired memories (marked by their status)."
    )
    kinds: list[MemoryKind] | None = Field(default=None, description="Only these kinds of memory.")
    since: IsoTime | None = Field(
        default=None, description="Only memories whose event time is at or after this."
    )
    until: IsoTime | None = Field(default=None, description="Only memories whose event time is before this.")


class Lanes(BaseModel):
    """Which search lanes found a result, as its 1-based rank in each; null when that lane did not find it."""

    bm25: int | None = Field(description="Rank by exact words and names (full-text search).")
    vector: int | None = Field(description="Rank by meaning (semantic search).")
    graph: int | None = Field(description="Rank by entities and their relations (knowledge graph).")


class RecallItem(BaseModel):
    id: str = Field(description="The memory's id; pass it to amend, retire or memory_read.")
    content: str
    kind: MemoryKind
    score: float = Field(description="Fused relevance; higher is better. Only comparable within one recall.")
    lanes: Lanes
    scopes: list[str]
    status: Status = Field(description="current, superseded or retired (the last two only with history).")
    superseded_by: str | None = Field(description="The id of the newer version, when superseded.")
    event_time: datetime
    valid_from: datetime
    valid_to: datetime | None = Field(description="Null while the memory is still valid.")
    provenance: ProvenanceView = Field(description="Who wrote the memory, and through which client.")

    @classmethod
    def of(cls, hit: Hit) -> RecallItem:
        m = hit.memory
        return cls(
            id=m.id,
            content=m.content,
            kind=m.kind,
            score=hit.score,
            lanes=Lanes(
                bm25=hit.lanes.get("bm25"), vector=hit.lanes.get("vector"), graph=hit.lanes.get("graph")
            ),
            scopes=list(m.scopes),
            status=m.status,
            superseded_by=m.superseded_by,
            event_time=m.event_time,
            valid_from=m.valid_from,
            valid_to=m.valid_to,
            provenance=ProvenanceView(
                principal=m.provenance.principal, client=m.provenance.client, source=m.provenance.source
            ),
        )


class RecallOut(BaseModel):
    results: list[RecallItem] = Field(description="Best match first. Empty when nothing matches.")


async def recall(engine: Engine, caller: Caller, args: RecallIn) -> RecallOut:
    """Search; current memories only unless ``include_history`` or ``as_of`` asks for the past."""
    hits = await blocking(
        engine.recall,
        args.query,
        caller.read_scopes(args.scopes),
        k=args.k,
        as_of=args.as_of,
        include_history=args.include_history,
        kinds=[k.value for k in args.kinds] if args.kinds else None,
        since=args.since,
        until=args.until,
        descendants=args.descendants,
        principal=caller.principal,
    )
    return RecallOut(results=[RecallItem.of(h) for h in hits])


SPEC = ToolSpec(
    name="recall",
    title="Recall",
    description=(
        "Search long-term memory. Call it before answering anything that may depend on what you were told "
        "earlier (names, preferences, decisions, past events). Returns current memories only; superseded and "
        "retired ones appear only with include_history=true or as_of. Each result says which lanes found it."
    ),
    input_model=RecallIn,
    output_model=RecallOut,
    hints=Hints(read_only=True, destructive=False, idempotent=True),
    run=recall,
)
