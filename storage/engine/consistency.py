"""Consistency: verify and reindex the projections against the canonical store; backup and export."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Collection
from pathlib import Path
from typing import IO

from storage._durable import write_durably
from storage.domain.errors import StorageUnavailable, StoreMismatch
from storage.domain.models import (
    VerifyReport,
)
from storage.engine import backup as snapshots
from storage.engine.state import log
from storage.engine.versions import _Versions

# The canonical store a data directory's projections mirror (``CanonicalStore.identity``).
CANONICAL_RECORD = "CANONICAL"


class _Consistency(_Versions):
    # -- consistency -------------------------------------------------------------------------------

    def verify(self) -> VerifyReport:
        """Compare the projections with the canonical store, id by id and row by row, once they have caught up:
        ``counts`` are rows (a projection holding a memory twice counts it twice, and ``drift`` names it under
        ``<projection>_duplicate``)."""
        self.reconciler.wait_projected()
        with self.graph.read() as conn:
            canonical = self.graph.all_ids(conn)
            # The canonical store's own copies (what recall's graph lane reads of a memory, kept on its mentions).
            drift: dict[str, list[str]] = {f"{self.graph.name}_stale_copies": self.graph.stale_copies(conn)}
        counts = {self.graph.name: len(canonical)}
        for projection in self.stores.projections:
            name, live = projection.name, projection.live_status()
            counts[name] = projection.count()
            missing = sorted(set(canonical) - set(live))
            extra = sorted(set(live) - set(canonical))
            stale = sorted(i for i in set(canonical) & set(live) if canonical[i] != live[i])
            drift[f"{name}_missing"] = missing
            drift[f"{name}_extra"] = extra
            drift[f"{name}_stale"] = stale
            drift[f"{name}_duplicate"] = projection.duplicates()
        return VerifyReport(
            canonical_memories=len(canonical),
            live_memories=sum(canonical.values()),
            counts=counts,
            watermarks={p.name: p.watermark.value for p in self.stores.projections},
            canonical_seq=self.reconciler.committed_seq,
            drift=drift,
        )

    def reindex(self) -> VerifyReport:
        """Rebuild LanceDB and Tantivy from the canonical store, and the canonical store's own copies (writes wait
        meanwhile)."""

        def rebuild() -> None:
            with self.graph.transaction() as conn:
                self.graph.recopy(conn)
            self._rebuild_projections()
            self.reconciler.rebuilt()

        self.reconciler.on_writer(lambda: self.reconciler.on_projector(rebuild))
        return self.verify()

    def _rebuild_projections(
        self,
        names: Collection[str] | None = None,
        *,
        progress: Callable[[str], None] | None = None,
        why: str = "",
    ) -> None:
        """Rebuild the projections (those ``names``, else all) from the canonical store. One that cannot be
        rebuilt (its disk full or read-only) raises StorageUnavailable naming the command that repairs it.
        ``progress`` (an open's) is told which index is being rebuilt, from how many memories, and ``why``."""
        if progress is not None:
            progress(f"reading the canonical store to rebuild the search indexes ({why})")
        with self.graph.read() as conn:
            seq = self.graph.max_seq(conn)
            pruned_whole = self.graph.oldest_change(conn) is None
            rows = list(self.graph.projection_rows(conn).values())
        if pruned_whole and not self.graph.shared:
            # An erasure prunes the embedded log whole, and its head goes with it: the head is then what the
            # projections (and the reconciler) numbered last. A watermark of 0 over a store with memories would
            # read as a projection lost at the next open, rebuilt again at every open until the next write.
            seq = max(
                seq, self.reconciler.committed_seq, *(p.watermark.value for p in self.stores.projections)
            )
        for projection in self.stores.projections:
            if names is not None and projection.name not in names:
                continue
            if progress is not None:
                progress(
                    f"rebuilding the search index {projection.name} from the canonical store's {len(rows):,} "
                    f"memories ({why}); no memory is lost"
                )
            try:
                projection.replace_all(rows)
                projection.watermark.set(seq)
            except (OSError, ValueError, RuntimeError) as exc:  # the store libraries' I/O errors
                raise StorageUnavailable(
                    f"the search index {projection.name} in {self.data_dir} could not be rebuilt from the "
                    f"canonical store ({type(exc).__name__}: {str(exc)[:200]})",
                    hint="make room on the disk (or make it writable), then run "
                    f"`mnemograph reindex --data-dir {shlex.quote(str(self.data_dir))}`; no memory is lost, the canonical store "
                    "holds them all",
                ) from exc

    def _untrusted_projections(self) -> dict[str, str]:
        """The projections whose files found at open cannot be trusted, each with why: damaged (a watermark,
        table or index that cannot be read, or is missing while its watermark says rows were applied), or a
        watermark ahead of the canonical change log (rows it claims were never committed here: a directory
        removed and made anew under a running owner, files copied in from elsewhere)."""
        reasons = {p.name: p.damaged for p in self.stores.projections if p.damaged}
        if self.graph.shared:
            return reasons  # ``_projection_behind_log`` compares with a shared log's head
        with self.graph.read() as conn:
            oldest = self.graph.oldest_change(conn)
            head = self.graph.max_seq(conn)
        # Kùzu's log is pruned up to what every projection applied, so a watermark past its newest change is
        # only possible when the log is empty (pruned whole); with changes in it, it is ahead of the store.
        for projection in self.stores.projections:
            mark = projection.watermark.value
            if oldest is not None and mark > head and projection.name not in reasons:
                reasons[projection.name] = (
                    f"its watermark {mark} is ahead of the canonical store's change {head}"
                )
        return reasons

    def _check_row_counts(self) -> None:
        """Once the projections have caught up at open: each must hold one row per canonical memory. One that
        holds more (duplicates, another store's rows) or fewer (rows lost under a watermark that says they were
        applied) is rebuilt, with a warning. A store this process owns only: other nodes of a shared one write
        meanwhile."""
        if self.graph.shared:
            return

        def check() -> None:
            with self.graph.read() as conn:
                expected = self.graph.memory_count(conn)
            off = {p.name: p.count() for p in self.stores.projections if p.count() != expected}
            if off:
                log.warning(
                    "the search indexes %s hold another number of rows than the canonical store's %d memories; "
                    "rebuilding them from the canonical store",
                    ", ".join(f"{name} ({count})" for name, count in off.items()),
                    expected,
                )
                self._rebuild_projections(off)
                self.reconciler.rebuilt()

        self.reconciler.on_writer(lambda: self.reconciler.on_projector(check))

    def _projection_behind_log(self) -> bool:
        """True when a projection cannot be repaired by replay: it was lost (watermark 0 while memories
        exist), it lags behind the oldest change the log still keeps, it mirrors another canonical store
        (``_mirrors_another_store``), or it is past the log's head (the log was replaced by an older one: a
        restored or flushed server, a promoted replica that lagged; the changes numbered up to its watermark
        would never be applied)."""
        if self._mirrors_another_store():
            return True
        with self.graph.read() as conn:
            oldest = self.graph.oldest_change(conn)
            head = self.graph.max_seq(conn)
            has_memories = bool(self.graph.ids_with_prefix(conn, "", limit=1))
        for mark in (p.watermark.value for p in self.stores.projections):
            if mark == 0 and has_memories and (oldest is None or oldest > 1):
                return True
            if oldest is not None and mark < oldest - 1:
                return True
            if self.graph.shared and mark > head:  # a shared log's head survives pruning; Kùzu's does not
                return True
        return False

    def _mirrors_another_store(self) -> bool:
        """Whether this data directory's projections were built from another canonical store than the one
        opened now: the directory served the embedded store and now joins a shared graph (or the reverse),
        or names another graph, or its graph was made anew. Their watermarks count another log's changes:
        replaying past them would keep the other store's memories and skip this one's first changes."""
        recorded = self.data_dir / CANONICAL_RECORD
        if recorded.exists():
            was = recorded.read_text().strip()
            if was.startswith("falkordb:") and self.graph.identity == "kuzu":
                # Most likely a restart without --canonical: serving a new, empty embedded store here would
                # split this node from its team without a word. Leaving the shared graph is done on purpose.
                raise StoreMismatch(
                    f"{self.data_dir} is a node of a shared FalkorDB graph ({was}), but was opened on the "
                    "embedded store (no --canonical or MNEMOGRAPH_CANONICAL)",
                    hint="give the same --canonical falkordb://host:port/graph as before; to make it an "
                    f"embedded store instead, delete {recorded} (its search indexes are then rebuilt)",
                )
            return was != self.graph.identity
        # A directory from before the record: the embedded graph beside it says what its projections mirror.
        return self.graph.identity != "kuzu" and (self.data_dir / "graph").exists()

    def _record_canonical(self) -> None:
        """Record which canonical store the projections now mirror (after any rebuild: a crash before this
        leaves the old record, and the next start rebuilds again)."""
        recorded = self.data_dir / CANONICAL_RECORD
        if recorded.exists() and recorded.read_text().strip() == self.graph.identity:
            return
        write_durably(recorded, self.graph.identity + "\n")

    # -- backup ------------------------------------------------------------------------------------

    def export(
        self, out: IO[str], *, scope: str | None = None, vectors: bool = False
    ) -> snapshots.ExportSummary:
        """Write every memory (or those of ``scope`` and the scopes under it) as JSON Lines; see storage.engine.backup.

        One rewrite of the files at a time with exports: an export holds its snapshot (and the store's read lock)
        for as long as its reader takes, and a rewrite's switch, with the writer paused, would wait for all of it
        (every write behind it, every recall behind the switch). The rewrite waits for the export instead."""
        with self._erasure_lock:
            return snapshots.export(self, out, scope=scope, vectors=vectors)

    def backup(self, dest: Path | str) -> snapshots.SnapshotSummary:
        """Copy the stores into ``dest`` as they are at one change sequence (writes pause meanwhile).

        After a rewrite of the files under way (an erasure's, or the compactor's after a maintenance): its
        snapshot stays open while it exports, and the checkpoint the copy starts with would wait for it and give
        up after a few seconds; the copy would also take the half-built new file along."""
        with self._erasure_lock:
            return snapshots.snapshot(self, dest)

    def merge_export(
        self, source: IO[str], *, progress: Callable[[str, int, int], None] | None = None
    ) -> snapshots.ImportSummary:
        """Merge an export into this store: memories it already holds are skipped (``already``), so it is
        idempotent. The whole file is validated before anything is written."""
        return snapshots.restore(self, snapshots.parse(iter(source)), progress=progress)
