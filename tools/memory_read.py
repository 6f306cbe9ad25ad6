"""``memory_read``: one memory in full, with its version chain and provenance."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from tools._spec import Caller, Hints, ToolSpec, blocking
from tools._wire import MemoryView, WireModel

if TYPE_CHECKING:
    from storage import Engine


class MemoryReadIn(WireModel):
    id: str = Field(description="A memory id as a tool showed it (12 characters), in full, or its first 8+.")


class MemoryReadOut(BaseModel):
    memory: MemoryView = Field(description="The memory asked for.")
    versions: list[MemoryView] = Field(
        description="Its whole version chain, oldest first (the memory itself included)."
    )
    relations: list[str] = Field(
        default_factory=list,
        description="Statements this memory recorded, with when each held: "
        "'Ana —lives_in→ Lisbon [2023-03-01 → 2024-05-02, ended by <id>]'; 'open' means still current.",
    )
    contradicts: list[str] = Field(
        default_factory=list,
        description="Ids of memories that conflict with this one (both are kept); read them to decide which holds.",
    )
    enrichment: str | None = Field(
        default=None,
        description="How the optional background model extraction went for this memory (Claude, or the "
        "writing client's own model through MCP sampling): pending, done, failed or skipped with the reason, "
        "and Claude's token cost; null when none is configured. A failure or a skip changed nothing.",
    )


async def memory_read(engine: Engine, caller: Caller, args: MemoryReadIn) -> MemoryReadOut:
    """Read the record; works for superseded and retired memories too."""
    record = await blocking(engine.read, args.id, principal=caller.principal)
    return MemoryReadOut(
        memory=MemoryView.of(record.memory),
        versions=[MemoryView.of(m) for m in record.versions],
        relations=list(record.relations),
        contradicts=list(record.contradicts),
        enrichment=record.enrichment,
    )


SPEC = ToolSpec(
    name="memory_read",
    title="Read a memory",
    description=(
        "Read one memory in full by id: content, validity, who wrote it and through which client, and every "
        "earlier and later version. Use it to explain where a remembered fact came from or how it changed."
    ),
    input_model=MemoryReadIn,
    output_model=MemoryReadOut,
    hints=Hints(read_only=True, destructive=False, idempotent=True),
    run=memory_read,
)
