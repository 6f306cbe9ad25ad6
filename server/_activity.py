"""Knowing when the owner is idle: no client attached and no request in flight for a while.

Attached clients are stdio sessions (one per socket connection) and HTTP fronts (one lease each); HTTP
requests count while they run. Everything here runs on the owner's event loop, so plain counters suffice.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import anyio


class Activity:
    """Counts what keeps the owner alive; ``wait_idle`` returns once nothing has for ``idle_timeout`` seconds."""

    def __init__(self) -> None:
        self._busy = 0
        self._changed = anyio.Event()
        self.last_change = time.monotonic()

    @property
    def busy(self) -> int:
        """How many sessions, leases and requests are active now."""
        return self._busy

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        """Count a session, lease or request for as long as the block runs."""
        self._bump(+1)
        try:
            yield
        finally:
            self._bump(-1)

    async def wait_idle(self, idle_timeout: float) -> None:
        """Return when nothing has been active for ``idle_timeout`` seconds in a row."""
        while True:
            changed = self._changed
            if self._busy:
                await changed.wait()
                continue
            with anyio.move_on_after(idle_timeout):
                await changed.wait()
            if not changed.is_set() and not self._busy:
                return

    def _bump(self, delta: int) -> None:
        self._busy += delta
        self.last_change = time.monotonic()
        # Wake every waiter, then give later waiters a fresh event to wait on.
        self._changed.set()
        self._changed = anyio.Event()
