"""The one exception tree of Mnemograph's domain. Each error carries a message the calling agent can act on.

The server maps these to MCP tool results in one place; nothing matches on message text.
"""

from __future__ import annotations


class MnemographError(Exception):
    """Base of every domain error. ``hint`` says what the caller can do next."""

    code = "error"

    def __init__(self, message: str, *, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}; {self.hint}" if self.hint else self.message


class InvalidInput(MnemographError):
    """An argument is malformed or out of range. Nothing was changed."""

    code = "invalid_input"


class NotFound(MnemographError):
    """No memory, scope or version matches what was asked for."""

    code = "not_found"


class Ambiguous(InvalidInput):
    """An id prefix matches more than one memory."""

    code = "ambiguous"


class Conflict(MnemographError):
    """The request contradicts the stored state (e.g. amending a memory that is already superseded)."""

    code = "conflict"


class ScopeDenied(MnemographError):
    """The principal lacks the grant this operation needs on a scope."""

    code = "scope_denied"


class StoreMismatch(MnemographError):
    """The data directory was built with another embedding model or schema and cannot be mixed."""

    code = "store_mismatch"


class StorageUnavailable(MnemographError):
    """A store cannot be read or written (disk full, read-only, locked by another process)."""

    code = "storage_unavailable"


class ProjectionDamaged(MnemographError):
    """A search index (a projection) in the data directory cannot be opened, and the open could not set it
    aside to rebuild it. The canonical store is intact; ``mnemograph reindex`` deletes and rebuilds the indexes."""

    code = "projection_damaged"


class CanonicalUnreachable(StorageUnavailable):
    """The shared canonical store (a FalkorDB server, for nodes that scale out) does not answer: nothing can be
    read or written until it is back. Same code as any unavailable store; the type lets a node say why."""


class StoreFailed(StorageUnavailable):
    """A commit could not reach disk (full, read-only, I/O error). The process must reopen the store, which
    recovers exactly the acknowledged writes; until then every operation fails with this error."""

    code = "storage_failed"


class Locked(StorageUnavailable):
    """Another process owns the data directory (it holds ``owner.lock``)."""

    code = "locked"


class Closed(StorageUnavailable):
    """The engine has been closed."""

    code = "closed"


class WriteRace(StorageUnavailable):
    """A write lost a race with another node sharing the canonical store (both created the same memory, scope
    or entity at once; the store's unique constraint refused the second). Nothing of it was kept; the writer
    runs the intent again against the new state, so callers see this only after repeated losses."""

    code = "write_race"
