"""``entities``: the SAME_AS proposals entity resolution raised; list them, accept, reject or undo a decision."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Literal, Self

from pydantic import BaseModel, Field, model_validator

from storage.domain.models import MAX_PROPOSAL_PAGE as PAGE_MAX
from tools._spec import Caller, Hints, ToolSpec, blocking
from tools._wire import WireModel, short_id

if TYPE_CHECKING:
    from storage import Engine
    from storage.domain.records import SameAs


class EntitiesIn(WireModel):
    action: Literal["list", "accept", "reject", "undo"] = Field(
        default="list",
        description="'list' shows proposals; 'accept' makes recall treat the two entities as one; 'reject' "
        "keeps them apart for good; 'undo' returns an accepted or rejected proposal to pending.",
    )
    id: str | None = Field(
        default=None,
        max_length=32,
        description="The proposal's id as 'list' shows it (needed by accept, reject and undo).",
    )
    status: Literal["pending", "accepted", "rejected", "all"] = Field(
        default="pending", description="Which proposals 'list' shows."
    )
    limit: int | None = Field(
        default=None,
        ge=1,
        le=PAGE_MAX,
        description=f"'list' only: at most this many proposals (default 50, at most {PAGE_MAX}).",
    )
    cursor: str | None = Field(
        default=None,
        max_length=200,
        description="'list' only: the next_cursor of the previous answer, for the next page.",
    )

    @model_validator(mode="after")
    def _id_matches_action(self) -> Self:
        if self.action != "list" and (self.limit is not None or self.cursor is not None):
            raise ValueError(f"'{self.action}' takes no limit or cursor: they page through 'list'")
        if self.action != "list" and not self.id:
            raise ValueError(f"'{self.action}' needs the proposal's id: call with action 'list' to see them")
        if self.action == "list" and self.id:
            raise ValueError(
                "'list' takes no id; to decide a proposal pass action 'accept', 'reject' or 'undo'"
            )
        return self


class ProposalOut(BaseModel):
    id: str
    name: str = Field(description="The entity a memory named.")
    same_as: str = Field(description="The known entity it may be.")
    tier: str = Field(
        description="How they matched: 'fuzzy' (spelling), 'phonetic' (sound), 'nickname' (a familiar form of a "
        "given name: 'Bob Fischer' beside 'Robert Fischer'), 'partial' (a lone surname, 'Okafor', of a known full "
        "name, 'Ngozi Okafor') or 'meaning' (close in meaning and sharing a word, when the server turns it on)."
    )
    score: float = Field(description="Name similarity, 0 to 1.")
    status: Literal["pending", "accepted", "rejected"]
    memory: str = Field(description="Id of the memory whose mention raised the proposal.")
    scopes: list[str] = Field(
        description="The scopes that memory was written to (those you may read): an accepted merge applies to "
        "recalls that read any of them."
    )
    created_at: datetime
    decided_at: datetime | None = None
    decided_by: str = ""


class EntitiesOut(BaseModel):
    proposals: list[ProposalOut] = Field(
        description="For 'list': the proposals you may see, oldest first, one page. Otherwise: the one you "
        "decided, as it now is."
    )
    next_cursor: str | None = Field(
        default=None,
        description="For 'list': more proposals follow; call 'list' again with this cursor (and the same "
        "status). Null on the last page.",
    )


def _out(p: SameAs) -> ProposalOut:
    return ProposalOut(
        id=short_id(p.id),
        name=p.a,
        same_as=p.b,
        tier=p.tier,
        score=p.score,
        status=p.status,  # type: ignore[arg-type]  # the store holds only these three
        memory=short_id(p.memory_id),
        scopes=list(p.scopes),
        created_at=p.created_at,
        decided_at=p.decided_at,
        decided_by=p.decided_by,
    )


async def entities(engine: Engine, caller: Caller, args: EntitiesIn) -> EntitiesOut:
    """List proposals, or decide one."""
    if args.action == "list":
        page = await blocking(
            engine.entity_proposal_page,
            args.status,
            limit=args.limit or 50,
            cursor=args.cursor,
            principal=caller.principal,
        )
        return EntitiesOut(proposals=[_out(p) for p in page.items], next_cursor=page.next_cursor)
    decided = await blocking(engine.decide_proposal, args.id or "", args.action, principal=caller.principal)
    return EntitiesOut(proposals=[_out(decided)])


SPEC = ToolSpec(
    name="entities",
    title="Review entity merges",
    description=(
        "When a memory names someone or something almost like a known entity ('Jon Smith' beside 'John "
        "Smith'), Mnemograph never merges them silently: a clear misspelling is linked to the known entity "
        "(the write receipt's 'resolved' says so), and an uncertain one becomes a pending SAME_AS proposal "
        "(its id is in the receipt's 'proposals'). List the proposals (a page at a time: follow 'next_cursor'), then accept one when both names are "
        "the same entity (recall by either name then finds memories about both), reject it when they differ "
        "(it is not proposed again), or undo a decision. Ask the user when unsure. You see only proposals "
        "about memories you may read; deciding needs write rights on the memory's scope."
    ),
    input_model=EntitiesIn,
    output_model=EntitiesOut,
    hints=Hints(read_only=False, destructive=False, idempotent=False),
    run=entities,
)
