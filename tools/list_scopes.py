"""``list_scopes``: the scopes that exist, how they nest, and how many memories each holds."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from tools._spec import Caller, Hints, ToolSpec, blocking
from tools._wire import WireModel

if TYPE_CHECKING:
    from storage import Engine


class ListScopesIn(WireModel):
    pass


class ScopeView(BaseModel):
    id: str = Field(description="The scope id, e.g. 'user:ana'.")
    parent: str | None = Field(
        description="The scope it sits inside, whose memories it also reads (null if none, or not yours to see)."
    )
    memories: int = Field(description="How many current memories it holds.")


class ListScopesOut(BaseModel):
    default_scopes: list[str] = Field(description="Where memory_write and recall go when you name no scope.")
    scopes: list[ScopeView]


async def list_scopes(engine: Engine, caller: Caller, args: ListScopesIn) -> ListScopesOut:
    """Every scope the caller may read, sorted by id."""
    infos = await blocking(engine.list_scopes, principal=caller.principal)
    return ListScopesOut(
        default_scopes=list(caller.default_scopes),
        scopes=[ScopeView(id=s.id, parent=s.parent, memories=s.memories) for s in infos],
    )


SPEC = ToolSpec(
    name="list_scopes",
    title="List scopes",
    description=(
        "List the memory scopes you may read (user:…, project:…, agent:…, team:…), how they nest and how many "
        "memories each holds, plus the default scope of this session. Use it to pick the right scope before "
        "writing or recalling."
    ),
    input_model=ListScopesIn,
    output_model=ListScopesOut,
    hints=Hints(read_only=True, destructive=False, idempotent=True),
    run=list_scopes,
)
