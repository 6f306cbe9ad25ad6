"""Building records for the contract tests: a new memory with a real embedding, and the byte needles an
erasure must leave nowhere."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import numpy as np

from storage import content_id
from storage.adapters._half import stored_bytes
from storage.domain.models import MemoryKind, Provenance
from storage.domain.records import NewMemory
from storage.ports.embedder import Embedder

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def canary(label: str = "CANARY") -> str:
    return f"{label}{uuid.uuid4().hex.upper()}"


def new_memory(
    embedder: Embedder, content: str, *, at: datetime = T0, supersedes: str | None = None
) -> NewMemory:
    return NewMemory(
        id=content_id(content),
        content=content,
        kind=MemoryKind.FACT,
        provenance=Provenance("contract", "pytest", "suite"),
        metadata={"k": "v"},
        event_time=at,
        event_time_source="recorded",
        valid_from=at,
        valid_to=None,
        recorded_at=at,
        vector=[float(x) for x in embedder.embed([content])[0]],
        supersedes=supersedes,
    )


def needles(vector: np.ndarray | list[float], memory_id: str) -> dict[str, bytes]:
    """Byte patterns that would betray a memory: its vector's floats (float32 little- and big-endian, and the
    half-precision numbers the local stores write, from the start and the middle), its first floats as text (a server that logs queries verbatim writes them so)
    and its id (hex, upper-case hex, raw bytes)."""
    v32 = np.asarray(vector, dtype="<f4")
    half = stored_bytes(v32)  # as the local stores keep it: float16 scaled by a power of two
    return {
        "vector half": half[:32],
        "vector half middle": half[360:392],
        "vector text": ", ".join(str(float(x)) for x in v32[:3]).encode(),
        "vector f32": v32[:16].tobytes(),
        "vector f32 middle": v32[180:196].tobytes(),
        "vector f32 big-endian": v32[:16].astype(">f4").tobytes(),
        "id hex": memory_id.encode(),
        "id HEX": memory_id.upper().encode(),
        "id raw": bytes.fromhex(memory_id),
    }
