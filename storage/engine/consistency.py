"""Consistency: verify and reindex the projections against the canonical store; backup and export."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import IO

from storage.domain.models import (
    VerifyReport,
)
from storage.engine import backup as snapshots
from storage.engine.versions import _Versions


class _Consistency(_Versions):
    # -- consistency -------------------------------------------------------------------------------

    def verify(self) -> VerifyReport:
        """Compare the projections with the canonical store, id by id, once they have caught up."""
        self.reconciler.wait_projected()
        with self.graph.read() as conn:
            canonical = self.graph.all_ids(conn)
        drift: dict[str, list[str]] = {}
        counts = {self.graph.name: len(canonical)}
        for projection in self.stores.projections:
            name, live = projection.name, projection.live_status()
            counts[name] = len(live)
            missing = sorted(set(canonical) - set(live))
            extra = sorted(set(live) - set(canonical))
            stale = sorted(i for i in set(canonical) & set(live) if canonical[i] != live[i])
            drift[f"{name}_missing"] = missing
            drift[f"{name}_extra"] = extra
            drift[f"{name}_stale"] = stale
        return VerifyReport(
            canonical_memories=len(canonical),
            live_memories=sum(canonical.values()),
            counts=counts,
            watermarks={p.name: p.watermark.value for p in self.stores.projections},
            canonical_seq=self.reconciler.committed_seq,
            drift=drift,
        )

    def reindex(self) -> VerifyReport:
        """Rebuild LanceDB and Tantivy from the canonical store (writes wait meanwhile)."""

        def rebuild() -> None:
            self._rebuild_projections()
            self.reconciler.rebuilt()

        self.reconciler.on_writer(lambda: self.reconciler.on_projector(rebuild))
        return self.verify()

    def _rebuild_projections(self) -> None:
        with self.graph.read() as conn:
            seq = self.graph.max_seq(conn)
            rows = list(self.graph.projection_rows(conn).values())
        for projection in self.stores.projections:
            projection.replace_all(rows)
            projection.watermark.set(seq)

    def _projection_behind_log(self) -> bool:
        """True when a projection cannot be repaired by replay: it was lost (watermark 0 while memories
        exist) or it lags behind the oldest change the log still keeps."""
        with self.graph.read() as conn:
            oldest = self.graph.oldest_change(conn)
            has_memories = bool(self.graph.ids_with_prefix(conn, "", limit=1))
        for mark in (p.watermark.value for p in self.stores.projections):
            if mark == 0 and has_memories and (oldest is None or oldest > 1):
                return True
            if oldest is not None and mark < oldest - 1:
                return True
        return False

    # -- backup ------------------------------------------------------------------------------------

    def export(
        self, out: IO[str], *, scope: str | None = None, vectors: bool = False
    ) -> snapshots.ExportSummary:
        """Write every memory (or those of ``scope`` and the scopes under it) as JSON Lines; see storage.engine.backup."""
        return snapshots.export(self, out, scope=scope, vectors=vectors)

    def backup(self, dest: Path | str) -> snapshots.SnapshotSummary:
        """Copy the stores into ``dest`` as they are at one change sequence (writes pause meanwhile)."""
        return snapshots.snapshot(self, dest)

    def merge_export(
        self, source: IO[str], *, progress: Callable[[str, int, int], None] | None = None
    ) -> snapshots.ImportSummary:
        """Merge an export into this store: memories it already holds are skipped (``already``), so it is
        idempotent. The whole file is validated before anything is written."""
        return snapshots.restore(self, snapshots.parse(iter(source)), progress=progress)
