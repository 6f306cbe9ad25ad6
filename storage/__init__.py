"""The domain: memories, the reconciler (the single write path), recall (the read path) and the stores.

The public surface is ``Engine`` and the records and errors below; store adapters are private modules.
"""

from storage.embedding import CachedEmbedder, Embedder, MiniLMEmbedder
from storage.engine import Engine, content_id
from storage.errors import (
    Ambiguous,
    Closed,
    Conflict,
    InvalidInput,
    MnemographError,
    NotFound,
    ScopeDenied,
    StorageUnavailable,
    StoreMismatch,
)
from storage.models import (
    AmendReceipt,
    EntityIn,
    Hit,
    Memory,
    MemoryKind,
    MemoryRecord,
    Page,
    Provenance,
    PurgeReceipt,
    RelationIn,
    RetireReceipt,
    ScopeInfo,
    Status,
    VerifyReport,
    WriteItem,
    WriteReceipt,
)
from storage.recall import RECIPES, Recipe

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
    "Hit",
    "InvalidInput",
    "Memory",
    "MemoryKind",
    "MemoryRecord",
    "MiniLMEmbedder",
    "MnemographError",
    "NotFound",
    "Page",
    "Provenance",
    "PurgeReceipt",
    "Recipe",
    "RelationIn",
    "RetireReceipt",
    "ScopeDenied",
    "ScopeInfo",
    "Status",
    "StorageUnavailable",
    "StoreMismatch",
    "VerifyReport",
    "WriteItem",
    "WriteReceipt",
    "content_id",
]
