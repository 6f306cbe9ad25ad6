"""The vector projection: one LanceDB table of (id, vector, scopes, live, kind, event_time).

It holds no content. Flat (exact) search below ``ann_threshold`` rows; above it an IVF index answers, and
a refine step re-ranks the candidates by exact distance so the top results stay right. With the IVF index, the
columns every search filters on also get scalar indexes (a label-list index on ``scopes``, a bitmap on
``live``): an IVF_PQ search with a scope filter then reads an index instead of every row (0.79× the median and
0.86× the p95 at 100,000 rows), while a flat search gets slower with them (3.6×), so they come only with the IVF
index (``bench/lance_filter.py``, docs/benchmarks/lance-filter.md).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import lancedb
import numpy as np
import pyarrow as pa
from lancedb.index import Bitmap, IvfPq, LabelList
from lancedb.query import LanceVectorQueryBuilder

from storage._kuzu import ProjectionRow
from storage._watermark import Watermark

TABLE = "memories"
SCALAR_INDEXES = (("scopes", LabelList), ("live", Bitmap))


def _sql_str(value: str) -> str:
    # Lance filters are SQL text; every value we put in one has been validated (scope ids, kinds, hex ids)
    # and is still quoted by doubling single quotes, so no value can end the literal.
    return "'" + value.replace("'", "''") + "'"


class VectorIndex:
    def __init__(
        self,
        directory: Path,
        *,
        dim: int,
        ann_threshold: int = 50_000,
        scalar_threshold: int | None = None,
    ) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self._dir = directory
        self._dim = dim
        self._ann_threshold = ann_threshold
        self._scalar_threshold = ann_threshold if scalar_threshold is None else scalar_threshold
        self._schema = pa.schema(
            [
                ("id", pa.string()),
                ("vector", pa.list_(pa.float32(), dim)),
                ("scopes", pa.list_(pa.string())),
                ("live", pa.bool_()),
                ("kind", pa.string()),
                ("event_time", pa.timestamp("us", tz="UTC")),
            ]
        )
        self._db = lancedb.connect(str(directory))
        if TABLE in self._db.list_tables().tables:
            self._table = self._db.open_table(TABLE)
        else:
            self._table = self._db.create_table(TABLE, schema=self._schema)
        self.watermark = Watermark(directory / "WATERMARK")
        self._has_index, self._has_scalar = self._indexes()

    def _indexes(self) -> tuple[bool, bool]:
        """Whether the table has its vector index, and every scalar index, already."""
        found = self._table.list_indices()
        vector = any(ix.index_type.upper().startswith("IVF") for ix in found)
        columns = {column for ix in found for column in ix.columns}
        return vector, all(column in columns for column, _ in SCALAR_INDEXES)

    # -- writes (projector thread only) ------------------------------------------------------------

    def apply(
        self, upserts: Sequence[ProjectionRow], deletes: Sequence[str], *, fresh: Sequence[str] = ()
    ) -> None:
        """Make the table reflect the given rows. Idempotent: replaying the same rows is harmless.

        ``fresh`` names upserted ids known never to have been projected, which skips their delete.
        """
        fresh_set = set(fresh)
        stale = [r.id for r in upserts if r.id not in fresh_set] + list(deletes)
        if stale:
            self._table.delete(f"id IN ({', '.join(_sql_str(i) for i in stale)})")
        if upserts:
            self._table.add(self._arrow(upserts))

    def _arrow(self, rows: Sequence[ProjectionRow]) -> pa.Table:
        flat = np.asarray([r.vector for r in rows], dtype=np.float32).ravel()
        return pa.table(
            {
                "id": [r.id for r in rows],
                "vector": pa.FixedSizeListArray.from_arrays(pa.array(flat, type=pa.float32()), self._dim),
                "scopes": [list(r.scopes) for r in rows],
                "live": [r.live for r in rows],
                "kind": [r.kind for r in rows],
                "event_time": [r.event_time for r in rows],
            },
            schema=self._schema,
        )

    def replace_all(self, rows: Sequence[ProjectionRow]) -> None:
        """Rebuild from scratch (reindex), also when the directory was deleted or damaged under us."""
        self._dir.mkdir(parents=True, exist_ok=True)
        self._db = lancedb.connect(str(self._dir))
        if TABLE in self._db.list_tables().tables:
            self._db.drop_table(TABLE)
        self._table = self._db.create_table(TABLE, schema=self._schema)
        self._has_index = self._has_scalar = False
        for start in range(0, len(rows), 10_000):
            self._table.add(self._arrow(rows[start : start + 10_000]))
        self.maintain(force_index=True)
        self.vacuum()

    def maintain(self, *, force_index: bool = False) -> None:
        """Compact fragments, fold new rows into the indexes, build them once the table is large enough."""
        rows = self._table.count_rows()
        if rows >= self._scalar_threshold and not self._has_scalar:
            for column, kind in SCALAR_INDEXES:
                self._table.create_index(column, config=kind(), replace=True)
            self._has_scalar = True
        if rows >= self._ann_threshold and (not self._has_index or force_index):
            partitions = max(16, int(np.sqrt(rows)))
            config = IvfPq(distance_type="cosine", num_partitions=partitions, num_sub_vectors=self._dim // 8)
            self._table.create_index("vector", config=config, replace=True)
            self._has_index = True
        self._table.optimize(cleanup_older_than=timedelta(minutes=5))

    def vacuum(self) -> None:
        """Compact and delete every old version now, so deleted rows leave no file behind."""
        with warnings.catch_warnings():
            # Lance warns that readers of older versions would fail; this process is the only one.
            warnings.simplefilter("ignore", UserWarning)
            self._table.optimize(cleanup_older_than=timedelta(seconds=0), delete_unverified=True)

    # -- reads -------------------------------------------------------------------------------------

    def search(
        self,
        vector: Sequence[float] | np.ndarray,
        *,
        scopes: Sequence[str],
        k: int,
        live_only: bool,
        kinds: Sequence[str] | None,
    ) -> list[tuple[str, float]]:
        """Ids with cosine distance, nearest first, restricted to memories in any of ``scopes``."""
        hits, _ = self.search_with_vectors(
            vector, scopes=scopes, k=k, live_only=live_only, kinds=kinds, vectors=False
        )
        return hits

    def search_with_vectors(
        self,
        vector: Sequence[float] | np.ndarray,
        *,
        scopes: Sequence[str],
        k: int,
        live_only: bool,
        kinds: Sequence[str] | None,
        vectors: bool = True,
    ) -> tuple[list[tuple[str, float]], np.ndarray | None]:
        """As ``search``, and the found rows' stored vectors (one row each, same order) when ``vectors``."""
        if not scopes:
            return [], None
        where = [f"array_has_any(scopes, [{', '.join(_sql_str(s) for s in scopes)}])"]
        if live_only:
            where.append("live")
        if kinds:
            where.append(f"kind IN ({', '.join(_sql_str(x) for x in kinds)})")
        query = self._table.search(np.asarray(vector, dtype=np.float32), vector_column_name="vector")
        assert isinstance(query, LanceVectorQueryBuilder)
        query = query.distance_type("cosine").where(" AND ".join(where), prefilter=True)
        query = query.select(["id", "_distance", "vector"] if vectors else ["id", "_distance"]).limit(k)
        if self._has_index:
            query = query.nprobes(32).refine_factor(8)
        result = query.to_arrow()
        hits = list(zip(result["id"].to_pylist(), result["_distance"].to_pylist(), strict=True))
        if not vectors:
            return hits, None
        column = result["vector"].combine_chunks()
        matrix = column.flatten().to_numpy(zero_copy_only=False).reshape(len(hits), self._dim)
        return hits, matrix

    def live_status(self) -> dict[str, bool]:
        table = self._table.to_arrow().select(["id", "live"]) if self._table.count_rows() else None
        if table is None:
            return {}
        return dict(zip(table["id"].to_pylist(), table["live"].to_pylist(), strict=True))

    @property
    def has_ann_index(self) -> bool:
        return self._has_index

    @property
    def has_scalar_indexes(self) -> bool:
        return self._has_scalar

    def count(self) -> int:
        return int(self._table.count_rows())
