"""The audit log: one JSON line per change (who, what, when), appended to ``DATA/audit.jsonl``.

It records writes, amends, retires, links, unlinks, purges, scope changes and grant changes: the principal,
the client, the operation, memory ids, scope ids and counts. Never content: a purge must leave no byte of what
it erased, and the log is outside the stores a purge rewrites. It lives outside Kùzu so that the token CLI can
append grant changes while an owner process holds the store's lock; each event is one ``write`` on a file
opened with ``O_APPEND``, so lines from several processes never interleave.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

AUDIT_FILE = "audit.jsonl"


class AuditLog:
    """Appends events to ``path``. Thread-safe; cheap enough to call after every commit."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def record(
        self,
        op: str,
        *,
        principal: str,
        client: str = "",
        ids: Sequence[str] = (),
        scopes: Sequence[str] = (),
        **details: Any,
    ) -> None:
        """Append one event. ``details`` must be small values (counts, statuses, grant strings), never content."""
        event = {
            "ts": datetime.now(UTC).isoformat(timespec="microseconds"),
            "principal": principal,
            "client": client,
            "op": op,
            "ids": list(ids),
            "scopes": list(scopes),
            **details,
        }
        line = (json.dumps(event, ensure_ascii=False, sort_keys=True) + "\n").encode()
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)

    def events(self) -> list[dict[str, Any]]:
        """Every event so far, oldest first (for tests and `mnemograph audit`-style tooling)."""
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in text.splitlines() if line.strip()]
