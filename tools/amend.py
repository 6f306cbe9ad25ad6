"""``amend``: replace a memory with a corrected version; the old one is kept as history."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from storage.domain.models import MAX_CONTENT_CHARS, MAX_REASON_CHARS
from tools._spec import Caller, Hints, ToolSpec, blocking
from tools._wire import IsoTime, WireModel, short_id

if TYPE_CHECKING:
    from storage import Engine


class AmendIn(WireModel):
    id: str = Field(description="The id of the current memory to replace (from recall or memory_write).")
    content: str = Field(
        min_length=1, max_length=MAX_CONTENT_CHARS, description="The corrected, complete statement."
    )
    reason: str = Field(
        default="", max_length=MAX_REASON_CHARS, description="Why it changed, e.g. 'Ana moved to Lisbon'."
    )
    effective_at: IsoTime | None = Field(
        default=None,
        description="When the change took effect in the world (ISO 8601), if not now, e.g. '2024-10-01' for "
        "'works at Globex since 1 October'. The old version is valid until then, the new one from then: "
        "recall with as_of answers accordingly. Omitted, a past start the new content names ('since 1 October "
        "2025') is taken, else now.",
    )


class AmendOut(BaseModel):
    id: str = Field(description="The id of the new version (its first 12 hex characters).")
    supersedes: str = Field(description="The id of the version it replaced (now superseded).")
    scopes: list[str] = Field(description="The scopes of the new version (those of the old one).")
    valid_from: datetime = Field(
        description="When the new version took effect (effective_at, else a past start its content names, else "
        "now)."
    )
    also_supersedes: list[str] = Field(
        default_factory=list,
        description="Other memories the new version updated or ended, as a memory_write of the same text would "
        "(e.g. 'Ana works at Acme' once the new text says she works at Globex, or no longer at Acme).",
    )
    contradicts: list[str] = Field(
        default_factory=list, description="Memories the new version contradicts (both are kept and linked)."
    )
    superseded_by: str | None = Field(
        default=None,
        description="Set when another memory's value took effect after effective_at: the new version held from "
        "effective_at until then, and that memory is the current one (e.g. 'Ana works at Acme' valid from 2024, "
        "when the amend says she works at Globex from 2021).",
    )


async def amend(engine: Engine, caller: Caller, args: AmendIn) -> AmendOut:
    """Supersede the memory; recall returns the new version from now on."""
    receipt = await blocking(
        engine.amend,
        args.id,
        args.content,
        reason=args.reason,
        effective_at=args.effective_at,
        principal=caller.principal,
    )
    return AmendOut(
        id=short_id(receipt.id),
        supersedes=short_id(receipt.supersedes),
        scopes=list(receipt.scopes),
        valid_from=receipt.valid_from,
        also_supersedes=[short_id(i) for i in receipt.also_supersedes],
        contradicts=[short_id(i) for i in receipt.contradicts],
        superseded_by=short_id(receipt.superseded_by) if receipt.superseded_by else None,
    )


SPEC = ToolSpec(
    name="amend",
    title="Correct a memory",
    description=(
        "Replace a stored memory with a corrected or updated version, e.g. when a fact changed or was wrong. "
        "The old version stays in history (recall with include_history=true) and stops being returned by "
        "default. Use this instead of writing a second, contradicting memory. When the change happened earlier "
        "than now, pass effective_at. Relations of the old version whose two ends the new text still names are kept "
        "unless the new text ends them; the new version is reconciled against other memories as a write is."
    ),
    input_model=AmendIn,
    output_model=AmendOut,
    hints=Hints(read_only=False, destructive=False, idempotent=False),
    run=amend,
)
