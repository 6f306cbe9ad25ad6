"""The canonical store: Kùzu holds every memory, its scopes, entities, version edges and the change log.

Only this module speaks Cypher, and every value is a bound parameter. The database file is versioned by a
generation number so that a purge can rebuild it (EXPORT/IMPORT) and swap it in: Kùzu keeps the bytes of
deleted rows in its file, and a purge must leave no trace of what it erased.
"""

from __future__ import annotations

import ctypes
import errno
import os
import secrets
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import kuzu

from storage.adapters._rwlock import RWLock
from storage.adapters.kuzu._cypher import (
    _ABANDONED,
    _RECORDING,
    COPY_TO_MENTION,
    MENTION_COPIES,
    RECOPY_MENTIONS,
    SCHEMA_VERSION,
    _checkpoint_timeout,
    _exec,
    _failed_past_the_log,
    _fsync_dir,
    _plain_path,
    _rebuild_failed,
    _rows,
    _schema,
    cypher_string,
    log,
    vector_params,
)
from storage.adapters.kuzu._kept import MENTIONS_KEPT, RELATIONS_KEPT, Mention, PerEntity
from storage.adapters.kuzu.conversations import _Conversations
from storage.adapters.kuzu.exports import _Exports
from storage.domain.errors import StorageUnavailable, StoreFailed, StoreMismatch
from storage.domain.records import Relation
from storage.ports.canonical import FileSpace, Session

# Journaled statements left for the final pause of a rewrite; more are replayed beside live traffic first. About
# 1 ms each on this machine (bench/erasure.py's phases): 20 keep the pause near 20 ms; the catch-up beside live
# traffic runs up to 32 rounds to get there, each replaying what came in during the one before.
REPLAY_IN_PAUSE = 20
Paused = Callable[[Callable[[], None]], None]
# Kùzu's buffer pool defaults to 80% of physical memory, and it keeps a state word per 4 KiB page of the pool
# resident from the open on, used or not: 2.4 MiB per GiB, 86 MiB of the owner's anonymous memory on a 24 GiB
# machine at any store size (docs/benchmarks/coldstart.md, "Footprint"). 4 GiB costs 9 MiB of them. The pool is not
# only a cache of what recalls read: a checkpoint, and the import of an erasure's rewrite, hold a node group's columns
# (up to 131,072 memories) in it at once, and fail with "Buffer manager exception: Unable to allocate memory" when
# they do not fit, after which every write is refused. With 512 MiB a store of 4,400 memories of MAX_CONTENT_CHARS
# (a document import's chunks) could no longer checkpoint, and the rewrite of the 100,000-memory benchmark store
# needed between 256 and 384 MiB for its Memory table alone (so about 500 MiB once its node group is full); 4 GiB
# took 8,000 such memories and their rewrite (tests/storage/test_kuzu_buffer_pool.py). Pages beyond the cap are
# evicted and read again from the file, as they would be under memory pressure anyway.
BUFFER_POOL_CAP = 4 << 30
# An explicit CHECKPOINT starts only with this many times its log free on the disk, and the margin more.
CHECKPOINT_ROOM_FACTOR, CHECKPOINT_ROOM_MARGIN = 4, 8 << 20
# Fold the log into the file after a commit that takes it past this (Kùzu's own threshold).
AUTO_CHECKPOINT_BYTES = 16 << 20
PAGE_BYTES = 4096  # Kùzu's page size (``fsm_info`` counts pages)
# The Meta key that says every MENTIONS edge carries its memory's copies (``_add_mention_copies``).
MENTION_COPIES_DONE = "mention_copies"
# The Meta key holding the change log's head and the memories' counts at the last close (``_check_mention_copies``).
COPIES_CLOSED_AT = "mention_copies_closed_at"
# The Meta key that says no column an older release's killed upgrade left empty is left (``_fill_empty_columns``).
EMPTY_COLUMNS_FILLED = "empty_columns_filled"


def _buffer_pool_bytes() -> int:
    """The smaller of ``BUFFER_POOL_CAP`` and Kùzu's own default (80% of physical memory)."""
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError):
        return BUFFER_POOL_CAP
    return min(BUFFER_POOL_CAP, int(physical * 0.8))


def open_database(path: Path) -> kuzu.Database:
    """A Kùzu database at ``path`` with the bounded buffer pool."""
    # Kùzu's own checkpoint, inside the commit that takes its log past 16 MiB, waits for the reads under way and
    # holds them on, so beside steady recalls it gave up after about 6 s, every read and write stalled meanwhile,
    # and the next commit tried again: the store checkpoints itself after such a commit, alone (``_after_commit``).
    return kuzu.Database(str(path), buffer_pool_size=_buffer_pool_bytes(), auto_checkpoint=False)


def _at_once(fn: Callable[[], None]) -> None:
    """For a caller that has already stopped every write (tests, tools)."""
    fn()


def _converting(done: int, total: int, elapsed: float, *, before: int = 0) -> str:
    """What the half-precision conversion of an older store is doing, for a caller waiting on the open: ``done``
    of ``total`` memories converted, ``before`` of them by an earlier open whose conversion was stopped (they
    count as done, not in the rate of this one)."""
    said = f"converting the stored vectors to half precision, once after an upgrade: {done:,} of {total:,} memories"
    if done > before and total > done:
        said += f", about {max(1, round(elapsed / (done - before) * (total - done) / 60))} min left"
    return said


@dataclass
class _Rewrite:
    """One rewrite in progress: the new file's name, the snapshot connection, the new database."""

    name: str = ""
    export: str = ""
    snap: kuzu.Connection | None = None
    fresh: kuzu.Database | None = None
    conn: kuzu.Connection | None = None
    replayed: int = 0
    old: kuzu.Database | None = None
    durable: bool = False  # the switch of CURRENT reached the disk (its directory was synced)


def _replay(conn: kuzu.Connection, statements: Sequence[tuple[str, dict[str, Any]]]) -> None:
    """Apply journaled statements to the new database in one transaction."""
    if not statements:
        return
    conn.execute("BEGIN TRANSACTION")
    try:
        for query, params in statements:
            _exec(conn, query, params)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _require_room(directory: Path, export: Path) -> None:
    """Refuse to import where the new file cannot fit: an IMPORT that runs out of disk half-way leaves a
    database that Kùzu cannot even close. The new file takes about as much as the parquet export, 3× for
    margin (its WAL and checkpoint)."""
    need = 3 * sum(f.stat().st_size for f in export.rglob("*") if f.is_file()) + (8 << 20)
    stat = os.statvfs(directory)
    if stat.f_bavail * stat.f_frsize < need:
        raise OSError(
            errno.ENOSPC, f"not enough free disk space to rewrite the canonical store ({need} bytes)"
        )


def _end_transaction(conn: kuzu.Connection) -> None:
    """End what a failed statement left open: closing a connection whose transaction a failed EXPORT left
    half-aborted makes Kùzu abort the process ("Invalid transaction type to rollback")."""
    for stmt in ("COMMIT", "ROLLBACK"):
        try:
            conn.execute(stmt)
        except RuntimeError:
            continue
        return


class GraphStore(_Exports, _Conversations):
    """Owns the Kùzu database of a data directory. Thread-safe: one write connection (used only by the
    reconciler's thread) and one read connection per reading thread. Implements ``CanonicalStore``."""

    name = "kuzu"
    shared = False  # one process owns the directory (owner.lock): the reconciler numbers the changes
    identity = "kuzu"  # the graph lives in the data directory it serves

    def __init__(
        self,
        directory: Path,
        *,
        dim: int,
        embedder_name: str,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        """``progress`` is told, while the open runs a long one-off conversion of an older store, what it is
        doing and how far it got (the owner says it to callers that wait for the store)."""
        self._dir = directory
        self._progress = progress
        self._dir.mkdir(parents=True, exist_ok=True)
        self._dim = dim
        self._lock = RWLock()
        self._local = threading.local()
        self._generation = 0
        self._data_version = 0  # moves when a transaction ends, or the database is switched (``_kept``)
        # An entity's mentions are read whole at the second ask at one data version: the reader's filtered
        # statement reads only the edges' own columns (``MENTION_COPIES``) and hands back at most ``limit`` ids,
        # while the whole read hands back every mention (a hub's 3,000 rows: 34 against about 5 ms at 100,000
        # memories, most of it their conversion), which pays only if asked again before the next commit. Its
        # relations cost more whole (every edge's properties): read whole at the third ask, when a second recall
        # wants them (the graph lane asks twice in one: its newest over every scope, then a reader's window).
        self._mentions: PerEntity[Mention] = PerEntity(after=1, rows=MENTIONS_KEPT)
        self._relations: PerEntity[Relation] = PerEntity(after=2, rows=RELATIONS_KEPT)
        self._readers: list[kuzu.Connection] = []
        self._readers_lock = threading.Lock()
        self._failed: str | None = None
        self._shut = False  # closed (``close``)
        # The statements committed since a rewrite's snapshot, while one runs (see ``rebuild``).
        self._journal: list[tuple[str, dict[str, Any]]] | None = None
        self._journal_lock = threading.Lock()
        self._rebuild_lock = threading.Lock()
        self.checkpoint_after = AUTO_CHECKPOINT_BYTES  # log bytes (tests may lower it)
        self._long_reads = (
            0  # snapshots open (exports): a checkpoint after a commit would wait for all of them
        )
        self._long_reads_lock = threading.Lock()
        self._cleanup_stale_files()
        self._open()
        self._check_meta(embedder_name, dim)

    # -- files -------------------------------------------------------------------------------------

    def _current_name(self) -> str:
        pointer = self._dir / "CURRENT"
        return pointer.read_text().strip() if pointer.exists() else "graph-000001.kz"

    def _cleanup_stale_files(self) -> None:
        """Remove what an interrupted rebuild left: exports and database files that CURRENT does not name."""
        current = self._current_name()
        for entry in self._dir.iterdir():
            stale_db = entry.name.startswith("graph-") and not entry.name.startswith(current)
            if stale_db or entry.name.startswith(".export") or entry.name == "CURRENT.tmp":
                if entry.is_dir():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()

    def _open(self) -> None:
        try:
            self._db = open_database(self._dir / self._current_name())
        except RuntimeError as exc:
            raise StorageUnavailable(
                f"cannot open the canonical store in {self._dir}: {exc}",
                hint="check that the data directory is writable and that no other process owns it",
            ) from exc
        self._writer = kuzu.Connection(self._db)
        for stmt in _schema(self._dim):
            self._writer.execute(stmt)
        self._add_mention_columns()
        self._add_mention_copies()
        self._check_mention_copies()
        self._add_relation_scopes()
        self._add_relation_names()
        self._fill_empty_columns()
        self._halve_vectors()

    HALVE_BATCH = 2000  # memories converted per statement by ``_halve_vectors``

    def _halve_vectors(self) -> None:
        """Convert the FLOAT[dim] ``vector`` of a store written before vectors were kept in half precision
        (``storage.adapters._half``) to ``vector16``/``vector_exp``, then drop it; its pages are free pages
        from then on (reused by later writes, given back by the next rewrite). Resumable: a conversion stopped
        midway goes on from the rows still without ``vector16`` at the next open."""
        columns = {r[1] for r in _rows(self._writer, "CALL TABLE_INFO('Memory') RETURN *")}
        if "vector" not in columns:
            return
        # About as long as importing the vectors (a millisecond or two a memory here): said, so a long first
        # open after an upgrade is not taken for a hang.
        log.warning("converting the canonical store's vectors to half precision (once, at this open)")
        self._writer.execute(f"ALTER TABLE Memory ADD IF NOT EXISTS vector16 UINT16[{int(self._dim)}]")
        self._writer.execute("ALTER TABLE Memory ADD IF NOT EXISTS vector_exp INT16")
        # Counted over the store, so a conversion resumed after a stop says how far the whole store got.
        total, left = _rows(
            self._writer,
            "MATCH (m:Memory) WHERE m.vector IS NOT NULL "
            "RETURN count(m), count(CASE WHEN m.vector16 IS NULL THEN 1 END)",
        )[0]
        before = int(total) - int(left)
        done, started, said = before, time.monotonic(), 0.0
        while True:
            now = _converting(done, int(total), time.monotonic() - started, before=before)
            if self._progress is not None:
                self._progress(now)
            if time.monotonic() - said >= 30:
                log.warning("%s", now)
                said = time.monotonic()
            rows = _rows(
                self._writer,
                "MATCH (m:Memory) WHERE m.vector16 IS NULL AND m.vector IS NOT NULL RETURN m.id, m.vector "
                f"LIMIT {int(self.HALVE_BATCH)}",
            )
            if not rows:
                break
            done += len(rows)
            _exec(
                self._writer,
                "UNWIND $rows AS r MATCH (m:Memory {id: r.id}) "
                f"SET m.vector16 = CAST(r.vector16 AS UINT16[{int(self._dim)}]), m.vector_exp = CAST(r.vector_exp AS INT16)",
                {"rows": [{"id": mid, **vector_params(vector)} for mid, vector in rows]},
            )
        # Checkpointed before and after the drop: Kùzu 0.11 crashed (a segmentation fault) checkpointing a log
        # that held both the updates of a column chunk and the drop of another column of the same table.
        self._writer.execute("CHECKPOINT")
        self._writer.execute("ALTER TABLE Memory DROP vector")
        self._writer.execute("CHECKPOINT")
        log.warning("the canonical store's vectors are kept in half precision now")

    def _upgrade(self, *statements: str) -> None:
        """Run an open-time upgrade's statements (columns added, then filled) in one transaction: an open killed
        midway (a large store's fill takes a while) leaves the table as it was, so the next open does it whole.
        Apart, a kill after the ALTER left the column there and empty, and every later open, finding the
        column, took the upgrade as done: the relations' scope lists empty hid them from every reader."""
        self._writer.execute("BEGIN TRANSACTION")
        try:
            for statement in statements:
                self._writer.execute(statement)
        except BaseException:
            self._writer.execute("ROLLBACK")
            raise
        self._writer.execute("COMMIT")

    def _add_mention_columns(self) -> None:
        """Give MENTIONS edges of a store written before they carried what each memory gave the entity the
        columns, filled with the entity's current name, type and aliases (who gave what is not known for them:
        see docs/security.md, "Erasure")."""
        columns = {r[1] for r in _rows(self._writer, "CALL TABLE_INFO('MENTIONS') RETURN *")}
        if "aliases" in columns:
            return
        self._upgrade(
            *(
                f"ALTER TABLE MENTIONS ADD {column} {kind}"  # fixed names only
                for column, kind in (("name", "STRING"), ("type", "STRING"), ("aliases", "STRING[]"))
                if column not in columns
            ),
            "MATCH (:Memory)-[r:MENTIONS]->(e:Entity) SET r.name = e.name, r.type = e.type, r.aliases = e.aliases",
        )

    def _add_mention_copies(self) -> None:
        """Give MENTIONS edges of a store written before they carried what ``mentioning`` reads of their memory
        (``MENTION_COPIES``) the columns, filled from the memories: once, marked done in Meta in the same
        transaction as the fill, so an open interrupted before the mark fills them all again at the next one. About
        a minute at 100,000 memories (310,000 mentions), said in the log."""
        done = _rows(self._writer, "MATCH (m:Meta {key: $k}) RETURN m.value", {"k": MENTION_COPIES_DONE})
        if done:
            return
        columns = {r[1] for r in _rows(self._writer, "CALL TABLE_INFO('MENTIONS') RETURN *")}
        for column, kind, _ in MENTION_COPIES:
            if column not in columns:
                self._writer.execute(f"ALTER TABLE MENTIONS ADD {column} {kind}")  # fixed names only
        mentions = int(_rows(self._writer, "MATCH ()-[r:MENTIONS]->() RETURN count(r)")[0][0])
        # One statement (the fill and its mark commit together): nothing to count as it goes, so said once, with
        # its size. About 0.2 ms a mention here under load: a minute for 310,000 (100,000 memories).
        said = (
            f"copying each memory's scopes, status and validity onto its {mentions:,} mentions, once after an "
            f"upgrade (about {max(1, round(mentions * 0.0002))} s)"
        )
        if mentions:
            log.warning("%s", said)
            if self._progress is not None:
                self._progress(said)
        started = time.monotonic()
        self._writer.execute("BEGIN TRANSACTION")
        try:
            self._writer.execute(f"MATCH (m:Memory)-[r:MENTIONS]->(:Entity) SET {COPY_TO_MENTION}")
            _exec(self._writer, "CREATE (:Meta {key: $k, value: '1'})", {"k": MENTION_COPIES_DONE})
        except BaseException:
            self._writer.execute("ROLLBACK")
            raise
        self._writer.execute("COMMIT")
        if mentions:
            log.warning("the mentions carry their memory's fields now (%.1f s)", time.monotonic() - started)

    def _check_mention_copies(self) -> None:
        """Re-copy the mentions' copies that disagree with their memory, when writes may have happened since the
        last close of a release that keeps them: the change log's head, or a count of the memories, is not the
        one noted then (``_mark_copies_closed``). An older release writing to the store meanwhile (a rolled-back upgrade, an
        older client that owned the directory for a while) created mentions without copies and retired, amended
        or moved memories without re-copying, and the mark of the one-off upgrade was already there: the graph
        lane missed the memories it wrote and kept what it retired live on the edges until a ``reindex``. After
        a clean close the head is the one noted and nothing is read; else one pass over every mention
        (``stale_copies``: 0.4 s at 100,000 memories)."""
        noted = _rows(self._writer, "MATCH (m:Meta {key: $k}) RETURN m.value", {"k": COPIES_CLOSED_AT})
        if noted and noted[0][0] == self._copies_state():
            return
        stale = self.stale_copies(self._writer)
        if not stale:
            return
        log.warning(
            "copying the fields of %d memories written by another release onto their mentions", len(stale)
        )
        self._writer.execute("BEGIN TRANSACTION")
        try:
            for mid in stale:
                _exec(self._writer, RECOPY_MENTIONS, {"id": mid})
        except BaseException:
            self._writer.execute("ROLLBACK")
            raise
        self._writer.execute("COMMIT")

    def _add_relation_scopes(self) -> None:
        """Give RELATES edges of a store written before they carried their memory's scope list the column,
        filled from the memories (once: a join that reads every memory)."""
        columns = {r[1] for r in _rows(self._writer, "CALL TABLE_INFO('RELATES') RETURN *")}
        if "scopes" in columns:
            return
        self._upgrade(
            "ALTER TABLE RELATES ADD scopes STRING[]",
            "MATCH (:Entity)-[r:RELATES]->(:Entity) WITH r MATCH (m:Memory) WHERE m.id = r.memory_id "
            "SET r.scopes = m.scopes",
        )

    def _add_relation_names(self) -> None:
        """Give RELATES edges of a store written before they carried their ends' names as the recording memory
        spelt them the columns, filled from that memory's mentions of its ends (once: a join over every
        mention). An end the memory's mentions do not name (none is known) keeps the entity's own name."""
        columns = {r[1] for r in _rows(self._writer, "CALL TABLE_INFO('RELATES') RETURN *")}
        if "object_name" in columns:
            return
        self._upgrade(
            *(
                f"ALTER TABLE RELATES ADD {column} STRING"  # fixed names only
                for column in ("subject_name", "object_name")
                if column not in columns
            ),
            # One end at a time: the cycle through both mentions of one memory in one pattern crashed Kùzu 0.11
            # (a segmentation fault on a 3,000-memory store).
            "MATCH (m:Memory)-[x:MENTIONS]->(:Entity)-[r:RELATES]->(:Entity) WHERE r.memory_id = m.id "
            "SET r.subject_name = x.name",
            "MATCH (m:Memory)-[x:MENTIONS]->(:Entity)<-[r:RELATES]-(:Entity) WHERE r.memory_id = m.id "
            "SET r.object_name = x.name",
            "MATCH (a:Entity)-[r:RELATES]->(b:Entity) WHERE r.subject_name IS NULL OR r.object_name IS NULL "
            "SET r.subject_name = coalesce(r.subject_name, a.name), r.object_name = coalesce(r.object_name, b.name)",
        )

    def _fill_empty_columns(self) -> None:
        """Fill the columns that a release before the upgrades were one transaction (``_upgrade``) added and was
        killed before filling: it auto-committed each ALTER, and every later open, finding the column, took the
        upgrade as done, so the relations' scope lists stayed empty (every relation hidden from every reader),
        their ends' names empty (the graph lane failed) or the mentions' names, types and aliases empty. Once per
        store, marked in Meta with the fill: three counts over four columns when nothing is empty."""
        if _rows(self._writer, "MATCH (m:Meta {key: $k}) RETURN m.value", {"k": EMPTY_COLUMNS_FILLED}):
            return
        # The statements below write every one of these columns, so an empty one is the old upgrade's.
        mentions = _rows(self._writer, "MATCH ()-[r:MENTIONS]->() WHERE r.name IS NULL RETURN count(r)")[0][0]
        scopes, names = _rows(
            self._writer,
            "MATCH ()-[r:RELATES]->() RETURN count(CASE WHEN r.scopes IS NULL THEN 1 END), "
            "count(CASE WHEN r.subject_name IS NULL OR r.object_name IS NULL THEN 1 END)",
        )[0]
        fills = []
        if mentions:  # the three columns were added together, then filled by one statement
            fills.append(
                "MATCH (:Memory)-[r:MENTIONS]->(e:Entity) WHERE r.name IS NULL "
                "SET r.name = e.name, r.type = e.type, r.aliases = e.aliases"
            )
        if scopes:
            fills.append(
                "MATCH (:Entity)-[r:RELATES]->(:Entity) WHERE r.scopes IS NULL WITH r MATCH (m:Memory) "
                "WHERE m.id = r.memory_id SET r.scopes = m.scopes"
            )
        if names:  # as ``_add_relation_names`` fills them, the end an older fill reached kept
            fills += [
                "MATCH (m:Memory)-[x:MENTIONS]->(:Entity)-[r:RELATES]->(:Entity) WHERE r.memory_id = m.id "
                "AND r.subject_name IS NULL SET r.subject_name = x.name",
                "MATCH (m:Memory)-[x:MENTIONS]->(:Entity)<-[r:RELATES]-(:Entity) WHERE r.memory_id = m.id "
                "AND r.object_name IS NULL SET r.object_name = x.name",
                "MATCH (a:Entity)-[r:RELATES]->(b:Entity) WHERE r.subject_name IS NULL OR r.object_name IS NULL "
                "SET r.subject_name = coalesce(r.subject_name, a.name), "
                "r.object_name = coalesce(r.object_name, b.name)",
            ]
        if fills:
            log.warning(
                "filling what an interrupted upgrade left empty: %d mentions, %d relations",
                mentions,
                max(scopes, names),
            )
        self._upgrade(*fills, f"CREATE (:Meta {{key: '{EMPTY_COLUMNS_FILLED}', value: '1'}})")  # a fixed key

    def _check_meta(self, embedder_name: str, dim: int) -> None:
        meta = dict((k, v) for k, v in _rows(self._writer, "MATCH (m:Meta) RETURN m.key, m.value"))
        if "id_secret" not in meta:  # a new store, or one made before secrets (storage.engine.conversations)
            self._writer.execute("CREATE (:Meta {key: 'id_secret', value: $v})", {"v": secrets.token_hex(32)})
        if "schema" not in meta:  # a new store (``_add_mention_copies`` may have marked it already)
            for key, value in (("schema", SCHEMA_VERSION), ("embedder", embedder_name), ("dim", str(dim))):
                self._writer.execute("CREATE (:Meta {key: $k, value: $v})", {"k": key, "v": value})
            return
        if meta.get("embedder") != embedder_name or meta.get("dim") != str(dim):
            raise StoreMismatch(
                f"this data directory holds vectors from {meta.get('embedder')} ({meta.get('dim')}-d), "
                f"not {embedder_name} ({dim}-d)",
                hint="use the embedder it was built with, or export and import into a new directory",
            )
        if meta.get("schema") != SCHEMA_VERSION:
            raise StoreMismatch(f"unknown canonical schema version {meta.get('schema')!r}")

    def close(self) -> None:
        if self._failed is not None:
            # Closing checkpoints, which would write the unacknowledged transaction Kùzu holds in memory (or
            # abort the process on the same I/O error). Leave the files as they are: the WAL on disk is the truth.
            _ABANDONED.append(self._db)
            return
        with self._lock.exclusive():
            if self._shut:
                return
            self._shut = True
            if not self._mark_copies_closed():
                _ABANDONED.append(self._db)  # as after a failed commit: the WAL on disk is the truth
                return
            self._close_connections()
            self._db.close()

    def _mark_copies_closed(self) -> bool:
        """Note in Meta the change log's head and the memories' counts at a close (``_check_mention_copies``),
        unless noted already. False when the note could not be written (a full or read-only disk): the
        database must then not be closed (its checkpoint would meet the same error), and the next open checks
        the copies."""
        try:
            state = self._copies_state()
            noted = _rows(self._writer, "MATCH (m:Meta {key: $k}) RETURN m.value", {"k": COPIES_CLOSED_AT})
            if not noted or noted[0][0] != state:
                _exec(
                    self._writer,
                    "MERGE (m:Meta {key: $k}) SET m.value = $v",
                    {"k": COPIES_CLOSED_AT, "v": state},
                )
        except RuntimeError:
            log.warning("could not note the close in the canonical store", exc_info=True)
            return False
        return True

    def _copies_state(self) -> str:
        """The change log's head, with what of the memories their copies follow, counted: the log alone may have
        been pruned whole since (its head then reads 0, as it may have at the close). One pass over five columns
        of the memories."""
        counts = _rows(
            self._writer,
            "MATCH (m:Memory) RETURN count(*), count(m.retired_at), count(m.superseded_by), count(m.valid_to), "
            "sum(size(m.scopes))",
        )[0]
        return ":".join(str(x or 0) for x in [self.max_seq(self._writer), *counts])

    def _close_connections(self) -> None:
        with self._readers_lock:
            for conn in self._readers:
                conn.close()
            self._readers.clear()
        self._writer.close()
        self._generation += 1
        self._data_version += 1

    # -- connections -------------------------------------------------------------------------------

    @property
    def failed(self) -> str | None:
        """Why the database can no longer be trusted in memory (a commit failed to reach disk), else None."""
        return self._failed

    def _require_healthy(self) -> None:
        if self._failed is not None:
            raise StoreFailed(
                f"the canonical store could not write to disk ({self._failed}); nothing unacknowledged was kept",
                hint="free disk space or make the data directory writable; Mnemograph restarts its owner "
                "process and recovers every acknowledged write from disk",
            )

    @contextmanager
    def read(self) -> Iterator[Session]:
        """A read connection for the calling thread, valid for the duration of the block."""
        self._require_healthy()
        with self._lock.shared():
            yield self._thread_conn()

    def _thread_conn(self) -> kuzu.Connection:
        """The calling thread's read connection; the caller (or the thread it works for) holds the read lock."""
        conn = getattr(self._local, "conn", None)
        if conn is None or getattr(self._local, "generation", -1) != self._generation:
            conn = kuzu.Connection(self._db)
            self._local.conn = conn
            self._local.generation = self._generation
            with self._readers_lock:
                self._readers.append(conn)
        return conn

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        """The write connection inside one transaction; committed on success, rolled back on error.

        Only the reconciler's thread calls this.
        """
        self._require_healthy()
        with self._lock.shared():
            conn = self._writer
            journal = self._journal
            statements: list[tuple[str, dict[str, Any]]] = []
            conn.execute("BEGIN TRANSACTION")
            if journal is not None:
                _RECORDING[conn] = statements
            try:
                try:
                    yield conn
                finally:
                    _RECORDING.pop(conn, None)
            except BaseException:
                conn.execute("ROLLBACK")
                self._data_version += 1
                raise
            try:
                conn.execute("COMMIT")
            except RuntimeError as exc:
                self._data_version += 1
                if _checkpoint_timeout(exc):
                    # The commit is in the WAL and visible (Kùzu commits, then checkpoints when the WAL is
                    # large, and only the checkpoint waited in vain for an open read transaction): the write is
                    # acknowledged and a later commit or CHECKPOINT folds the WAL in.
                    log.warning("a commit's checkpoint waited for a long read; it is retried later")
                    self._journaled(journal, statements)
                    return
                # The WAL write failed (disk full, read-only). Kùzu may already show the transaction in
                # memory although it is not on disk: from now on nothing may be read or written through this
                # database; reopening it replays the WAL, which holds exactly the acknowledged commits.
                self._failed = str(exc).split(". Error:")[0][:300]
                if _failed_past_the_log(exc):
                    # The checkpoint Kùzu runs inside a large commit failed (a full disk), after the commit
                    # reached the WAL: the next open replays it, so the call's changes are kept.
                    raise StoreFailed(
                        f"the canonical store wrote this call's changes to its log but could not fold the log "
                        f"into its file: {self._failed}",
                        hint="this call's changes are kept: they are there once the store is reopened "
                        "(Mnemograph restarts its owner process); free disk space or make the data directory "
                        "writable; sent again, the call reports what is already stored",
                    ) from exc
                raise StoreFailed(
                    f"the canonical store could not commit: {self._failed}",
                    hint="nothing from this call was kept; free disk space or make the data directory "
                    "writable, then retry",
                ) from exc
            # Before the caller hears of the commit: a read it starts next never reuses what was read before.
            self._data_version += 1
            self._journaled(journal, statements)
        if journal is None:  # a rewrite's snapshot is open otherwise: the log grows until it is done
            self._after_commit()

    def _after_commit(self) -> None:
        """Fold the log into the file once it passes ``checkpoint_after`` bytes, as Kùzu would inside the commit,
        but with no read under way (``checkpoint``). Not while an export's snapshot is open: the checkpoint
        would wait for all of it, with every read and write behind it; the next commit after it does it."""
        path = self._dir / self._current_name()
        wal = path.with_name(path.name + ".wal")
        try:
            size = wal.stat().st_size
        except OSError:
            return
        if size < self.checkpoint_after or self._long_reads:
            return
        try:
            self.checkpoint()
        except StorageUnavailable as exc:  # no room on the disk for it, or a read that would not end
            log.warning("the canonical store's log was not folded into its file: %s; tried again later", exc)
        except StoreFailed as exc:
            raise StoreFailed(
                f"the canonical store wrote this call's changes to its log but could not fold the log into its "
                f"file: {self._failed}",
                hint="this call's changes are kept: they are there once the store is reopened (Mnemograph "
                "restarts its owner process); free disk space or make the data directory writable; sent again, "
                "the call reports what is already stored",
            ) from exc

    def _journaled(self, journal: list[tuple[str, dict[str, Any]]] | None, statements: list[Any]) -> None:
        """A transaction committed while a rewrite journals: its statements join the journal, in commit order."""
        if journal is not None and statements:
            with self._journal_lock:
                journal.extend(statements)

    def rebuild(self, paused: Paused = _at_once) -> None:
        """Rewrite the database into a fresh file beside live traffic and swap it in.

        Deleted rows leave their bytes in Kùzu's file even after CHECKPOINT (and an update in place leaves the
        old value too: both measured), so a fresh file is what makes an erasure real. ``paused(fn)`` must run
        ``fn`` while no transaction is open or starts (the reconciler's ``on_writer``); it is called twice, for a
        few milliseconds each: to open a snapshot and start journaling the statements that commit from then on,
        and at the end to replay the last of them and switch ``CURRENT``. Between the two, in the calling
        thread, the snapshot is exported and imported into the new file and the journal replayed into it while
        reads and writes go on; reads wait only while the connections are switched.

        Crash-safe: CURRENT is switched by an atomic rename, and leftovers (the export, a new file CURRENT does
        not name, the old file) are removed at open. A failure before the switch (disk full, an unreadable
        export) removes what it wrote and raises StorageUnavailable: the store stays as it was and usable.
        """
        with self._rebuild_lock:
            job = _Rewrite()
            paused(lambda: self._rewrite_begin(job))
            try:
                self._rewrite_build(job)
                paused(lambda: self._rewrite_finish(job))
            except BaseException as exc:
                self._rewrite_abort(job)
                if isinstance(exc, (RuntimeError, OSError)):
                    raise _rebuild_failed(exc) from exc
                raise
            # The old database is no longer reachable: close it (its checkpoint writes to a file about to go) and
            # delete it, its WAL with it, outside every lock. Kept while the switch may not be on disk: after a
            # power cut CURRENT could still name it (the next open deletes whichever file CURRENT does not name).
            assert job.old is not None
            job.old.close()
            if job.durable:
                self._cleanup_stale_files()

    def _rewrite_begin(self, job: _Rewrite) -> None:
        """Writes paused: open the snapshot the new file is built from and journal every commit after it."""
        self._require_healthy()
        self._cleanup_stale_files()  # a failed rebuild of this process may have left the same names
        old = self._current_name()
        number = int(old.split("-")[1].split(".")[0]) + 1
        job.name, job.export = f"graph-{number:06d}.kz", f".export-{number:06d}"
        snap = kuzu.Connection(self._db)
        job.snap = snap
        snap.execute("BEGIN TRANSACTION READ ONLY")
        _rows(snap, "MATCH (m:Meta) RETURN count(*)")
        # No checkpoint after a commit while the snapshot is open (``transaction``): the WAL grows meanwhile.
        self._journal = []

    def _rewrite_build(self, job: _Rewrite) -> None:
        """Beside live traffic: export the snapshot, import it into the new file, replay most of the journal."""
        assert job.snap is not None
        with self._lock.shared(), _plain_path(self._dir) as plain:
            job.snap.execute(f"EXPORT DATABASE {cypher_string(f'{plain}/{job.export}')} (format='parquet')")
            job.snap.execute("COMMIT")
            job.snap.close()
            job.snap = None
            _require_room(self._dir, self._dir / job.export)
            job.fresh = open_database(self._dir / job.name)
            job.conn = kuzu.Connection(job.fresh)
            job.conn.execute(f"IMPORT DATABASE {cypher_string(f'{plain}/{job.export}')}")
        shutil.rmtree(self._dir / job.export, ignore_errors=True)
        _exec(job.conn, "CHECKPOINT")
        # Catch up with the writes that committed meanwhile, until what is left fits in a short pause.
        for _ in range(32):
            with self._journal_lock:
                todo = (self._journal or [])[job.replayed :]
            if len(todo) <= REPLAY_IN_PAUSE:
                break
            _replay(job.conn, todo)
            job.replayed += len(todo)
        # The new CURRENT, ready to be renamed over the old one in the final pause (a crash before the rename
        # leaves it to ``_cleanup_stale_files``).
        tmp = self._dir / "CURRENT.tmp"
        tmp.write_text(job.name)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())

    def _rewrite_finish(self, job: _Rewrite) -> None:
        """Writes paused: replay the rest of the journal, then switch CURRENT and the connections."""
        assert job.conn is not None
        assert job.fresh is not None
        with self._journal_lock:
            todo, self._journal = (self._journal or [])[job.replayed :], None
        _replay(job.conn, todo)
        tmp = self._dir / "CURRENT.tmp"  # written and synced by ``_rewrite_build``, before the pause
        with self._lock.exclusive():
            self._close_connections()
            try:
                tmp.replace(self._dir / "CURRENT")
            except OSError:
                self._writer = kuzu.Connection(self._db)  # not switched: the old file stays the store
                raise
            # Switched: from here on the new file is the store, whatever fails next. Taking it in memory at once
            # keeps the process writing where a restart will read (an abort now would keep the old one open
            # while CURRENT names the new one, and delete the old one's file under it).
            job.old, self._db, self._writer = self._db, job.fresh, job.conn
            job.fresh = job.conn = None
        try:
            _fsync_dir(self._dir)
            job.durable = True
        except OSError:
            log.warning(
                "could not sync the data directory after switching the canonical store's file; the old "
                "file is kept until the next start",
                exc_info=True,
            )

    def _rewrite_abort(self, job: _Rewrite) -> None:
        """Leave the store as it was: stop journaling, drop the new file, checkpoint again as usual."""
        with self._journal_lock:
            self._journal = None
        if job.snap is not None:
            _end_transaction(job.snap)
            job.snap.close()
        if job.fresh is not None:
            # Never closed: after an IMPORT that failed half-way (disk full), closing its connection or database
            # makes Kùzu abort the process ("Invalid transaction type to rollback"). Kept referenced until the
            # process ends, and past it: the native objects get one reference more than Python will ever drop,
            # so no destructor runs at exit either. Its file is deleted below (Linux keeps the open inode).
            _ABANDONED.append((job.fresh, job.conn))
            for native in (getattr(job.conn, "_connection", None), getattr(job.fresh, "_database", None)):
                if native is not None:
                    ctypes.pythonapi.Py_IncRef(ctypes.py_object(native))
        job.snap = job.conn = job.fresh = None
        self._cleanup_stale_files()

    def checkpoint(self) -> None:
        """Fold the WAL into the database file (the files then hold every commit on their own)."""
        self._require_healthy()
        path = self._dir / self._current_name()
        wal = path.with_name(path.name + ".wal")
        log_size = wal.stat().st_size if wal.exists() else 0
        need = CHECKPOINT_ROOM_FACTOR * log_size + CHECKPOINT_ROOM_MARGIN
        stat = os.statvfs(self._dir)
        if stat.f_bavail * stat.f_frsize < need:
            # A checkpoint that runs out of disk part way can leave files whose log, replayed at the next open,
            # duplicates rows (the store does not open again): not started without room for it.
            raise StorageUnavailable(
                f"not enough free disk space to fold the canonical store's log into its file "
                f"({need / 1e6:.0f} MB needed, {stat.f_bavail * stat.f_frsize / 1e6:.0f} MB free)",
                hint="nothing changed; free disk space on the data directory's file system, then retry",
            )
        # Alone: Kùzu's CHECKPOINT holds the lock a query needs to end its transaction and then waits for every
        # open transaction to end, so a read in flight when it starts holds it off until it gives up (about 6 s,
        # every read and write stalled meanwhile; beside steady recalls nearly every checkpoint failed). Taken
        # exclusively, it waits for the reads under way (a recall's length) and runs with none open.
        with self._lock.exclusive():
            try:
                self._writer.execute("CHECKPOINT")
            except RuntimeError as exc:
                if not _checkpoint_timeout(exc):
                    # A checkpoint that failed part way (a full disk) leaves Kùzu's pages in memory ahead of its
                    # files: a commit after it, replayed at the next open over a half-folded file, duplicated
                    # rows (the full-disk test). As after a failed commit, the database is closed to everything
                    # until it is reopened, which replays the WAL the failed checkpoint left whole.
                    self._failed = str(exc).split(". Error:")[0][:300]
                    raise StoreFailed(
                        f"the canonical store could not checkpoint: {self._failed}",
                        hint="nothing acknowledged is lost; free disk space or make the data directory "
                        "writable, then retry",
                    ) from exc
                raise StorageUnavailable(
                    "the canonical store is busy: a long read (an export or backup) holds off its checkpoint",
                    hint="nothing changed; retry once the export or backup has finished",
                ) from exc

    def file_space(self) -> FileSpace:
        """The database file's bytes (its WAL beside it included) and those of its free pages. Kùzu reuses a
        free page for a later write but never gives one back: a column chunk that outgrows its pages at a
        checkpoint is written anew and its old pages freed, so a store filled by many commits keeps about
        40% of its file free (97.5 MB, 39 MB of it free, at 10,000 memories; docs/benchmarks/scale.md)."""
        self._require_healthy()
        path = self._dir / self._current_name()
        wal = path.with_name(path.name + ".wal")
        size, log_size = (p.stat().st_size if p.exists() else 0 for p in (path, wal))
        with self.read() as conn:
            free = _rows(conn, "CALL fsm_info() RETURN sum(num_pages)")[0][0]
        return FileSpace(size + log_size, int(free or 0) * PAGE_BYTES, log_size)

    @contextmanager
    def snapshot(self) -> Iterator[Session]:
        """A read connection inside one read-only transaction: every query in the block sees the same state,
        while writes go on."""
        with self._long_reads_lock:
            self._long_reads += 1  # before the read lock: a checkpoint that sees none may go first
        try:
            with self.read() as session:
                conn = cast(kuzu.Connection, session)
                conn.execute("BEGIN TRANSACTION READ ONLY")
                self._local.snapshot = True  # it reads an older state than the store's: nothing is kept
                try:
                    yield conn
                finally:
                    self._local.snapshot = False
                    conn.execute("COMMIT")
        finally:
            with self._long_reads_lock:
                self._long_reads -= 1
