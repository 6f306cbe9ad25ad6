"""The background consolidator: one thread that rebuilds the digest of each conversation that changed.

Its queue is the store itself (``pending``: conversations changed since their last digest), read again at every
wake-up, so work queued before a crash is found at the next start and nothing is held only in memory.
Debounced: a conversation is digested once it has been quiet for ``quiet`` seconds, so one still receiving
messages is digested after the burst, not on every message. A failing key (its build, or working out when it is
due, raises) is logged and retried a minute later (or when ``flush`` asks); the round goes on with the other
keys, so one poisoned key (a corrupt node, a hostile import) never stops every other digest. Never on the write
path: writes only ``notify``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

log = logging.getLogger("mnemograph.consolidate")

DEFAULT_QUIET_S = 10.0
RETRY_AFTER = timedelta(seconds=60)


class Consolidator:
    """Runs ``build(key)`` for every conversation ``pending()`` names, once it has been quiet long enough.
    ``build`` returns False when there was nothing to digest (a day with too few memories): not counted."""

    def __init__(
        self,
        pending: Callable[[], list[tuple[str, datetime]]],
        build: Callable[[str], bool | None],
        *,
        quiet: float = DEFAULT_QUIET_S,
        hold: Callable[[str, datetime], datetime | None] | None = None,
    ) -> None:
        self._pending, self._build = pending, build
        # key, changed_at -> not built before this time (a day digest waits for its day's end): None, no hold
        self._hold = hold or (lambda _key, _changed: None)
        self.quiet = quiet
        self._cond = threading.Condition()
        self._lock = threading.Lock()  # one build at a time (the worker's or a flush's)
        # key -> (changed_at whose build failed, when to try again): a store busy with an erasure's rewrite is
        # a passing fault; a bug is not hammered more than once a minute.
        self._failed: dict[str, tuple[datetime, datetime]] = {}
        self._wake_at: float | None = time.monotonic()  # when to read the store next (None: when notified)
        self._stopping = False
        self.builds = 0  # digests built since start (for tests and benchmarks)
        self._thread = threading.Thread(target=self._run, name="mnemograph-consolidate", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def notify(self) -> None:
        """A conversation changed (called after a commit). It cannot be due before ``quiet`` seconds, so the
        worker looks at the store again then, not now: a stream of messages costs no query per message."""
        with self._cond:
            at = time.monotonic() + self.quiet
            if self._wake_at is None or at < self._wake_at:
                self._wake_at = at
                self._cond.notify_all()

    def wake(self) -> None:
        """Look at the store now (the quiet time changed, say)."""
        with self._cond:
            self._wake_at = time.monotonic()
            self._cond.notify_all()

    def flush(self) -> int:
        """Digest every pending conversation now, whatever its quiet time (also ones whose build failed).
        Returns how many were built. Runs in the caller's thread."""
        done = 0
        self._failed.clear()
        for _ in range(3):  # a conversation written to during the flush is taken again
            keys = [k for k, _ in self._pending()]
            if not keys:
                break
            for key in keys:
                done += self._one(key, None)
        return done

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Block until no conversation is pending (True), or ``timeout`` seconds pass (False). Does not hurry the
        quiet time: with a long one, this waits for it."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._waiting(), timeout)

    def _waiting(self) -> list[str]:
        """What is pending and not held back to a later time (a day digest of a day still running, a key
        whose last try failed and waits for its retry)."""
        now = datetime.now(UTC)
        out = []
        for key, changed in self._pending():
            failed = self._failed.get(key)
            if failed is not None and failed[0] == changed and failed[1] > now:
                continue
            until = self._held(key, changed)
            if until is None or until <= now:
                out.append(key)
        return out

    def _held(self, key: str, changed: datetime) -> datetime | None:
        """``hold(key, changed)``; a key it fails on is taken as failed (retried after ``RETRY_AFTER``), so
        one bad key delays only itself (and is not tried, nor logged, again before then)."""
        failed = self._failed.get(key)
        if failed is not None and failed[0] == changed and failed[1] > datetime.now(UTC):
            return failed[1]
        try:
            return self._hold(key, changed)
        except Exception:
            log.exception("working out when a digest is due failed; retried later")
            retry = datetime.now(UTC) + RETRY_AFTER
            self._failed[key] = (changed, retry)
            return retry

    def close(self) -> None:
        """Stop after the build in flight; what is still pending stays pending in the store."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join()

    def _one(self, key: str, changed: datetime | None) -> int:
        with self._lock:
            try:
                made = self._build(key)
            except Exception:
                log.exception("building the digest of a conversation failed; retried when it changes")
                if changed is not None:
                    self._failed[key] = (changed, datetime.now(UTC) + RETRY_AFTER)
                return 0
            if made is False:
                return 0
            self.builds += 1
            return 1

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopping and (self._wake_at is None or time.monotonic() < self._wake_at):
                    left = None if self._wake_at is None else self._wake_at - time.monotonic()
                    self._cond.wait(timeout=left)
                if self._stopping:
                    return
                self._wake_at = None
            try:
                delay = self._round()
            except Exception:
                log.exception("reading the conversations to digest failed")
                delay = max(self.quiet, 1.0)
            with self._cond:
                if delay is not None:
                    at = time.monotonic() + delay
                    self._wake_at = at if self._wake_at is None else min(self._wake_at, at)
                self._cond.notify_all()  # for wait_idle

    def _round(self) -> float | None:
        """Build what is due; the seconds until the next conversation becomes due (None: nothing waits)."""
        now = datetime.now(UTC)
        quiet = timedelta(seconds=self.quiet)
        later: list[float] = []
        for key, changed in self._pending():
            if self._stopping:
                return None
            due = changed + quiet
            until = self._held(key, changed)
            if until is not None:
                due = max(due, until)
            failed = self._failed.get(key)
            if failed is not None and failed[0] == changed:
                due = max(due, failed[1])
            if due <= now:
                self._one(key, changed)
            else:
                later.append((due - now).total_seconds())
        return min(later) if later else None
