"""``recall``: the memories that best match a query, with which search lanes found each one."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from storage.models import (
    MAX_K,
    MAX_QUERY_CHARS,
    MAX_SCOPES_PER_CALL,
    MAX_TOKEN_BUDGET,
    Hit,
    MemoryKind,
    Status,
    TimeMatch,
)
from tools._spec import Caller, Hints, ToolSpec, blocking
from tools._wire import IsoTime, LocalIsoTime, ProvenanceView, ScopeIdStr, WireModel

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
    now: LocalIsoTime | None = Field(
        default=None,
        description="The current date and time of the conversation, ISO 8601 with the user's UTC offset, e.g. "
        "'2024-05-30T18:00:00+05:30'. Pass it whenever the query speaks of relative times ('yesterday', "
        "'last Tuesday', 'in May', 'two weeks ago'): they are resolved against it, in that offset, and "
        "memories from that time rank higher. Default: the server's clock, in UTC.",
    )
    token_budget: int | None = Field(
        default=None,
        ge=1,
        le=MAX_TOKEN_BUDGET,
        description="At most this many tokens of memory content in the results (estimated as characters / 4). "
        "Set it to what you can afford to read; results that do not fit are left out, best ones kept.",
    )


class Lanes(BaseModel):
    """Which search lanes found a result, as its 1-based rank in each; null when that lane did not find it."""

    bm25: int | None = Field(description="Rank by exact words and names (full-text search).")
    vector: int | None = Field(description="Rank by meaning (semantic search).")
    graph: int | None = Field(description="Rank by entities and their relations (knowledge graph).")


class TimeRuleView(BaseModel):
    """How the query's time expression moved this result."""

    rule: Literal["in_interval", "near_interval", "outside_interval"] = Field(
        description="in_interval: the memory's event time is inside the window the query names; "
        "near_interval: outside it, boosted less the farther it is; outside_interval: too far, not boosted."
    )
    expression: str = Field(description="The time expression in the query, e.g. 'last Tuesday'.")
    interval: list[datetime | None] = Field(
        description="[start, end) of that window, resolved against now; null for an open end."
    )
    factor: float = Field(description="What the fused score was multiplied by.")

    @classmethod
    def of(cls, t: TimeMatch) -> TimeRuleView:
        return cls(rule=t.rule, expression=t.expression, interval=list(t.interval), factor=t.factor)


class RecallItem(BaseModel):
    id: str = Field(description="The memory's id; pass it to amend, retire or memory_read.")
    content: str
    kind: MemoryKind
    score: float = Field(description="Fused relevance; higher is better. Only comparable within one recall.")
    lanes: Lanes
    scopes: list[str]
    status: Status = Field(description="current, superseded or retired (the last two only with history).")
    superseded_by: str | None = Field(
        description="The id of the newer version, when superseded (null also when you may not read it)."
    )
    event_time: datetime
    valid_from: datetime
    valid_to: datetime | None = Field(description="Null while the memory is still valid.")
    time: TimeRuleView | None = Field(
        description="Set when the query names a time: how this memory's event time matched it."
    )
    paths: list[str] = Field(
        description="Entity-graph statements that led here, e.g. 'Hotel Aria —located_in→ Lisbon —in→ Portugal'."
    )
    collapsed: list[str] = Field(description="Ids of near-duplicate memories folded into this result.")
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
            superseded_by=m.superseded_by or None,  # "": a newer version the caller may not read
            event_time=m.event_time,
            valid_from=m.valid_from,
            valid_to=m.valid_to,
            time=TimeRuleView.of(hit.time) if hit.time else None,
            paths=list(hit.paths),
            collapsed=list(hit.collapsed),
            provenance=ProvenanceView(
                principal=m.provenance.principal, client=m.provenance.client, source=m.provenance.source
            ),
        )


class RecallOut(BaseModel):
    results: list[RecallItem] = Field(description="Best match first. Empty when nothing matches.")
    stale: bool = Field(
        default=False,
        description="True when the search indexes lagged behind the store, so the newest writes may be "
        "missing from results; warning says more.",
    )
    warning: str | None = Field(
        default=None, description="Set when stale: what may be missing and what to do about it."
    )


def _stale_warning(behind: int) -> str:
    return (
        f"The search indexes are {behind} change(s) behind the store (they are stalled or rebuilding), so "
        "the most recent writes may be missing from these results. memory_read finds a memory by id at once; "
        "recall again later for a complete answer."
    )


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
        now=args.now,
        token_budget=args.token_budget,
        principal=caller.principal,
    )
    behind = hits.behind
    return RecallOut(
        results=[RecallItem.of(h) for h in hits],
        stale=behind > 0,
        warning=_stale_warning(behind) if behind else None,
    )


SPEC = ToolSpec(
    name="recall",
    title="Recall",
    description=(
        "Search long-term memory. Call it before answering anything that may depend on what you were told "
        "earlier (names, preferences, decisions, past events). Returns current memories only; superseded and "
        "retired ones appear with include_history=true or as_of, and automatically when the query asks about "
        "change ('used to', 'previously', 'what did I use before'), each version chain oldest first. "
        "When the query speaks of relative times ('last Tuesday', 'two weeks ago'), pass the conversation's "
        "current date as now; set token_budget to what you can afford to read. Each result says why it is "
        "there: which lanes found it, the time rule applied, and the entity-graph paths that led to it."
    ),
    input_model=RecallIn,
    output_model=RecallOut,
    hints=Hints(read_only=True, destructive=False, idempotent=True),
    run=recall,
)
