"""The domain: memories, the reconciler (the single write path), recall (the read path) and the stores.

The public surface is ``Engine`` (wired in ``storage.compose``) and the records and errors below; the
sub-packages are described in docs/architecture.md.
Records and errors import eagerly (cheap); the engine and embedders load on first use, because importing
lancedb, tantivy and kuzu costs over a second and must stay off the MCP handshake path.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from storage.domain.errors import (
    Ambiguous,
    Closed,
    Conflict,
    InvalidInput,
    Locked,
    MnemographError,
    NotFound,
    ProjectionDamaged,
    ScopeDenied,
    StorageUnavailable,
    StoreFailed,
    StoreMismatch,
)
from storage.domain.models import (
    AmendReceipt,
    EntityIn,
    EraseReceipt,
    Hit,
    LinkReceipt,
    Memory,
    MemoryKind,
    MemoryRecord,
    Page,
    Provenance,
    PurgeReceipt,
    Recalled,
    RelationIn,
    RetireReceipt,
    ScopeInfo,
    Status,
    VerifyReport,
    WriteItem,
    WriteReceipt,
)

if TYPE_CHECKING:
    from storage.adapters.embedder import CachedEmbedder, MiniLMEmbedder
    from storage.compose import Engine
    from storage.engine.state import content_id
    from storage.ports.embedder import Embedder
    from storage.recall.recipes import RECIPES, Recipe

_LAZY = {
    "Engine": "storage.compose",
    "content_id": "storage.engine.state",
    "CachedEmbedder": "storage.adapters.embedder",
    "Embedder": "storage.ports.embedder",
    "MiniLMEmbedder": "storage.adapters.embedder",
    "RECIPES": "storage.recall.recipes",
    "Recipe": "storage.recall.recipes",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'storage' has no attribute {name!r}")


__all__ = [
    "RECIPES",
    "Ambiguous",
    "AmendReceipt",
    "CachedEmbedder",
    "Closed",
    "Conflict",
    "Embedder",
    "Engine",
    "EntityIn",
    "EraseReceipt",
    "Hit",
    "InvalidInput",
    "LinkReceipt",
    "Locked",
    "Memory",
    "MemoryKind",
    "MemoryRecord",
    "MiniLMEmbedder",
    "MnemographError",
    "NotFound",
    "Page",
    "ProjectionDamaged",
    "Provenance",
    "PurgeReceipt",
    "Recalled",
    "Recipe",
    "RelationIn",
    "RetireReceipt",
    "ScopeDenied",
    "ScopeInfo",
    "Status",
    "StorageUnavailable",
    "StoreFailed",
    "StoreMismatch",
    "VerifyReport",
    "WriteItem",
    "WriteReceipt",
    "content_id",
]
