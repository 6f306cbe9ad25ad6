"""The engine's use cases over the ports, assembled: ``EngineCore`` is every use case module in one class.

Synchronous and thread-safe. Writes become intents for the reconciler (one writer thread); reads run in
the calling thread. Arguments are validated before anything is queued, so a rejected call changes nothing.
The use cases live one concern per module (state, access, reads, scopes, writes, versions, consistency,
erasure), each class extending the previous one; ``storage.compose.Engine`` opens one on a data directory.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import threading
import time
from collections.abc import Callable, Sequence
from typing import Self

from storage.domain.errors import Closed, StorageUnavailable
from storage.domain.records import Change
from storage.engine.derived import _Derived
from storage.engine.state import VACUUM_MARKER, log

LEXICON_EVERY_S = 1.0  # shared store: how often the entity lexicon is rebuilt while other nodes write


class EngineCore(_Derived):
    """One data directory's stores, owned by this process until ``close()``."""

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self, progress: Callable[[str], None] | None = None) -> None:
        """Repair what a crash left (projections behind the change log, an unfinished erasure), then start the
        reconciler's threads. ``storage.compose.Engine.open`` calls it; call it once, before any use.
        ``progress`` is told when a repair rebuilds a search index (minutes for a large store), so a caller
        waiting on the open hears what it waits for."""
        untrusted = self._untrusted_projections()
        if self._projection_behind_log():
            log.warning("rebuilding the search indexes from the canonical store %s", self.graph.identity)
            self._rebuild_projections(progress=progress, why="they are behind the canonical store")
        elif untrusted:
            for name, why in untrusted.items():
                log.warning("the search index %s cannot be trusted: %s; rebuilding it", name, why)
            self._rebuild_projections(
                untrusted, progress=progress, why="found damaged or out of step at open"
            )
        self._record_canonical()
        if self.graph.shared:
            self._lexicon_at = 0.0
            self.reconciler.on_changes = self._follow_changes
        try:
            self.reconciler.start()  # replays what the projections missed first
        except (OSError, ValueError, RuntimeError) as exc:  # the store libraries' I/O errors (a full disk)
            # A StorageUnavailable, as a rebuild that fails here is: the owner retries it (the disk freed)
            # instead of taking the raw error for a store that can never open.
            raise StorageUnavailable(
                f"the search indexes in {self.data_dir} could not catch up with the canonical store "
                f"({type(exc).__name__}: {str(exc)[:200]})",
                hint="make room on the disk (or make it writable); the next open catches up, or run "
                f"`mnemograph reindex --data-dir {shlex.quote(str(self.data_dir))}`; no memory is lost, the "
                "canonical store holds them all",
            ) from exc
        try:
            self._check_row_counts()
        except BaseException:
            self.reconciler.close()  # its threads would outlive the failed open
            raise
        self._reload_tree()
        self._reload_lexicon()
        if (self.data_dir / VACUUM_MARKER).exists():
            try:
                self._vacuum()  # an erasure was interrupted before its files were rewritten
            except StorageUnavailable:
                # The erased rows are gone from every store (nothing can read them); only their bytes wait for
                # the rewrite, which the marker keeps asking for. A store that cannot be rewritten right now
                # (disk full) must still open: refusing to would lose the user every other memory.
                log.exception(
                    "the rewrite that removes erased bytes failed; it is retried at the next erasure"
                )
        self._start_consolidator()

    def _follow_changes(self, changes: Sequence[Change]) -> None:
        """A shared store: other nodes write too. What this engine caches of the canonical state is refreshed
        before a reader waiting for these changes goes on: the scope tree (access and inheritance depend on
        it) at once, the entity lexicon (extraction hints only) at most once a second."""
        self._reload_tree()
        if time.monotonic() - self._lexicon_at >= LEXICON_EVERY_S:
            self._lexicon_at = time.monotonic()
            # On the writer thread, between two transactions. Built here, beside a local write still in its
            # transaction, it read the store without that write and then replaced the counts the write had
            # just added: the next write found no stored relation of its subject and linked no contradiction
            # ("I love coffee", "I hate coffee": the contract test that failed now and then on FalkorDB).
            with contextlib.suppress(Closed):
                self.reconciler.post(self._reload_lexicon)
        if any(c.op == "delete" and c.memory_id not in self._erased_here for c in changes):
            self._rewrite_after_remote_erasure()

    def _rewrite_after_remote_erasure(self) -> None:
        """Another node erased memories this node's projections held: applying the delete left their bytes in
        this node's Lance fragments and Tantivy segments, so the projections are rewritten too, in a thread
        of their own (the rewrite's switch runs in the projector, which calls this). Owed from now on: the
        marker makes a start after a crash finish it."""
        (self.data_dir / VACUUM_MARKER).touch()
        self._remote_erasure.set()
        with self._tree_lock:
            if self._remote_rewriter is None:
                self._remote_rewriter = threading.Thread(
                    target=self._remote_rewrites, name="mnemograph-remote-erasure", daemon=True
                )
                self._remote_rewriter.start()

    def _remote_rewrites(self) -> None:
        while True:
            self._remote_erasure.wait()
            if self._closed:
                return
            self._remote_erasure.clear()
            try:
                with self._erasure_lock:
                    self._rewrite_projections({})
                    with self.graph.read() as conn:
                        present = self.graph.all_ids(conn)
                    self.accesses.retain(present.__contains__)
                self._drop_marker()
            except Exception:
                log.exception(
                    "could not rewrite this node's search indexes after another node's erasure; retried at "
                    "the next erasure and at the next start"
                )

    def close(self) -> None:
        """Drain queued writes, flush projections and release the directory. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._stop_consolidator()
        if self._remote_rewriter is not None:
            self._remote_erasure.set()  # it sees _closed and ends, after a rewrite under way
            self._remote_rewriter.join()
        self.compactor.close()  # before the reconciler: a rewrite under way pauses its writer to switch
        for enricher in (self.sampler, self.enricher):
            if enricher is not None:
                enricher.close(lambda job: self._apply_llm(job, None, None))
        self.reconciler.close()
        self.accesses.flush()  # the writer has stopped: nothing else writes the file now
        self._lane_pool.shutdown(wait=True)
        for projection in self.stores.projections:
            projection.close()
        self.graph.close()
        os.close(self._lock_fd)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
