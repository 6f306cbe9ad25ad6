"""``create_scope``: create a scope, optionally inside another (whose memories it then also reads)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from tools._spec import Caller, Hints, ToolSpec, blocking
from tools._wire import ScopeIdStr, WireModel

if TYPE_CHECKING:
    from storage import Engine


class CreateScopeIn(WireModel):
    scope: ScopeIdStr = Field(description="The scope to create, e.g. 'project:site' or 'agent:planner'.")
    parent: ScopeIdStr | None = Field(
        default=None,
        description="The scope to place it inside, e.g. 'user:ana'. Recall in the new scope then also reads "
        "the parent's memories. Omit for a top-level scope.",
    )


class CreateScopeOut(BaseModel):
    id: str = Field(description="The scope id.")
    parent: str | None = Field(description="The scope it sits inside.")
    memories: int = Field(description="How many current memories it holds.")


async def create_scope(engine: Engine, caller: Caller, args: CreateScopeIn) -> CreateScopeOut:
    """Create the scope (and the parent, if missing); never moves an existing scope (that is move_scope)."""
    info = await blocking(engine.create_scope, args.scope, args.parent, principal=caller.principal)
    return CreateScopeOut(id=info.id, parent=info.parent, memories=info.memories)


SPEC = ToolSpec(
    name="create_scope",
    title="Create a scope",
    description=(
        "Create a memory scope, optionally inside a parent scope (e.g. project:site inside user:ana): recall in "
        "a scope also reads the scopes it sits inside. Needs admin rights on the parent. Calling it again with "
        "the same arguments changes nothing; it never moves a scope that exists elsewhere (use move_scope). "
        "With a token, names that belong to others (another user's user: scope, a scope granted to another "
        "token) cannot be created: pick a name of your own."
    ),
    input_model=CreateScopeIn,
    output_model=CreateScopeOut,
    hints=Hints(read_only=False, destructive=False, idempotent=True),
    run=create_scope,
)
