"""``purge``: erase a whole scope for real, from every store and file."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from tools._spec import Caller, Hints, ToolSpec, blocking
from tools._wire import ScopeIdStr, WireModel

if TYPE_CHECKING:
    from storage import Engine


class PurgeIn(WireModel):
    scope: ScopeIdStr = Field(description="The scope to erase, e.g. 'run:2024-05-01-trial'.")
    confirm: str = Field(description="Repeat the scope id exactly, to confirm the deletion is intended.")


class PurgeOut(BaseModel):
    scope: str
    memories_deleted: int = Field(description="Memories that were only in this scope and are now gone.")
    memories_unlinked: int = Field(description="Memories shared with other scopes; they remain there.")
    entities_deleted: int = Field(description="Entities no remaining memory mentions.")
    per_store: dict[str, int] = Field(description="Records removed from each store.")


async def purge(engine: Engine, caller: Caller, args: PurgeIn) -> PurgeOut:
    """Delete the scope's memories irreversibly; shared memories only lose this scope."""
    receipt = await blocking(engine.purge, args.scope, confirm=args.confirm, principal=caller.principal)
    return PurgeOut(
        scope=receipt.scope,
        memories_deleted=receipt.memories_deleted,
        memories_unlinked=receipt.memories_unlinked,
        entities_deleted=receipt.entities_deleted,
        per_store=dict(receipt.per_store),
    )


SPEC = ToolSpec(
    name="purge",
    title="Erase a scope",
    description=(
        "Permanently erase every memory that belongs only to one scope (memories shared with other scopes just "
        "leave it). This cannot be undone and leaves no copy on disk. Only call it when the user explicitly asks "
        "to forget a scope; to drop a single memory use retire."
    ),
    input_model=PurgeIn,
    output_model=PurgeOut,
    hints=Hints(read_only=False, destructive=True, idempotent=True),
    run=purge,
)
