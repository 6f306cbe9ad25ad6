"""Knowing when the owner is idle: no client attached and no request in flight for a while.

Attached clients are stdio sessions (one per socket connection) and HTTP fronts (one lease each); HTTP
requests count while they run, except the status probe itself (``/healthz``), so an idle owner reports 0.
Each front says who it is on its lease (pid, URL, which command), so ``mnemograph status`` can show what keeps
the owner up and ``stop`` can stop it too. Everything here runs on the owner's event loop: plain counters.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Iterator
from typing import Any

import anyio

KINDS = ("session", "front", "request")


class Activity:
    """Counts what keeps the owner alive; ``wait_idle`` returns once nothing has for ``idle_timeout`` seconds."""

    def __init__(self) -> None:
        self._counts = dict.fromkeys(KINDS, 0)
        self._fronts: dict[int, dict[str, Any]] = {}
        self._ids = itertools.count()
        self._changed = anyio.Event()
        self.last_change = time.monotonic()

    @property
    def busy(self) -> int:
        """How many sessions, leases and requests are active now."""
        return sum(self._counts.values())

    def count(self, kind: str) -> int:
        return self._counts[kind]

    def fronts(self) -> list[dict[str, Any]]:
        """What each HTTP front holding a lease said about itself (pid, url, command), oldest first."""
        return list(self._fronts.values())

    @contextlib.contextmanager
    def hold(self, kind: str = "request") -> Iterator[None]:
        """Count a session, lease or request for as long as the block runs."""
        self._bump(kind, +1)
        try:
            yield
        finally:
            self._bump(kind, -1)

    @contextlib.contextmanager
    def front(self, info: dict[str, Any]) -> Iterator[None]:
        """Count an HTTP front's lease, remembering what it said about itself while it lasts."""
        key = next(self._ids)
        self._fronts[key] = info
        try:
            with self.hold("front"):
                yield
        finally:
            del self._fronts[key]

    async def wait_idle(self, idle_timeout: float) -> None:
        """Return when nothing has been active for ``idle_timeout`` seconds in a row."""
        while True:
            changed = self._changed
            if self.busy:
                await changed.wait()
                continue
            with anyio.move_on_after(idle_timeout):
                await changed.wait()
            if not changed.is_set() and not self.busy:
                return

    def _bump(self, kind: str, delta: int) -> None:
        self._counts[kind] += delta
        self.last_change = time.monotonic()
        # Wake every waiter, then give later waiters a fresh event to wait on.
        self._changed.set()
        self._changed = anyio.Event()
