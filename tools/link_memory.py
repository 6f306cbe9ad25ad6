"""``link_memory`` and ``unlink_memory``: share a memory with another scope, or withdraw it from one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from tools._spec import Caller, Hints, ToolSpec, blocking
from tools._wire import ScopeIdStr, WireModel, short_id

if TYPE_CHECKING:
    from storage import Engine


class LinkIn(WireModel):
    id: str = Field(description="The memory's id (or its first 8 or more characters).")
    scope: ScopeIdStr = Field(description="The scope, e.g. 'team:support'.")


class LinkOut(BaseModel):
    id: str
    scopes: list[str] = Field(description="Every scope the memory now belongs to (that you may see).")
    changed: bool = Field(description="False when the memory was already where you asked.")


async def link_memory(engine: Engine, caller: Caller, args: LinkIn) -> LinkOut:
    """Add the memory to the scope; it is the same memory in both, not a copy."""
    r = await blocking(engine.link, args.id, args.scope, principal=caller.principal)
    return LinkOut(id=short_id(r.id), scopes=list(r.scopes), changed=r.changed)


async def unlink_memory(engine: Engine, caller: Caller, args: LinkIn) -> LinkOut:
    """Remove the memory from the scope; it stays in its other scopes."""
    r = await blocking(engine.unlink, args.id, args.scope, principal=caller.principal)
    return LinkOut(id=short_id(r.id), scopes=list(r.scopes), changed=r.changed)


LINK = ToolSpec(
    name="link_memory",
    title="Share a memory with a scope",
    description=(
        "Make an existing memory also belong to another scope (for example share a finding with team:support). "
        "It stays one memory: amending or retiring it affects every scope. Needs write rights on the scope."
    ),
    input_model=LinkIn,
    output_model=LinkOut,
    hints=Hints(read_only=False, destructive=False, idempotent=True),
    run=link_memory,
)

UNLINK = ToolSpec(
    name="unlink_memory",
    title="Withdraw a memory from a scope",
    description=(
        "Remove a memory from one of its scopes; it stays in the others. A memory's last scope cannot be "
        "removed: retire the memory instead. Needs write rights on the scope."
    ),
    input_model=LinkIn,
    output_model=LinkOut,
    hints=Hints(read_only=False, destructive=False, idempotent=False),
    run=unlink_memory,
)
