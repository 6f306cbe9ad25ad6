"""``recall``: the memories that best match a query, in a compact form a model can read, with a reason each.

The default answer is what a model needs to use a memory: content (long content cut, with a pointer to
``memory_read``), id, kind, when, status, scopes and a one-line reason. ``explain=true`` adds the full
explanation (fused score, each lane's rank, the time rule, entity-graph paths, matched earlier versions,
folded near-duplicates, provenance and both time axes). docs/recall.md describes every field and rule.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, model_serializer

from storage.domain.models import (
    MAX_K,
    MAX_QUERY_CHARS,
    MAX_SCOPES_PER_CALL,
    MAX_TOKEN_BUDGET,
    Hit,
    Memory,
    MemoryKind,
    Status,
    TimeMatch,
)
from tools._spec import Caller, Hints, ToolSpec, blocking
from tools._wire import (
    SHORT_ID_CHARS,
    IsoTime,
    LocalIsoTime,
    ProvenanceView,
    ScopeIdStr,
    WireModel,
    short_id,
)

if TYPE_CHECKING:
    from storage import Engine

DEFAULT_TOKEN_BUDGET = 2_000  # about 8,000 characters of content: ten short memories, or a few long ones cut
CUT_CHARS = 1_000  # longer content is cut here (about 250 tokens), with a pointer to memory_read
CHARS_PER_TOKEN = 4  # the engine's token estimate (storage/recall/pipeline.py, kept off the handshake path)
SNIPPET_CHARS = 60  # of an earlier version quoted in a reason
WHY_RANKS = 10  # a lane is named in a reason when it ranked the result at least this high


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
    k: int = Field(
        default=10,
        ge=1,
        le=MAX_K,
        description="How many results at most. Fewer come back when the rest score far below the best one.",
    )
    as_of: IsoTime | None = Field(
        default=None,
        description="Answer on valid time (ISO 8601): what was true at that time, as known now, including "
        "since-replaced facts (an amend's effective_at counts).",
    )
    known_at: IsoTime | None = Field(
        default=None,
        description="Answer on transaction time (ISO 8601): what this memory believed at that time, before "
        "any later correction (a planned change cancelled or moved since still counts as planned then). Combine "
        "with as_of for 'what did we think then about that date'.",
    )
    include_history: bool = Field(
        default=False, description="Also return superseded and retired memories (marked by their status)."
    )
    kinds: list[MemoryKind] | None = Field(default=None, description="Only these kinds of memory.")
    since: IsoTime | None = Field(
        default=None,
        description="Only memories whose event time (events, messages, dated notes; facts and preferences "
        "have none, use as_of for them) is at or after this.",
    )
    until: IsoTime | None = Field(default=None, description="Only memories whose event time is before this.")
    now: LocalIsoTime | None = Field(
        default=None,
        description="The current date and time of the conversation, ISO 8601 with the user's UTC offset, e.g. "
        "'2024-05-30T18:00:00+05:30'. Pass it whenever the query speaks of relative times ('yesterday', "
        "'last Tuesday', 'in May', 'two weeks ago'): they are resolved against it, in that offset, and "
        "events and messages from that time rank higher. Default: the server's clock, in UTC.",
    )
    token_budget: int = Field(
        default=DEFAULT_TOKEN_BUDGET,
        ge=1,
        le=MAX_TOKEN_BUDGET,
        description="At most this many tokens of memory content in the results (characters / 4; a long "
        f"memory counts as its first {CUT_CHARS} characters, which is all that is shown, or fewer when the "
        "budget is smaller: the best result is always shown, cut to fit). Results that do not fit are left "
        "out, best ones kept.",
    )
    group_by: str | None = Field(
        default=None,
        min_length=1,
        max_length=100,
        description="A metadata key your memories share per conversation (e.g. 'session'): rank each "
        "conversation as a whole and list its best turns together. Omit to rank memories one by one.",
    )
    salience: bool | None = Field(
        default=None,
        strict=True,
        description="true: give recent memories (by event time, or by validity start for facts; half-life 30 "
        "days by default) and those your own recalls keep returning a small bonus after ranking: it breaks "
        "near-ties and lifts a result a few places, never over a clearly better match. false: rank by the "
        "query alone. Omit for the server's default (off unless MNEMOGRAPH_RECALL_SALIENCE=on). Only your "
        "own recalls count, and no one else sees them.",
    )
    explain: bool = Field(
        default=False,
        description="Add the full explanation to each result: score, each search lane's rank, time rule, "
        "entity-graph paths, matched earlier versions, folded near-duplicates, provenance and time axes; "
        "ids are then given in full (32 hex characters).",
    )


def _compact(model: BaseModel, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
    # Optional fields that are empty are left out of the answer: a model pays for every byte it reads.
    data = handler(model)
    return {k: v for k, v in data.items() if v is not None}


class Lanes(BaseModel):
    """Which search lanes found a result, as its 1-based rank in each; absent when that lane did not."""

    bm25: int | None = Field(default=None, description="Rank by exact words and names (full-text search).")
    vector: int | None = Field(default=None, description="Rank by meaning (semantic search).")
    graph: int | None = Field(
        default=None, description="Rank by entities and their relations (knowledge graph)."
    )

    @model_serializer(mode="wrap")
    def _ser(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _compact(self, handler)


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


class SalienceView(BaseModel):
    """How salience (``salience=true``) scored this result."""

    recency: float = Field(description="1 for now, 0.5 one half-life ago (event time, else validity start).")
    accesses: int = Field(description="How often your own earlier recalls returned this memory.")
    bonus: float = Field(description="What was added to the fused score.")
    moved: Literal["up", "down"] | None = Field(
        default=None, description="Whether salience changed its place (absent: it did not)."
    )

    @model_serializer(mode="wrap")
    def _ser(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _compact(self, handler)


class Explanation(BaseModel):
    """Everything about how a result was found (``explain=true``)."""

    score: float = Field(description="Fused relevance, 4 significant digits; comparable within one recall.")
    lanes: Lanes
    time: TimeRuleView | None = Field(
        default=None, description="How the query's time expression matched this memory's event time."
    )
    paths: list[str] = Field(
        default_factory=list,
        description="Entity-graph statements that led here, e.g. 'Hotel Aria —located_in→ Lisbon —in→ Portugal'; "
        "absent when none did.",
    )
    via: list[str] = Field(
        default_factory=list,
        description="Ids of earlier versions of this memory that matched the query; absent when none did.",
    )
    digest: str | None = Field(
        default=None, description="The conversation digest whose match brought this message here, if any."
    )
    collapsed: list[str] = Field(
        default_factory=list,
        description="Ids of near-duplicate memories folded into this result; absent when none were.",
    )
    salience: SalienceView | None = Field(
        default=None, description="Present when the recall asked for salience (salience=true)."
    )
    provenance: ProvenanceView = Field(description="Who wrote the memory, and through which client.")
    event_time: datetime | None = Field(
        default=None, description="When it happened (events, messages, and notes given a time)."
    )
    valid_from: datetime
    valid_to: datetime | None = Field(
        default=None,
        description="When it stops (or stopped) being valid; may be ahead (a planned change). Absent: no end known.",
    )
    recorded_at: datetime = Field(description="When Mnemograph learned it (transaction time).")
    superseded_by: str | None = Field(default=None, description="The id of the newer version, if any.")

    @model_serializer(mode="wrap")
    def _ser(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # The lists too (try14 F9): docs/recall.md promises that empty fields are left out.
        return {k: v for k, v in _compact(self, handler).items() if v != []}


class RecallItem(BaseModel):
    id: str = Field(
        description=f"The memory's id, its first {SHORT_ID_CHARS} hex characters (all 32 with explain=true); "
        "pass it to memory_read, amend, retire or link_memory."
    )
    content: str = Field(
        description=f"The memory. Content over {CUT_CHARS} characters is cut, ending with a note on how many "
        "characters were left out: call memory_read with the id for the whole text."
    )
    kind: MemoryKind
    when: str = Field(
        description="For events and messages, when it happened ('2023-05-23T15:00Z'); for facts, preferences "
        "and undated notes, their validity ('since 2024-10-01', '2024-01-01 to 2024-10-01')."
    )
    status: Status | None = Field(
        default=None,
        description="superseded or retired (only in history answers); absent for a current memory.",
    )
    scopes: list[str] | None = Field(
        default=None,
        description="The scopes it belongs to; absent when that is only the one scope searched.",
    )
    why: str = Field(
        description="One line on why it is here: the lanes that ranked it in their first 10 (else its best), "
        "with ranks, and the entity-graph path, the time rule, or the earlier version the query matched; "
        "'conflicts with <id>' when a current memory contradicts it."
    )
    conflicts_with: list[str] | None = Field(
        default=None,
        description="Ids of current memories that contradict this one (both were kept when the second was "
        "written); absent when none does. Weigh them before relying on either: memory_read shows both, and "
        "amend or retire the wrong one when you know which it is.",
    )
    explain: Explanation | None = Field(default=None, description="Present with explain=true.")

    @model_serializer(mode="wrap")
    def _ser(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _compact(self, handler)

    @classmethod
    def of(
        cls,
        hit: Hit,
        explain: bool,
        searched: list[str] | None = None,
        digest: bool = False,
        cut: int = CUT_CHARS,
        derived: str | None = None,
    ) -> RecallItem:
        """``searched``: the scopes the call named (or its session default); a memory only in the one scope
        searched does not repeat it. ``cut``: content longer than this many characters is cut. ``derived``: the
        relation the derived memory that lifted this one here derives (``storage.engine.derived``)."""
        m = hit.memory
        return cls(
            id=m.id if explain else short_id(m.id),
            content=_cut(m.content, cut),
            kind=m.kind,
            when=when(m),
            status=None if m.status == Status.CURRENT else m.status,
            scopes=None
            if searched is not None and [*m.scopes] == searched and len(searched) == 1
            else [*m.scopes],
            why=reason(hit, digest, derived),
            conflicts_with=[i if explain else short_id(i) for i in hit.conflicts] or None,
            explain=_explanation(hit) if explain else None,
        )


class RecallOut(BaseModel):
    results: list[RecallItem] = Field(
        description="Best match first. Empty when nothing matches; weak matches are left out (docs/recall.md)."
    )
    stale: bool = Field(
        default=False,
        description="True when the search indexes lagged behind the store, so the newest writes may be "
        "missing from results; warning says more. Absent (false) otherwise.",
    )
    warning: str | None = Field(
        default=None,
        description="Set when stale (what may be missing and what to do about it), when group_by named a "
        "metadata key that no result has, or when nothing was found in a scope that does not exist.",
    )

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        # The answer's models leave empty fields out through wrap serializers, which would publish the output
        # schema as a bare object; the validation-mode schema describes every field (empty ones not required).
        kwargs["mode"] = "validation"
        return super().model_json_schema(*args, **kwargs)

    @model_serializer(mode="wrap")
    def _ser(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # An answer from up-to-date indexes says nothing about staleness (29 bytes less for every answer).
        data = handler(self)
        return {k: v for k, v in data.items() if k == "results" or v}


def _stale_warning(behind: int) -> str:
    return (
        f"The search indexes are {behind} change(s) behind the store (they are stalled or rebuilding), so "
        "the most recent writes may be missing from these results. memory_read finds a memory by id at once; "
        "recall again later for a complete answer."
    )


def _cut(text: str, cut: int = CUT_CHARS) -> str:
    if len(text) <= cut:
        return text
    return f"{text[:cut]}… [{len(text) - cut:,} more characters: memory_read this id for all]"


def _cut_chars(token_budget: int) -> int:
    """Where content is cut: at ``CUT_CHARS``, or sooner when the whole budget is smaller, so that any one
    result fits the budget and the best one is never left out for being long (a budget below one long
    memory used to answer nothing although memories matched)."""
    return max(1, min(CUT_CHARS, token_budget * CHARS_PER_TOKEN))


def _t(t: datetime) -> str:
    """A compact UTC time: the date alone at midnight, else to the minute."""
    if (t.hour, t.minute, t.second, t.microsecond) == (0, 0, 0, 0):
        return t.strftime("%Y-%m-%d")
    return t.strftime("%Y-%m-%dT%H:%MZ")


def _day(t: datetime) -> str:
    return t.strftime("%Y-%m-%d")


def when(m: Memory) -> str:
    """An event's time, or a fact's validity, in one short string. Validity is told to the day (the hour a
    fact was written rarely matters; explain=true has the instants), unless it began and ended on one day."""
    if m.has_event_time:
        return _t(m.event_time)
    if m.valid_to is None:
        return f"since {_day(m.valid_from)}"
    show = _t if m.valid_from.date() == m.valid_to.date() else _day
    return f"{show(m.valid_from)} to {show(m.valid_to)}"


def _snippet(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= SNIPPET_CHARS else line[: SNIPPET_CHARS - 1] + "…"


def reason(hit: Hit, digest: bool = False, derived: str | None = None) -> str:
    """The one-line reason: lanes with ranks, then the strongest extra evidence."""
    ranks = sorted(hit.lanes.items(), key=lambda x: x[1])
    # A lane that ranked it far down says little: the lanes that ranked it in their first WHY_RANKS are named,
    # else its best one (explain=true has every lane's rank).
    shown = [(lane, rank) for lane, rank in ranks if rank <= WHY_RANKS] or ranks[:1]
    parts = [", ".join(f"{lane} #{rank}" for lane, rank in shown)]
    if hit.via:
        old = hit.via[0]
        parts.append(
            f"matched earlier version {short_id(old.id)} ('{_snippet(old.content)}'), now replaced by this"
        )
    if hit.digest and derived:
        parts.append(f"source of the derived relation {derived} ({short_id(hit.digest)}), which matched")
    elif hit.digest:
        whose = "conversation's" if hit.memory.kind == "message" else "day's or week's"  # storage.enrich.days
        parts.append(f"its {whose} digest {short_id(hit.digest)} matched")
    if digest:  # the engine's own record, not metadata a writer could set
        meta = hit.memory.metadata
        count, noun = (
            (meta.get("messages"), "messages") if "messages" in meta else (meta.get("memories"), "memories")
        )
        parts.append(
            f"digest built by Mnemograph from {count if count is not None else '?'} {noun} (the sources "
            "are in memory_read's metadata; they, not this, are the record)"
        )
    if hit.paths:
        parts.append(f"graph path {max(hit.paths, key=len)}")
    if hit.time is not None and hit.time.rule != "outside_interval":
        where = "in" if hit.time.rule == "in_interval" else "near"
        parts.append(f"time {where} '{hit.time.expression}' x{hit.time.factor:g}")
    if hit.salience is not None and hit.salience.moved == "up":
        sal = hit.salience
        used = f", returned by {sal.accesses} of your recalls" if sal.accesses else ""
        parts.append(f"salience moved it up (recency {sal.recency:.2f}{used})")
    if hit.conflicts:
        parts.append(f"conflicts with {', '.join(short_id(i) for i in hit.conflicts)}")
    text = "; ".join(p for p in parts if p)
    return text or "completes a version chain"


def _explanation(hit: Hit) -> Explanation:
    m = hit.memory
    return Explanation(
        score=float(f"{hit.score:.4g}"),
        lanes=Lanes(bm25=hit.lanes.get("bm25"), vector=hit.lanes.get("vector"), graph=hit.lanes.get("graph")),
        time=TimeRuleView.of(hit.time) if hit.time else None,
        paths=list(hit.paths),
        via=[v.id for v in hit.via],
        digest=hit.digest,
        collapsed=list(hit.collapsed),
        salience=SalienceView(
            recency=hit.salience.recency,
            accesses=hit.salience.accesses,
            bonus=float(f"{hit.salience.bonus:.4g}"),
            moved=hit.salience.moved,
        )
        if hit.salience
        else None,
        provenance=ProvenanceView(
            principal=m.provenance.principal, client=m.provenance.client, source=m.provenance.source
        ),
        event_time=m.event_time if m.has_event_time else None,
        valid_from=m.valid_from,
        valid_to=m.valid_to,
        recorded_at=m.recorded_at,
        superseded_by=m.superseded_by or None,  # "": a newer version the caller may not read
    )


def _derived(engine: Engine, hit: Hit) -> str | None:
    """The derived relation whose match lifted ``hit`` here, with the two memories it is derived from."""
    d = engine.derived_relation(hit.digest) if hit.digest else None
    return None if d is None else f"{d.statement}, derived from {short_id(d.first)} and {short_id(d.second)}"


async def recall(engine: Engine, caller: Caller, args: RecallIn) -> RecallOut:
    """Search; current memories only unless ``include_history``, ``as_of`` or ``known_at`` asks for the past."""
    searched = caller.read_scopes(args.scopes)
    cut = _cut_chars(args.token_budget)
    hits = await blocking(
        engine.recall,
        args.query,
        searched,
        k=args.k,
        as_of=args.as_of,
        known_at=args.known_at,
        include_history=args.include_history,
        kinds=[k.value for k in args.kinds] if args.kinds else None,
        since=args.since,
        until=args.until,
        descendants=args.descendants,
        now=args.now,
        token_budget=args.token_budget,
        cut_chars=cut,
        group_by=args.group_by,
        principal=caller.principal,
        salience=args.salience,
    )
    behind = hits.behind
    warnings = [_stale_warning(behind)] if behind else []
    if args.group_by and hits and not any(args.group_by in h.memory.metadata for h in hits):
        warnings.append(_ungrouped_warning(args.group_by))
    if (
        not hits
        and args.scopes
        and (missing := engine.missing_scopes(args.scopes, principal=caller.principal))
    ):
        warnings.append(
            f"No scope {', '.join(missing)} exists: nothing was ever written there. Check the name "
            "(list_scopes shows the scopes you can read), or leave scopes out to search your default ones."
        )
    return RecallOut(
        results=[
            RecallItem.of(h, args.explain, searched, engine.is_digest(h.memory.id), cut, _derived(engine, h))
            for h in hits
        ],
        stale=behind > 0,
        warning=" ".join(warnings) or None,
    )


def _ungrouped_warning(key: str) -> str:
    # A misspelt key groups nothing: every memory is then its own group, which changes the ranking silently.
    return (
        f"No result has the metadata key {key!r} given as group_by, so each memory was ranked on its own. "
        "Check the key's spelling (it is a key of the metadata you wrote with memory_write) or leave group_by out."
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
        "current date as now. Each result is compact: content (long ones cut: memory_read the id for all), "
        "id, kind, when, a one-line reason, status unless current, scopes unless only the one searched, and "
        "conflicts_with when a current memory contradicts it (weigh both before answering); "
        "explain=true adds the full explanation. "
        "salience=true gives recent memories and those your recalls keep returning a small lift "
        "(the reason says when it moved one). "
        "Results far weaker than the best are left out; token_budget (default 2000) caps what you read."
    ),
    input_model=RecallIn,
    output_model=RecallOut,
    hints=Hints(read_only=True, destructive=False, idempotent=True),
    run=recall,
)
