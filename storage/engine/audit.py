"""The audit log: one JSON line per change (who, what, when), appended to ``DATA/audit.jsonl``.

It records writes, amends, retires, links, unlinks, purges, scope changes and grant changes: the principal,
the client, the operation, memory ids, scope ids and counts. Never content. Memory ids are hashes of the content
(a low-entropy content can be brute-forced from one), so an erasure replaces every id it erased with one random
erasure reference (``redact``): the events stay, linked to each other and to the erase or purge event, but to
nothing that can be computed from the content. It lives outside Kùzu so that the token CLI can append grant
changes while an owner process holds the store's lock; each event is one ``write`` on a file opened with
``O_APPEND`` under an exclusive ``flock``, so lines from several processes never interleave and none is lost
to a concurrent ``redact``.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import threading
from collections.abc import Callable, Sequence
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
            while True:
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                    if _same_file(fd, self.path):
                        os.write(fd, line)
                        return
                finally:
                    os.close(fd)
                # ``redact`` replaced the file while we waited for its lock: append to the new one.

    def redact(self, kept: Callable[[str], bool]) -> str:
        """Replace every memory id in past events for which ``kept`` is false (the memory no longer exists: it
        was erased) with one new random reference, which it returns for the erase or purge event. Deciding by
        what exists rather than by a list makes a redaction interrupted by a crash complete at the next one.
        The file is rewritten beside itself and renamed over it; the old bytes go with the old file. Cost: one
        pass over the log."""
        ref = "erased-" + secrets.token_hex(8)
        with self._lock:
            try:
                fd = os.open(self.path, os.O_RDWR)
            except FileNotFoundError:
                return ref
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                with open(self.path, "rb") as fh:
                    lines = fh.read().splitlines(keepends=True)
                out = bytearray()
                for raw in lines:
                    out += _redact_line(raw, kept, ref)
                tmp = self.path.with_name(self.path.name + ".tmp")
                tmp_fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                try:
                    os.write(tmp_fd, bytes(out))
                    os.fsync(tmp_fd)
                finally:
                    os.close(tmp_fd)
                tmp.replace(self.path)
            finally:
                os.close(fd)
        return ref

    def events(self) -> list[dict[str, Any]]:
        """Every event so far, oldest first (for tests and `mnemograph audit`-style tooling)."""
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in text.splitlines() if line.strip()]


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except FileNotFoundError:
        return False


def _redact_line(raw: bytes, kept: Callable[[str], bool], ref: str) -> bytes:
    try:
        event = json.loads(raw)
    except ValueError:
        return raw  # not ours to judge (a torn line from a crash): kept as it is
    ids = event.get("ids") if isinstance(event, dict) else None
    if not ids or all(i.startswith("erased-") or kept(i) for i in ids):
        return raw
    event["ids"] = [i if i.startswith("erased-") or kept(i) else ref for i in ids]
    return (json.dumps(event, ensure_ascii=False, sort_keys=True) + "\n").encode()
