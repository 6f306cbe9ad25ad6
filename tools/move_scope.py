"""``move_scope``: place an existing scope under another parent (or at the top level)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from tools._spec import Caller, Hints, ToolSpec, blocking
from tools._wire import ScopeIdStr, WireModel
from tools.create_scope import CreateScopeOut

if TYPE_CHECKING:
    from storage import Engine


class MoveScopeIn(WireModel):
    scope: ScopeIdStr = Field(description="The existing scope to move, e.g. 'project:site'.")
    parent: ScopeIdStr | None = Field(
        description="The scope to place it inside, e.g. 'team:web'; null moves it to the top level."
    )


async def move_scope(engine: Engine, caller: Caller, args: MoveScopeIn) -> CreateScopeOut:
    """Re-parent the scope: who reaches its memories, and which memories its recall reads, change."""
    info = await blocking(engine.move_scope, args.scope, args.parent, principal=caller.principal)
    return CreateScopeOut(id=info.id, parent=info.parent, memories=info.memories)


SPEC = ToolSpec(
    name="move_scope",
    title="Move a scope",
    description=(
        "Move an existing memory scope under another parent scope (or, with parent null, to the top level). "
        "This changes who can read the scope's memories (everyone granted on the new parent) and what recall "
        "in the scope reads (the new parent's memories instead of the old one's). Needs admin rights both "
        "where the scope is now and on the new parent. Only when the user asks to reorganise scopes."
    ),
    input_model=MoveScopeIn,
    output_model=CreateScopeOut,
    hints=Hints(read_only=False, destructive=True, idempotent=True),
    run=move_scope,
)
