"""``retire``: mark a memory as no longer true, without replacing it."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from storage.domain.models import MAX_REASON_CHARS
from tools._spec import Caller, Hints, ToolSpec, blocking
from tools._wire import IsoTime, WireModel, short_id

if TYPE_CHECKING:
    from storage import Engine


class RetireIn(WireModel):
    id: str = Field(description="The id of the memory that is no longer true.")
    reason: str = Field(
        default="", max_length=MAX_REASON_CHARS, description="Why, e.g. 'the project was cancelled'."
    )
    effective_at: IsoTime | None = Field(
        default=None,
        description="When it stopped being true in the world (ISO 8601), if not now, e.g. '2024-06-30'. "
        "recall with as_of before that time still finds it.",
    )


class RetireOut(BaseModel):
    id: str
    retired_at: datetime = Field(description="When it was retired.")
    valid_to: datetime = Field(description="When it stopped being true.")


async def retire(engine: Engine, caller: Caller, args: RetireIn) -> RetireOut:
    """Close the memory's validity (now, or at ``effective_at``); it leaves default recall but stays in history."""
    receipt = await blocking(
        engine.retire, args.id, reason=args.reason, at=args.effective_at, principal=caller.principal
    )
    return RetireOut(id=short_id(receipt.id), retired_at=receipt.retired_at, valid_to=receipt.valid_to)


SPEC = ToolSpec(
    name="retire",
    title="Retire a memory",
    description=(
        "Mark a memory as no longer true when nothing replaces it (a cancelled plan, a preference the user "
        "dropped). It stops appearing in recall but stays in history; a cancelled planned change (written with a "
        "future valid_from) also leaves what it was to replace current with no end. To change a memory, use "
        "amend instead."
    ),
    input_model=RetireIn,
    output_model=RetireOut,
    hints=Hints(read_only=False, destructive=False, idempotent=True),
    run=retire,
)
