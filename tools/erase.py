"""``erase``: forget one memory for real (a right-to-be-forgotten request), with every version of it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from storage.domain.models import MAX_REASON_CHARS
from tools._spec import Caller, Hints, ToolSpec, blocking
from tools._wire import WireModel

if TYPE_CHECKING:
    from storage import Engine


class EraseIn(WireModel):
    id: str = Field(description="The id of the memory to erase (its full id or its first 8+ characters).")
    confirm: str = Field(description="The memory's full 32-character id, to confirm the erasure is intended.")
    reason: str = Field(
        default="", max_length=MAX_REASON_CHARS, description="Why, e.g. 'the user asked to forget it'."
    )


class EraseOut(BaseModel):
    id: str
    erased: list[str] = Field(
        description="Every memory that was erased: this one and all its versions (amendments, re-assertions)."
    )
    entities_deleted: int = Field(description="Entities no remaining memory mentions.")
    per_store: dict[str, int] = Field(description="Records removed from each store.")


async def erase(engine: Engine, caller: Caller, args: EraseIn) -> EraseOut:
    """Delete the memory and its versions from every store and file; irreversible."""
    receipt = await blocking(
        engine.erase, args.id, confirm=args.confirm, reason=args.reason, principal=caller.principal
    )
    return EraseOut(
        id=receipt.id,
        erased=list(receipt.erased),
        entities_deleted=receipt.entities_deleted,
        per_store=dict(receipt.per_store),
    )


SPEC = ToolSpec(
    name="erase",
    title="Erase a memory",
    description=(
        "Permanently erase one memory and every version of it (earlier and later amendments) from every store, "
        "leaving no copy on disk. Irreversible; only for an explicit request to forget something (right to be "
        "forgotten). To mark a memory as no longer true, use retire instead. Administrators only."
    ),
    input_model=EraseIn,
    output_model=EraseOut,
    hints=Hints(read_only=False, destructive=True, idempotent=True),
    run=erase,
)
