"""Giving the canonical store's free space back to the file system, beside live traffic.

Kùzu never shrinks its file: pages freed at a checkpoint (a column chunk that outgrew its place is written anew)
are reused by later writes but stay in the file, and a store filled by many commits keeps about 40% of its file
free (docs/benchmarks/scale.md). The rewrite that makes an erasure physical (``CanonicalStore.rebuild``: export,
import into a new file, switch in a pause of milliseconds) also drops every free page, so the compactor runs it
when the free part is both large and a large share of the file. It looks after each maintenance of the
projections (the reconciler's ``after_maintain``), in a thread of its own: the rewrite takes seconds (about 0.5 ms
per memory) that neither the writer nor the projector may spend.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractContextManager

from storage.domain.errors import StorageUnavailable
from storage.ports.canonical import CanonicalStore, FileSpace

log = logging.getLogger("mnemograph.compaction")

# Rewrite once at least this many bytes of the canonical file are free pages ...
MIN_FREE_BYTES = 32 << 20
# ... and they are at least this share of the file: the rewrite's cost (proportional to the store) is then paid
# at most once per this much growth of waste, and a store that churns a little never rewrites.
MIN_FREE_SHARE = 1 / 3
# Checkpoint first when the log holds at least this much (the store folds it after a commit at 16 MiB).
CHECKPOINT_LOG_BYTES = 1 << 20
# Start only with this many times the file's used bytes free on its file system, and this much more: the export
# and the new file are written beside the old one (``rebuild`` asks 3× the export once it has it), and an export
# that fills the disk would refuse the writes that arrive meanwhile and leave the store failed until a restart.
ROOM_FACTOR, ROOM_MARGIN = 3, 8 << 20
# Checkpoint only with this many times the log free on the file system, and ROOM_MARGIN more: a Kùzu checkpoint
# that fails part way on a full disk leaves files whose log, replayed at the next open, duplicates rows (the
# full-disk test found it: the store would not open again). Kùzu's own checkpoint, at 16 MiB of log, runs inside
# a commit; this one is ours to skip.
CHECKPOINT_ROOM_FACTOR = 4
Paused = Callable[[Callable[[], None]], None]


class Compactor:
    """One background thread that rewrites the canonical store when its file is mostly free pages."""

    def __init__(
        self,
        graph: CanonicalStore,
        paused: Paused,
        lock: AbstractContextManager[object],
        *,
        min_free: int = MIN_FREE_BYTES,
        min_share: float = MIN_FREE_SHARE,
        disk_free: Callable[[], int] | None = None,
    ) -> None:
        self._graph, self._paused, self._lock = graph, paused, lock
        self._disk_free = disk_free  # bytes free on the file system that holds the store
        self.min_free, self.min_share = min_free, min_share
        self.checkpoint_log = CHECKPOINT_LOG_BYTES
        self._cond = threading.Condition()
        self._asked = self._done = 0
        self._closed = False
        self._thread: threading.Thread | None = None
        self.rewrites = 0  # how many rewrites this process ran (tests, benchmarks)
        self._retry_above = 0  # after a failed rewrite: the free bytes to wait for before the next try
        self.no_room = False  # the last look found the file worth a rewrite but too little disk for it
        self.passed: Counter[str] = Counter()  # why each look that rewrote nothing passed (logs, tests)

    def request(self) -> None:
        """Look at the free space soon (returns at once; called in the projector thread)."""
        with self._cond:
            if self._closed:
                return
            self._asked += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="mnemograph-compactor", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until every request made so far has been looked at (and its rewrite, if any, is done)."""
        with self._cond:
            return self._cond.wait_for(lambda: self._done >= self._asked or self._closed, timeout)

    def close(self) -> None:
        """Stop; a rewrite under way finishes first (it is crash-safe, but a finished one frees the disk)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join()

    def due(self) -> bool:
        space = self._graph.file_space()
        return (
            space.free >= max(self.min_free, self._retry_above) and space.free >= space.total * self.min_share
        )

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._asked > self._done or self._closed)
                if self._closed:
                    return
                asked = self._asked
            try:
                self._compact()
            except Exception:
                self.passed["rewrite failed"] += 1
                # Most likely no room for the new file (it needs about 3× the export): the export is not tried
                # again, at every maintenance, until another ``min_free`` bytes have been freed.
                self._retry_above = self._free_now() + self.min_free
                log.exception(
                    "could not rewrite the canonical store to free its unused pages; tried again later"
                )
            with self._cond:
                self._done = asked
                self._cond.notify_all()

    def _room_for(self, space: FileSpace) -> bool:
        if self._disk_free is None:
            return True
        need = ROOM_FACTOR * (space.total - space.free) + ROOM_MARGIN
        have = self._disk_free()
        if have >= need:
            self.no_room = False
            return True
        if not self.no_room:  # once, not at every maintenance
            log.warning(
                "the canonical store's file is %.1f MB, %.1f MB of it unused, but rewriting it to give those "
                "back needs %.1f MB free on its disk and %.1f MB are: free disk space; it is tried again after "
                "each maintenance",
                space.total / 1e6,
                space.free / 1e6,
                need / 1e6,
                have / 1e6,
            )
        self.no_room = True
        return False

    def _room_to_checkpoint(self, space: FileSpace) -> bool:
        if self._disk_free is None:
            return True
        return self._disk_free() >= CHECKPOINT_ROOM_FACTOR * space.log + ROOM_MARGIN

    def _free_now(self) -> int:
        try:
            return self._graph.file_space().free
        except Exception:  # a store that failed: nothing is tried again before it is reopened anyway
            return self._retry_above

    def _compact(self) -> None:
        space = self._graph.file_space()
        if space.total == 0:
            return  # kept elsewhere (a FalkorDB server, whose checkpoint rewrites its log: not ours to run)
        # One at a time with an erasure's rewrite and with exports (each holds its lock): a checkpoint waits for
        # the snapshot they hold open, with the writer paused, and gives up only after about 5 s.
        with self._lock:
            if space.log >= self.checkpoint_log and self._room_to_checkpoint(space):
                try:
                    # Pages are freed when a checkpoint writes grown column chunks anew: counted before it, the
                    # free part misses what the log's commits are about to free (a store just filled holds many).
                    # In the writer thread, between transactions, as a checkpoint in a commit would run. Only for
                    # a log this large: a checkpoint after every burst of single writes would cost them and free
                    # little.
                    self._paused(self._graph.checkpoint)
                except StorageUnavailable:
                    self.passed["checkpoint held off"] += 1
                    return  # a long read holds the checkpoint off: looked at again next time
            if not self.due():
                self.passed["too little free"] += 1
                return  # an erasure's rewrite has just done it, or too little is free
            space = self._graph.file_space()
            if not self._room_for(space):
                self.passed["no disk room"] += 1
                return
            total = space.total
            started = time.perf_counter()
            self._graph.rebuild(self._paused)
            after = self._graph.file_space().total
        self.rewrites += 1
        self._retry_above = 0
        log.info(
            "canonical store rewritten to free unused pages: %.1f MB -> %.1f MB in %.1f s",
            total / 1e6,
            after / 1e6,
            time.perf_counter() - started,
        )
