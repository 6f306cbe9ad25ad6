"""The vector projection: one LanceDB table of (id, vector, scopes, live, kind, event_time).

It holds no content. Flat (exact) search below ``ann_threshold`` rows; above it an IVF_RQ index answers: the
query is compared with the partition centroids, then with the RaBitQ codes (``RQ_BITS`` bits a dimension) of every
row of the nearest partitions, and the ``REFINE`` × k best of those are re-ranked by their exact distance, read from
the vector column (which the vector lane reads for its rows anyway). The index holds codes, not vectors: an IVF_FLAT
index kept its own copy of every vector, 773 of the 4,650 bytes a memory took at 100,000 memories (issue #17), and
the codes take 120; the ranking stays IVF_FLAT's and a search takes about half its time (docs/benchmarks/vector-index.md,
``bench/vector_index.py``). IVF_SQ (8 bits a dimension) still takes 389 bytes a memory, over the 4 KB budget, and
IVF_PQ trains a codebook per sub-vector: minutes at 100,000 rows against seconds, on the projector's thread. (Why
not IVF_PQ as before: its refine step read 400 rows back for k 50 and cost more than the search.) Partitions are
built about ``PARTITION_ROWS`` rows large because Lance's index optimisation (``optimize``, which ``maintain`` runs)
joins much smaller partitions into a few huge ones: an IVF_PQ index built with sqrt(rows) = 316 partitions at
100,000 rows came out of it with 4, and every search then read all of them. With the IVF index, the columns every
search filters on also get scalar indexes (a label-list index on ``scopes``, a bitmap on ``live``): a search with a
scope filter then reads an index instead of every row, while a flat search gets slower with them (3.6×), so they
come only with the IVF index (``bench/lance_filter.py``, docs/benchmarks/lance-filter.md).

A rebuild (``build`` then ``switch``: reindex, and the rewrite after an erasure) writes a new table under the next
name beside the live one, catches it up with the changes applied meanwhile, switches ``CURRENT`` to it and only
then drops the old one, so a search running meanwhile reads the old table whole and never a dropped or half-filled
one; the old table's files are gone when ``switch`` returns.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import threading
import warnings
from collections import Counter
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import lancedb
import numpy as np
import pyarrow as pa
from lancedb.index import Bitmap, IvfRq, LabelList
from lancedb.query import LanceVectorQueryBuilder

from storage._durable import fsync_directory
from storage.adapters import _half as half
from storage.adapters._rwlock import RWLock
from storage.adapters.watermark import Watermark
from storage.domain.records import ProjectionRow

log = logging.getLogger("mnemograph.vectors")

TABLE = "memories"  # the first table's name; rebuilds name theirs memories-000001, memories-000002, ...
SCALAR_INDEXES = (("scopes", LabelList), ("live", Bitmap))
VECTOR_INDEX = "IvfRq"  # Lance's name for the index type ``maintain`` builds; any other is rebuilt
# Bits of RaBitQ code per dimension, and how many candidates per wanted row are re-ranked by exact distance (read
# from the vector column). At 100,000 MiniLM vectors under a one-user scope filter, k 50, 2 bits and 4 candidates
# a row keep 100% of the exact top 10 and of the top 50 in a 120-byte code, and search in about half IVF_FLAT's
# time (docs/benchmarks/vector-index.md). 1 bit ranks as well there (99.9% of the top 50) in 65 bytes, but in
# synthetic clusters of near-identical vectors (cosine 0.997 within a cluster) it kept 64% of the exact top 10 where
# 2 bits kept 99% (at 0.98 both keep about 58%, IVF_FLAT 100%: isotropic noise, where the exact neighbours are
# barely nearer than the rest, is the codes' worst case). A search for fewer rows still re-ranks at least
# CANDIDATES: a refine factor alone would leave too few for the codes' estimates (the lane asks for 50 and more).
RQ_BITS = 2
REFINE = 4
CANDIDATES = 100
# Rows per IVF partition at build time. Lance's optimisation joins partitions far below its own target size
# (about 1,000 rows and fewer at 100,000 rows), so smaller partitions would not last past the next ``maintain``.
PARTITION_ROWS = 2_048
# Partitions searched at least; more while the filter has let fewer than ``k`` rows through (a small scope) or
# Lance cannot yet rule the next partitions out.
# At 100,000 MiniLM vectors (36 partitions after optimisation), 16 keep 99.7% of the exact top 10 and 98.9% of
# the exact top 50 under a one-user scope filter (bench/core.py corpus, 200 questions; IVF_FLAT, session 13).
# With IVF_RQ and its re-ranking, 100% of both (bench/vector_index.py corpus, 48 partitions).
NPROBES = 16
# Each ``optimize`` adds the rows that came since as a new segment of the vector index, and Lance never merges
# them: 23 segments of about 4,000 rows after loading 100,000 rows made a search 4× slower (each segment is
# searched on its own), while 16 segments of 128 rows cost about 2 ms. So ``maintain`` rebuilds the index in one
# segment (IVF_RQ: a few seconds at 100,000 rows) once the segments past the first hold DELTA_ROWS rows, or once
# there are more than MAX_SEGMENTS of them.
DELTA_ROWS = 8_192
MAX_SEGMENTS = 16


def _sql_str(value: str) -> str:
    # Lance filters are SQL text; every value we put in one has been validated (scope ids, kinds, hex ids)
    # and is still quoted by doubling single quotes, so no value can end the literal.
    return "'" + value.replace("'", "''") + "'"


# LanceDB keeps the index partitions and the manifests and fragment metadata it has read in a cache per connection,
# 6 GiB + 1 GiB by default: resident memory that grows with the store. Measured (docs/benchmarks/scale.md, "Resident
# memory, session 22"): 74 MiB after 200 recalls on a 100,000-memory store not yet maintained, 12 MiB on the same
# store maintained; these bounds are far above both, so they cost no re-reads at that size.
INDEX_CACHE_BYTES = 256 << 20
METADATA_CACHE_BYTES = 128 << 20


def connect(directory: Path) -> lancedb.DBConnection:
    """A LanceDB connection to ``directory`` whose caches are bounded (``INDEX_CACHE_BYTES``,
    ``METADATA_CACHE_BYTES``)."""
    session = lancedb.Session(
        index_cache_size_bytes=INDEX_CACHE_BYTES, metadata_cache_size_bytes=METADATA_CACHE_BYTES
    )
    return lancedb.connect(str(directory), session=session)


class VectorIndex:
    """The vector projection (``storage.ports.projection.VectorSearch``) on LanceDB."""

    name = "lancedb"

    def __init__(
        self,
        directory: Path,
        *,
        dim: int,
        ann_threshold: int = 50_000,
        scalar_threshold: int | None = None,
        partition_rows: int = PARTITION_ROWS,
        nprobes: int = NPROBES,
    ) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self._dir = directory
        self._dim = dim
        self._ann_threshold = ann_threshold
        self._scalar_threshold = ann_threshold if scalar_threshold is None else scalar_threshold
        self._partition_rows = partition_rows
        self._nprobes = nprobes
        self._schema = pa.schema(
            [
                ("id", pa.string()),
                # Half precision, scaled as the canonical store keeps it (storage.adapters._half): 0.8 KB a
                # row instead of 1.5, and a table rebuilt from the canonical store is the one writes made.
                ("vector", pa.list_(pa.float16(), dim)),
                ("scopes", pa.list_(pa.string())),
                ("live", pa.bool_()),
                ("kind", pa.string()),
                ("event_time", pa.timestamp("us", tz="UTC")),
            ]
        )
        # Searches hold it shared while they use the table; a rebuild takes it exclusively only to switch tables.
        self._lock = RWLock()
        # Tables ``build`` made that are not switched in or discarded yet, by name: an erasure's rebuild (its own
        # thread) and the conversion of a float32 table (``maintain``, the projector's) may be staged at once,
        # and neither may take the other's name nor drop the other's table.
        self._staged: set[str] = set()
        self._staging = threading.Lock()
        self.watermark = Watermark(directory / "WATERMARK")
        # Why the table found at open could not be trusted (``storage.ports.projection.Projection.damaged``).
        self.damaged: str | None = self.watermark.damaged
        try:
            self._open()
        except Exception as exc:  # LanceError (RuntimeError), ValueError, OSError: files missing or damaged
            # A projection is only a copy: it is started empty and rebuilt from the canonical store at open.
            self.damaged = f"its table cannot be read ({type(exc).__name__}: {str(exc)[:200]})"
            log.warning("the vector index in %s is damaged (%s); it will be rebuilt", directory, self.damaged)
            for entry in directory.iterdir():
                if entry.name.endswith(".lance") or entry.name.startswith("CURRENT"):
                    shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
            self.watermark.set(0)
            self._open()
        self._index_type, self._has_scalar = self._indexes()
        self._appends = 0
        # Rows added since the vector index was built in one segment (counted by this process).
        self._rows_since_build = 0

    def _open(self) -> None:
        """Open the live table (``CURRENT``), creating it when the projection is new; read every row's id, so
        that a table whose data files are missing or damaged fails here, at open, not at its first search."""
        self._db = connect(self._dir)
        self._name = self._current_name()
        tables = self._db.list_tables().tables
        for stale in tables:
            if stale != self._name:
                self._db.drop_table(stale)  # left by a rebuild interrupted before or after its switch
        if self._name in tables:
            self._table = self._db.open_table(self._name)
            self._table.search().select(["id"]).limit(None).to_arrow()
        else:
            if self.watermark.value > 0 and self.damaged is None:
                # The watermark says rows were applied, but their table is gone (deleted under us).
                self.damaged = f"its table {self._name} is missing"
                log.warning("the vector index in %s lost its table; it will be rebuilt", self._dir)
            self._table = self._db.create_table(self._name, schema=self._schema)
        # A table written before vectors were kept in half precision stays float32 until ``maintain`` converts it.
        self._vector_type = self._table.schema.field("vector").type.value_type

    def close(self) -> None:
        """Nothing to release: every LanceDB write is committed when it returns."""

    def _current_name(self) -> str:
        pointer = self._dir / "CURRENT"
        if not pointer.exists():
            return TABLE
        name = pointer.read_text().strip()
        if not re.fullmatch(rf"{TABLE}(-\d{{6}})?", name):
            raise ValueError(f"{pointer} does not name a table ({name[:40]!r})")
        return name

    def _indexes(self, table: lancedb.table.Table | None = None) -> tuple[str | None, bool]:
        """The type of the table's vector index (None without one), and whether every scalar index exists."""
        found = (table or self._table).list_indices()
        vector = next((ix.index_type for ix in found if "vector" in ix.columns), None)
        columns = {column for ix in found for column in ix.columns}
        return vector, all(column in columns for column, _ in SCALAR_INDEXES)

    @property
    def _has_index(self) -> bool:
        return self._index_type == VECTOR_INDEX

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
            self._table.add(self._arrow(upserts, self._vector_type))
        if stale or upserts:
            self._appends += 1
            self._rows_since_build += len(upserts)

    @property
    def appends_since_maintain(self) -> int:
        """Changes applied since the last ``maintain``. Each left a small fragment (or deletion file) that every
        search opens on its own, outside the scalar indexes: 500 single-memory writes made a recall at
        100,000 memories 2× slower (docs/benchmarks/core.md). ``maintain`` compacts them."""
        return self._appends

    def _arrow(self, rows: Sequence[ProjectionRow], vector_type: pa.DataType | None = None) -> pa.Table:
        vector_type = vector_type or pa.float16()
        if vector_type == pa.float16():
            flat = (
                np.concatenate([half.encode(r.vector)[1] for r in rows]) if rows else np.zeros(0, half.HALF)
            )
        else:  # a float32 table written before (until ``maintain`` converts it)
            flat = np.asarray([r.vector for r in rows], dtype=np.float32).ravel()
        schema = (
            self._schema
            if vector_type == pa.float16()
            else _with_vector(self._schema, vector_type, self._dim)
        )
        return pa.table(
            {
                "id": [r.id for r in rows],
                "vector": pa.FixedSizeListArray.from_arrays(pa.array(flat, type=vector_type), self._dim),
                "scopes": [list(r.scopes) for r in rows],
                "live": [r.live for r in rows],
                "kind": [r.kind for r in rows],
                "event_time": [r.event_time for r in rows],
            },
            schema=schema,
        )

    def replace_all(self, rows: Sequence[ProjectionRow]) -> None:
        """Rebuild from scratch (reindex), also when the directory was deleted or damaged under us."""
        staged = self.build(rows)
        staged.switch()
        staged.drop_old()

    def build(self, rows: Sequence[ProjectionRow]) -> StagedTable:
        """Write ``rows`` into a new table beside the live one (searches and ``apply`` go on meanwhile), compacted
        and indexed, with no old version left; ``switch`` on the result makes it the live table."""
        self._dir.mkdir(parents=True, exist_ok=True)
        db = connect(self._dir)
        with self._staging:
            number = max(int(n.split("-")[1]) if "-" in n else 0 for n in (self._name, *self._staged))
            name = f"{TABLE}-{number + 1:06d}"
            self._staged.add(name)
        try:
            if name in db.list_tables().tables:
                db.drop_table(name)  # a failed rebuild of this process
            table = db.create_table(name, schema=self._schema)
            for start in range(0, len(rows), 10_000):
                table.add(self._arrow(rows[start : start + 10_000]))
            count = table.count_rows()
            has_scalar = self._compact(table, rows=count, has_scalar=False)
            index_type = None
            if count >= self._ann_threshold:
                self._index_vectors(table, count)
                index_type = VECTOR_INDEX
            _vacuum(table)
        except BaseException:
            with self._staging:
                self._staged.discard(name)
            raise
        return StagedTable(self, db, table, name, index_type, has_scalar)

    def maintain(self, *, force_index: bool = False) -> None:
        """Compact fragments, fold new rows into the indexes, build them once the table is large enough.

        A vector index of another type (the IVF_FLAT or IVF_PQ index of an older version), or one split into more
        than ``MAX_SEGMENTS`` segments or with ``DELTA_ROWS`` rows added since it was built, is rebuilt as one
        IVF_RQ index.
        """
        if self._vector_type != pa.float16() and not self._staged:
            # (With a rebuild staged, e.g. an erasure's, its switch brings the float16 table: not converted twice.)
            self._halve()
        rows = self._table.count_rows()
        self._has_scalar = self._compact(self._table, rows=rows, has_scalar=self._has_scalar)
        rebuilt = False
        if rows >= self._ann_threshold:
            segments = self.index_segments()
            grown = segments > 1 and self._rows_since_build >= DELTA_ROWS
            if not self._has_index or force_index or grown or segments > MAX_SEGMENTS:
                # Noted before the build: a search that reads the table once the IVF_RQ index is committed, before
                # ``create_index`` is back, must re-rank the codes' estimates (with the settings of the index
                # before, none or IVF_FLAT's, it returned them as distances, in their order). Until the commit
                # the same settings query the old index or a flat table exactly, at the cost of the re-ranking.
                before, self._index_type = self._index_type, VECTOR_INDEX
                try:
                    self._index_vectors(self._table, rows)
                except BaseException:
                    self._index_type = before  # not built: the next ``maintain`` tries again
                    raise
                self._rows_since_build = 0
                rebuilt = True
        self._drop_old_versions()
        if rebuilt:
            # That clean-up came before the optimisation of the new index, which (at 100,000 rows) wrote it
            # again: the copy it replaced stays on disk until a clean-up after it (the IVF_FLAT index was on
            # disk twice, 1,546 bytes a memory, until the next ``maintain``: docs/benchmarks/vector-index.md).
            self._drop_old_versions()
        self._appends = 0

    def _halve(self) -> None:
        """Rebuild a float32 table written before vectors were kept in half precision from its own rows
        (``build``, ``switch``: searches go on meanwhile; this runs on the projector's thread, so no ``apply``
        can come between the read and the switch)."""
        with self._lock.shared():
            table = self._table.to_arrow()
        matrix = table["vector"].combine_chunks().flatten().to_numpy(zero_copy_only=False)
        matrix = matrix.reshape(table.num_rows, self._dim)
        rows = [
            ProjectionRow(i, "", kind, tuple(scopes or ()), bool(live), at, matrix[n].tolist())
            for n, (i, kind, scopes, live, at) in enumerate(
                zip(
                    *(table[c].to_pylist() for c in ("id", "kind", "scopes", "live", "event_time")),
                    strict=True,
                )
            )
        ]
        staged = self.build(rows)
        staged.switch()
        staged.drop_old()

    def _drop_old_versions(self) -> None:
        """Delete the files only older versions of the table use. Compaction writes every row again, so until
        they go the table takes its size twice and more (at 10,000 memories 6.3 KB per memory after ``maintain``
        against 1.6 KB in the current version alone: docs/benchmarks/scale.md). No search can be reading an older
        version then: each holds the lock shared while it reads, and nothing else in the process opens the table
        at a version of its own (``backup`` copies the files in this same thread)."""
        with self._lock.exclusive(), warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "readers of older versions would fail": none can
            # Compacted and indexed just before: this optimize finds nothing left to rewrite and only cleans up.
            self._table.optimize(cleanup_older_than=timedelta(seconds=0))

    def _compact(self, table: lancedb.table.Table, *, rows: int, has_scalar: bool) -> bool:
        """Create the scalar indexes once the table is large enough, compact; returns whether they exist."""
        if rows >= self._scalar_threshold and not has_scalar:
            for column, kind in SCALAR_INDEXES:
                table.create_index(column, config=kind(), replace=True)
            has_scalar = True
        table.optimize(cleanup_older_than=timedelta(minutes=5))
        return has_scalar

    def _index_vectors(self, table: lancedb.table.Table, rows: int) -> None:
        partitions = max(1, rows // self._partition_rows)
        config = IvfRq(distance_type="cosine", num_partitions=partitions, num_bits=RQ_BITS)
        table.create_index("vector", config=config, replace=True)

    def index_segments(self) -> int:
        """How many segments the vector index has (0 without one); each is searched on its own."""
        found = (ix.num_segments or 1 for ix in self._table.list_indices() if "vector" in ix.columns)
        return next(found, 0)

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
        with self._lock.shared():  # a rebuild's switch waits for this search; the table it reads stays whole
            return self._search(vector, " AND ".join(where), k=k, vectors=vectors)

    def _search(
        self, vector: Sequence[float] | np.ndarray, where: str, *, k: int, vectors: bool
    ) -> tuple[list[tuple[str, float]], np.ndarray | None]:
        query = self._table.search(np.asarray(vector, dtype=np.float32), vector_column_name="vector")
        assert isinstance(query, LanceVectorQueryBuilder)
        query = query.distance_type("cosine").where(where, prefilter=True)
        query = query.select(["id", "_distance", "vector"] if vectors else ["id", "_distance"]).limit(k)
        index_type = self._index_type  # read once: ``maintain`` may change it meanwhile
        if index_type == VECTOR_INDEX:
            # 0: no limit. The RaBitQ distances are estimates: the best k·REFINE are re-ranked by exact distance.
            query = query.minimum_nprobes(self._nprobes).maximum_nprobes(0)
            query = query.refine_factor(max(REFINE, -(-CANDIDATES // k)))
        elif index_type == "IvfFlat":
            # The IVF_FLAT index of an older version, until the next ``maintain`` replaces it: exact distances.
            query = query.minimum_nprobes(self._nprobes).maximum_nprobes(0)
        elif index_type is not None:
            # An IVF_PQ index left by an older version, until the next ``maintain`` replaces it: its distances
            # are approximate, so the candidates are re-ranked by exact distance.
            query = query.nprobes(32).refine_factor(8)
        result = query.to_arrow()
        hits = list(zip(result["id"].to_pylist(), result["_distance"].to_pylist(), strict=True))
        if not vectors:
            return hits, None
        column = result["vector"].combine_chunks()
        matrix = column.flatten().to_numpy(zero_copy_only=False).reshape(len(hits), self._dim)
        return hits, matrix.astype(np.float32)

    def live_status(self) -> dict[str, bool]:
        with self._lock.shared():
            table = self._table.to_arrow().select(["id", "live"]) if self._table.count_rows() else None
        if table is None:
            return {}
        return dict(zip(table["id"].to_pylist(), table["live"].to_pylist(), strict=True))

    def duplicates(self) -> list[str]:
        with self._lock.shared():
            ids = self._table.search().select(["id"]).limit(None).to_arrow()["id"].to_pylist()
        return sorted(i for i, n in Counter(ids).items() if n > 1)

    @property
    def has_ann_index(self) -> bool:
        return self._has_index

    @property
    def has_scalar_indexes(self) -> bool:
        return self._has_scalar

    def count(self) -> int:
        with self._lock.shared():
            return int(self._table.count_rows())


class StagedTable:
    """A table built beside the live one (``VectorIndex.build``): catch up with ``apply``, then ``switch``."""

    def __init__(
        self,
        owner: VectorIndex,
        db: lancedb.DBConnection,
        table: lancedb.table.Table,
        name: str,
        index_type: str | None,
        has_scalar: bool,
    ) -> None:
        self._owner, self._db, self._table, self._name = owner, db, table, name
        self._index_type, self._has_scalar = index_type, has_scalar
        self._appends = 0
        self._old: str | None = None  # the table ``switch`` replaced, for ``drop_old``

    def apply(self, upserts: Sequence[ProjectionRow], deletes: Sequence[str]) -> None:
        """As ``VectorIndex.apply`` (never ``fresh``: the table may hold any of these rows already)."""
        stale = [r.id for r in upserts] + list(deletes)
        if stale:
            self._table.delete(f"id IN ({', '.join(_sql_str(i) for i in stale)})")
        if upserts:
            self._table.add(self._owner._arrow(upserts))
        if stale or upserts:
            self._appends += 1

    def switch(self) -> None:
        """Make this table the live one (``CURRENT``), waiting only for the searches under way."""
        owner, name = self._owner, self._name
        tmp = owner._dir / "CURRENT.tmp"
        tmp.write_text(name)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        with owner._lock.exclusive():
            with owner._staging:
                owner._staged.discard(name)
            self._old = owner._name
            tmp.replace(owner._dir / "CURRENT")
            owner._db, owner._table, owner._name = self._db, self._table, name
            owner._index_type, owner._has_scalar = self._index_type, self._has_scalar
            owner._vector_type = pa.float16()
            owner._rows_since_build = 0
            owner._appends = self._appends
        fsync_directory(owner._dir)  # the switch is on disk before the old table's files are dropped

    def drop_old(self) -> None:
        """Drop every table but this one, whose files go with them."""
        for stale in self._db.list_tables().tables:
            if stale != self._name and stale not in self._owner._staged:  # another rebuild's, still staged
                self._db.drop_table(stale)  # no search holds it any more: each takes the table under the lock
        if self._old and self._old not in self._db.list_tables().tables:
            shutil.rmtree(self._owner._dir / f"{self._old}.lance", ignore_errors=True)

    def discard(self) -> None:
        """Drop the table (a rewrite that failed); the live one is untouched."""
        if self._name != self._owner._name and self._name in self._db.list_tables().tables:
            self._db.drop_table(self._name)
        with self._owner._staging:
            self._owner._staged.discard(self._name)


def _with_vector(schema: pa.Schema, value_type: pa.DataType, dim: int) -> pa.Schema:
    return schema.set(schema.get_field_index("vector"), pa.field("vector", pa.list_(value_type, dim)))


def _vacuum(table: lancedb.table.Table) -> None:
    """Compact and delete every old version now, so deleted rows leave no file behind."""
    with warnings.catch_warnings():
        # Lance warns that readers of older versions would fail: ``replace_all`` calls this only on its new
        # table, before any search can see it.
        warnings.simplefilter("ignore", UserWarning)
        # Twice: the first optimisation cleans up before it optimises the new vector index, which may write it
        # again (``VectorIndex.maintain``); the second finds nothing to do but the clean-up.
        for _ in range(2):
            table.optimize(cleanup_older_than=timedelta(seconds=0), delete_unverified=True)
