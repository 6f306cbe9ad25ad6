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


# A version chain has no length limit (each amend adds one), and each version may hold 32,000 characters: an
# answer carries at most this many versions, the ones nearest the memory asked for, so one read of a long chain
# cannot cost the server (or the caller's context) hundreds of megabytes.
MAX_VERSIONS_SHOWN = 20


class VersionsLeftOut(BaseModel):
    older: int = Field(
        description="Versions older than the oldest shown; memory_read the oldest shown to see them."
    )
    newer: int = Field(
        description="Versions newer than the newest shown; memory_read the newest shown to see them."
    )


class MemoryReadOut(BaseModel):
    memory: MemoryView = Field(description="The memory asked for.")
    versions: list[MemoryView] = Field(
        description=f"Its version chain, oldest first (the memory itself included): all of it, or the "
        f"{MAX_VERSIONS_SHOWN} versions nearest the memory asked for when the chain is longer."
    )
    versions_left_out: VersionsLeftOut | None = Field(
        default=None,
        description="How many versions of a longer chain are not in 'versions' (null when none is left out).",
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
        "and Claude's token cost; null when none is configured. A failure or a skip changed nothing. With "
        "Claude, also its reconcile decision, as counts ('decided by claude: updates 1, contradicts 1'); which "
        "memories: superseded_by, versions and contradicts.",
    )


async def memory_read(engine: Engine, caller: Caller, args: MemoryReadIn) -> MemoryReadOut:
    """Read the record; works for superseded and retired memories too."""
    record = await blocking(engine.read, args.id, principal=caller.principal)
    chain = list(record.versions)
    left_out = None
    if len(chain) > MAX_VERSIONS_SHOWN:
        at = next((i for i, m in enumerate(chain) if m.id == record.memory.id), len(chain) - 1)
        start = min(max(at - MAX_VERSIONS_SHOWN // 2, 0), len(chain) - MAX_VERSIONS_SHOWN)
        left_out = VersionsLeftOut(older=start, newer=len(chain) - start - MAX_VERSIONS_SHOWN)
        chain = chain[start : start + MAX_VERSIONS_SHOWN]
    return MemoryReadOut(
        memory=MemoryView.of(record.memory),
        versions=[MemoryView.of(m) for m in chain],
        versions_left_out=left_out,
        relations=list(record.relations),
        contradicts=list(record.contradicts),
        enrichment=record.enrichment,
    )


SPEC = ToolSpec(
    name="memory_read",
    title="Read a memory",
    description=(
        "Read one memory in full by id: content, validity, who wrote it and through which client, and its "
        "earlier and later versions (the 20 nearest it in a longer chain). Use it to explain where a remembered "
        "fact came from or how it changed."
    ),
    input_model=MemoryReadIn,
    output_model=MemoryReadOut,
    hints=Hints(read_only=True, destructive=False, idempotent=True),
    run=memory_read,
)
