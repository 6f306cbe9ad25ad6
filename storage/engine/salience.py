"""Access counts for the salience rule: how often each principal's recalls returned each memory.

Counted in memory on the recall path (a dict update under a lock, no store round trip) and written to one small
file in the data directory by the reconciler's writer thread, in batches (``FLUSH_EVERY`` new accesses, or the
first recall after ``FLUSH_AFTER_S``), and at close. A crash loses at most the last unflushed batch: counts
only nudge ranking, so that is the price of keeping every write off the recall path.

Per principal: one principal's recalls never count for another's ranking (docs/recall.md, "Salience"), so
salience never tells anyone what someone else asked about. The counts are never shown to anyone but in the
caller's own explanation of its own result.

Erasure: the file is rewritten after an erase or purge keeping only memories still in the canonical store
(``retain``), through the writer, before the erasure returns; the rewrite replaces the file (new inode), so no
byte of an erased memory's id or count stays in any file under the data directory.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from storage._durable import fsync_directory

log = logging.getLogger("mnemograph")

ACCESS_FILE = "accesses.json"
FLUSH_EVERY = 64  # new accesses that make a batch
FLUSH_AFTER_S = 30.0  # an older unflushed access is flushed by the next recall however few there are
_VERSION = 1
MAX_COUNT = 1_000_000_000  # a count read from the file is at most this
# Memories counted per principal. Past it the least-returned are forgotten (down to KEEP_AFTER_PRUNE of it, so
# pruning is rare): the file, rewritten by the writer thread every FLUSH_EVERY accesses, stays under about
# 0.5 MB per principal however large the store, and what is forgotten is what salience weighs least.
MAX_PER_PRINCIPAL = 10_000
KEEP_AFTER_PRUNE = 0.9

Post = Callable[[Callable[[], None]], None]  # run a job on the writer thread, without waiting for it


class AccessCounts:
    """principal name -> memory id -> how often a recall by that principal returned the memory."""

    def __init__(self, path: Path, post: Post | None = None) -> None:
        self._path = path
        self._post = post
        self._lock = threading.Lock()
        self._file_lock = threading.Lock()  # one rewrite of the file at a time, each from a fresh snapshot
        self._counts: dict[str, dict[str, int]] = _load(path)
        self._pending = 0  # accesses counted since the last flush
        self._oldest: float | None = None  # monotonic time of the first unflushed access
        self._posted = False  # a flush is queued on the writer
        self._gone: set[str] = (
            set()
        )  # erased in this process: a recall that raced the erasure cannot add them

    def of(self, principal: str) -> Callable[[str], int]:
        """How often ``principal``'s recalls returned a memory (0 when never). Reads memory only."""

        def count(mid: str) -> int:
            with self._lock:
                return self._counts.get(principal, {}).get(mid, 0)

        return count

    def record(self, principal: str, ids: Iterable[str]) -> None:
        """Count one access of each of ``ids`` by ``principal``; queue a flush when a batch is due."""
        now = time.monotonic()
        with self._lock:
            mine = self._counts.setdefault(principal, {})
            for mid in ids:
                if mid in self._gone:
                    continue
                mine[mid] = mine.pop(mid, 0) + 1  # last in order: the most recently counted (see _prune)
                self._pending += 1
            if len(mine) > MAX_PER_PRINCIPAL:
                _prune(mine)
            if not self._pending:
                return
            if self._oldest is None:
                self._oldest = now
            due = self._pending >= FLUSH_EVERY or now - self._oldest >= FLUSH_AFTER_S
            if not due or self._posted or self._post is None:
                return
            self._posted = True
        try:
            self._post(self.flush)
        except Exception:  # the store is closing: close() flushes
            with self._lock:
                self._posted = False

    def flush(self) -> None:
        """Write the counts to the file (atomically: a new file renamed over the old) if any changed. Runs
        on the writer thread (or at close, when no other thread writes)."""
        with self._file_lock:
            with self._lock:
                self._posted = False
                if not self._pending:
                    return
                snapshot = {p: dict(c) for p, c in self._counts.items() if c}
                self._pending, self._oldest = 0, None
            _store(self._path, snapshot)

    def retain(self, keep: Callable[[str], bool]) -> None:
        """Forget every memory ``keep`` rejects (erased ones) and rewrite the file without them, at once."""
        with self._file_lock:
            with self._lock:
                for mine in self._counts.values():
                    for mid in [m for m in mine if not keep(m)]:
                        del mine[mid]
                        self._gone.add(mid)
                snapshot = {p: dict(c) for p, c in self._counts.items() if c}
                self._pending, self._oldest = 0, None
            _store(self._path, snapshot)

    def revive(self, ids: Iterable[str]) -> None:
        """``ids`` are stored (again): a memory written after the erasure of one with the same id (the same
        words) is counted like any other."""
        with self._lock:
            if self._gone:
                self._gone.difference_update(ids)

    def total(self) -> int:
        with self._lock:
            return sum(sum(c.values()) for c in self._counts.values())


def _load(path: Path) -> dict[str, dict[str, int]]:
    try:
        # Not through a link, nor from a FIFO or device planted at the path (a read that would never end).
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        log.warning("access counts in %s could not be read (%s); salience starts without them", path, exc)
        return {}
    try:
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise ValueError("not a regular file")
            raw = json.loads(f.read().decode("utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        # Counts only nudge ranking: a damaged file costs them, never the store (nested past the parser's
        # depth raises RecursionError, which would otherwise stop the store from opening).
        log.warning("access counts in %s could not be read (%s); salience starts without them", path, exc)
        return {}
    counts = raw.get("counts") if isinstance(raw, dict) else None
    if not isinstance(counts, dict):
        return {}
    # A count past MAX_COUNT (a hand-edited or hostile file) is read as MAX_COUNT: the rule saturates long
    # before, and an integer too large for a float would make every salience recall fail.
    loaded = {
        str(p): {str(m): min(n, MAX_COUNT) for m, n in c.items() if type(n) is int and n > 0}
        for p, c in counts.items()
        if isinstance(c, dict)
    }
    for mine in loaded.values():
        if len(mine) > MAX_PER_PRINCIPAL:  # a file from before the cap, or written by hand
            _prune(mine)
    return loaded


def _prune(mine: dict[str, int]) -> None:
    """Keep the ``KEEP_AFTER_PRUNE`` share of the cap most often returned (in place); ties keep the most
    recently counted (``record`` moves a counted memory to the end of the dict's order). Ties kept the earlier
    counted before: once the cap filled with memories returned once, the memory that overflowed it (the one
    just returned) was forgotten at once, and a new memory could build no count unless returned again before
    the next prune, while memories last returned long ago stayed for good."""
    keep = int(MAX_PER_PRINCIPAL * KEEP_AFTER_PRUNE)
    ranked = sorted(enumerate(mine.items()), key=lambda item: (-item[1][1], -item[0]))[:keep]
    ranked.sort()  # back in the order counted, so later prunes break ties the same way
    mine.clear()
    mine.update(item for _, item in ranked)


def _store(path: Path, counts: Mapping[str, Mapping[str, int]]) -> None:
    if not counts:
        path.unlink(missing_ok=True)
        return
    tmp = path.with_name(path.name + ".tmp")
    # Private from birth (0600, whatever the process umask) and never written through a link planted at the
    # temporary name: whatever is there is removed first, and the new file must be created here.
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        # In the order counted (not sorted): the next start breaks ties for the most recently counted too.
        json.dump({"version": _VERSION, "counts": counts}, f, separators=(",", ":"))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_directory(path.parent)
