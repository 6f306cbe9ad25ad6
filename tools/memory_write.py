"""``memory_write``: store one memory (a fact, event, preference, note, message or summary)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from storage.domain.models import (
    MAX_CONTENT_CHARS,
    MAX_ENTITIES,
    MAX_RELATIONS,
    MAX_SCOPES_PER_CALL,
    EntityIn,
    MemoryKind,
    RelationIn,
)
from tools._spec import Caller, Hints, ToolSpec, blocking
from tools._wire import EntityArg, IsoTime, RelationArg, ScopeIdStr, WireModel, short_id, short_ids

if TYPE_CHECKING:
    from storage import Engine


class MemoryWriteIn(WireModel):
    content: str = Field(
        min_length=1,
        max_length=MAX_CONTENT_CHARS,
        description="The memory itself: one self-contained statement that will make sense later without this "
        "conversation, e.g. 'Ana prefers morning meetings' rather than 'she likes mornings'.",
    )
    scopes: list[ScopeIdStr] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_SCOPES_PER_CALL,
        description="Where to store it, as scope ids like 'user:ana' or 'project:website'. Omit to use this "
        "session's default scope.",
    )
    kind: MemoryKind = Field(
        default=MemoryKind.NOTE,
        description="fact (true about the world), event (happened at a time), preference (someone's taste or "
        "choice), note, message (something said) or summary.",
    )
    event_time: IsoTime | None = Field(
        default=None, description="For events: when it happened (ISO 8601). Omit to read it from the content."
    )
    valid_from: IsoTime | None = Field(
        default=None,
        description="Since when the statement is true (ISO 8601). Omit for 'from now on'. A future date records "
        "a planned change: a value it replaces (where someone works, ...) stays current until then. To move a "
        "plan's date, write its same words again with the new valid_from.",
    )
    valid_to: IsoTime | None = Field(
        default=None, description="Until when it is true, if that is already known (ISO 8601)."
    )
    entities: list[EntityArg] | None = Field(
        default=None,
        max_length=MAX_ENTITIES,
        description="Entities the content mentions, if you know them (people, organizations, places, "
        "projects). Recall finds memories by these names; omit to let Mnemograph extract them.",
    )
    relations: list[RelationArg] | None = Field(
        default=None,
        max_length=MAX_RELATIONS,
        description="Statements between entities the content asserts, e.g. "
        "{subject: 'Ana Lima', predicate: 'works_at', object: 'Acme Corp'}.",
    )
    metadata: dict[str, Any] | None = Field(
        default=None, description="Small JSON object of your own labels; stored and returned as is."
    )
    on_near_duplicate: Literal["store", "report", "fold"] = Field(
        default="store",
        description="Whether to look for current memories in the same scope that already say this in other "
        "words: 'store' (default) stores without looking (fastest); 'report' stores and lists them in the "
        "receipt's near_duplicates; 'fold' lists them and, if there is one, stores nothing new and returns the "
        "existing memory's id with status 'folded'. Use 'fold' when you only restate something that may be "
        "remembered already (e.g. saving what the user said again); 'report' when you want to know what is "
        "already there; 'store' when your wording adds or changes anything. A negated, hypothetical, differently dated or "
        "numbered statement is never a near-duplicate, nor is a memory of another kind, event_time or valid_to, or one you say held from an earlier valid_from.",
    )


class NearDuplicate(BaseModel):
    id: str = Field(description="The existing memory's id.")
    similarity: float = Field(description="Cosine similarity of the two texts' embeddings (0.80 to 1).")


class MemoryWriteOut(BaseModel):
    id: str = Field(
        description="The memory's id (its first 12 hex characters); pass it to amend, retire or memory_read."
    )
    status: Literal["added", "duplicate", "linked", "folded"] = Field(
        description="added: a new memory (also the same words as a plan not begun yet, written with another "
        "valid_from: the plan moves to that date, and supersedes names the old one); duplicate: identical "
        "content was already stored in these scopes, and nothing changed (not its valid_from or metadata); "
        "linked: identical content existed elsewhere and now also belongs to these scopes; folded: "
        "on_near_duplicate='fold' found a memory saying the same in other words, nothing new was stored and "
        "id is that memory's (now also in these scopes)."
    )
    scopes: list[str] = Field(description="Every scope the memory now belongs to.")
    entities: list[str] = Field(description="The entities recorded as mentioned.")
    event_time: datetime | None = Field(
        default=None,
        description="When it happened, for events, messages and notes dated by you or their content; null for "
        "facts, preferences and undated notes, which hold over their validity instead.",
    )
    relations: list[str] = Field(
        default_factory=list, description="Statements recorded from it, e.g. 'Ana —lives_in→ Porto'."
    )
    supersedes: list[str] = Field(
        default_factory=list,
        description="Ids of memories this one updates (a new value for lives_in, works_at, job_title, ...): "
        "they leave default recall and stay in history.",
    )
    supersedes_later: list[str] = Field(
        default_factory=list,
        description="Ids of memories this one updates from its valid_from on, when that is later than now (a "
        "planned change): they stay current, and in default recall, until then; their validity ends there.",
    )
    superseded_by: str | None = Field(
        default=None,
        description="Set when this memory was older news than one already stored: it went straight to history.",
    )
    contradicts: list[str] = Field(
        default_factory=list,
        description="Ids of memories that conflict with this one; both are kept. If one is wrong, retire it "
        "or amend it.",
    )
    duplicates: list[str] = Field(
        default_factory=list, description="Ids of memories that already state the same relation."
    )
    near_duplicates: list[NearDuplicate] = Field(
        default_factory=list,
        description="Current memories in a target scope that say the same thing in other words ('I have a "
        "peanut allergy' for 'I'm allergic to peanuts'), nearest first; only looked for with "
        "on_near_duplicate='report' or 'fold'. If one is what you meant, retire the newer one.",
    )
    resolved: list[str] = Field(
        default_factory=list,
        description="Names linked to a known entity spelt differently ('Katherine Jonhson -> Katherine "
        "Johnson (fuzzy)'); the name you wrote became one of its aliases.",
    )
    proposals: list[str] = Field(
        default_factory=list,
        description="Ids of SAME_AS proposals this write raised: a name that may be a known entity. Review "
        "them with the entities tool; nothing was merged.",
    )
    not_proposed: list[str] = Field(
        default_factory=list,
        description="Pairs ('Jon Smith ~ John Smith') that may be one entity but were not proposed: a scope of "
        "this memory already holds the maximum of pending proposals. The memory and its names were stored as "
        "written. Decide pending proposals with the entities tool; a pair is proposed when next written.",
    )


async def memory_write(engine: Engine, caller: Caller, args: MemoryWriteIn) -> MemoryWriteOut:
    """Store the memory; identical content is not stored twice (the receipt says ``duplicate``)."""
    receipt = await blocking(
        engine.write,
        args.content,
        caller.scopes_or_default(args.scopes),
        kind=args.kind.value,
        event_time=args.event_time,
        valid_from=args.valid_from,
        valid_to=args.valid_to,
        entities=[EntityIn(e.name, e.type, tuple(e.aliases)) for e in args.entities or ()],
        relations=[RelationIn(r.subject, r.predicate, r.object) for r in args.relations or ()],
        metadata=args.metadata,
        principal=caller.principal,
        extractor=caller.extractor,
        on_near_duplicate=args.on_near_duplicate,
    )
    return MemoryWriteOut(
        id=short_id(receipt.id),
        status=receipt.status,
        scopes=list(receipt.scopes),
        entities=list(receipt.entities),
        event_time=receipt.event_time,
        relations=list(receipt.relations),
        supersedes=short_ids(receipt.supersedes),
        supersedes_later=short_ids(receipt.supersedes_later),
        superseded_by=short_id(receipt.superseded_by) if receipt.superseded_by else None,
        contradicts=short_ids(receipt.contradicts),
        duplicates=short_ids(receipt.duplicates),
        resolved=list(receipt.resolved),
        proposals=short_ids(receipt.proposals),
        not_proposed=list(receipt.not_proposed),
        near_duplicates=[NearDuplicate(id=short_id(i), similarity=c) for i, c in receipt.near_duplicates],
    )


SPEC = ToolSpec(
    name="memory_write",
    title="Remember",
    description=(
        "Store something worth remembering beyond this conversation: a fact, an event, a preference, a decision. "
        "Write one self-contained statement per call. Pass the entities and relations you already know; they "
        "make the memory findable by name (without them, names and common relations such as lives_in, "
        "works_at, likes or allergic_to are read from the text; negated, hypothetical, uncertain or reported "
        "statements are never recorded as facts; if the server enabled MCP sampling, your client may get a request, after this call returns, to read the memory's statements with its own model). A new value for a single-valued relation (where someone "
        "lives or works, a job title, phone, email) supersedes the old memory automatically; the receipt "
        "lists what was superseded, contradicted or duplicated. Pass on_near_duplicate='report' to also list "
        "near_duplicates (memories of the same scope that say the same in other words), or 'fold' when you "
        "restate something that may already be remembered: then nothing new is stored if one exists. To correct a specific "
        "memory, call amend with its id. Writing identical content again is harmless."
    ),
    input_model=MemoryWriteIn,
    output_model=MemoryWriteOut,
    hints=Hints(read_only=False, destructive=False, idempotent=True),
    run=memory_write,
)
