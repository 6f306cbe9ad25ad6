"""The canonical store: Kùzu holds every memory, its scopes, entities, version edges and the change log.

Only this module speaks Cypher, and every value is a bound parameter. The database file is versioned by a
generation number so that a purge can rebuild it (EXPORT/IMPORT) and swap it in: Kùzu keeps the bytes of
deleted rows in its file, and a purge must leave no trace of what it erased.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import cast

import kuzu

from storage.adapters._rwlock import RWLock
from storage.adapters.kuzu._cypher import (
    _ABANDONED,
    SCHEMA_VERSION,
    _checkpoint_timeout,
    _exec,
    _fsync_dir,
    _plain_path,
    _rebuild_failed,
    _rows,
    _schema,
    cypher_string,
    log,
)
from storage.adapters.kuzu.conversations import _Conversations
from storage.adapters.kuzu.exports import _Exports
from storage.domain.errors import StorageUnavailable, StoreFailed, StoreMismatch
from storage.ports.canonical import Session


class GraphStore(_Exports, _Conversations):
    """Owns the Kùzu database of a data directory. Thread-safe: one write connection (used only by the
    reconciler's thread) and one read connection per reading thread. Implements ``CanonicalStore``."""

    name = "kuzu"
    shared = False  # one process owns the directory (owner.lock): the reconciler numbers the changes

    def __init__(self, directory: Path, *, dim: int, embedder_name: str) -> None:
        self._dir = directory
        self._dir.mkdir(parents=True, exist_ok=True)
        self._dim = dim
        self._lock = RWLock()
        self._local = threading.local()
        self._generation = 0
        self._readers: list[kuzu.Connection] = []
        self._readers_lock = threading.Lock()
        self._failed: str | None = None
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
            self._db = kuzu.Database(str(self._dir / self._current_name()))
        except RuntimeError as exc:
            raise StorageUnavailable(
                f"cannot open the canonical store in {self._dir}: {exc}",
                hint="check that the data directory is writable and that no other process owns it",
            ) from exc
        self._writer = kuzu.Connection(self._db)
        for stmt in _schema(self._dim):
            self._writer.execute(stmt)
        self._add_mention_columns()

    def _add_mention_columns(self) -> None:
        """Give MENTIONS edges of a store written before they carried what each memory gave the entity the
        columns, filled with the entity's current name, type and aliases (who gave what is not known for them:
        see docs/security.md, "Erasure")."""
        columns = {r[1] for r in _rows(self._writer, "CALL TABLE_INFO('MENTIONS') RETURN *")}
        if "aliases" in columns:
            return
        for column, kind in (("name", "STRING"), ("type", "STRING"), ("aliases", "STRING[]")):
            if column not in columns:
                self._writer.execute(f"ALTER TABLE MENTIONS ADD {column} {kind}")  # fixed names only
        self._writer.execute(
            "MATCH (:Memory)-[r:MENTIONS]->(e:Entity) SET r.name = e.name, r.type = e.type, r.aliases = e.aliases"
        )

    def _check_meta(self, embedder_name: str, dim: int) -> None:
        meta = dict((k, v) for k, v in _rows(self._writer, "MATCH (m:Meta) RETURN m.key, m.value"))
        if not meta:
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
            self._close_connections()
            self._db.close()

    def _close_connections(self) -> None:
        with self._readers_lock:
            for conn in self._readers:
                conn.close()
            self._readers.clear()
        self._writer.close()
        self._generation += 1

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
            conn.execute("BEGIN TRANSACTION")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            try:
                conn.execute("COMMIT")
            except RuntimeError as exc:
                if _checkpoint_timeout(exc):
                    # The commit is in the WAL and visible (Kùzu commits, then checkpoints when the WAL is
                    # large, and only the checkpoint waited in vain for an open read transaction): the write is
                    # acknowledged and a later commit or CHECKPOINT folds the WAL in.
                    log.warning("a commit's checkpoint waited for a long read; it is retried later")
                    return
                # The WAL write failed (disk full, read-only). Kùzu may already show the transaction in
                # memory although it is not on disk: from now on nothing may be read or written through this
                # database; reopening it replays the WAL, which holds exactly the acknowledged commits.
                self._failed = str(exc).split(". Error:")[0][:300]
                raise StoreFailed(
                    f"the canonical store could not commit: {self._failed}",
                    hint="nothing from this call was kept; free disk space or make the data directory "
                    "writable, then retry",
                ) from exc

    def rebuild(self) -> None:
        """Rewrite the database into a fresh file (EXPORT + IMPORT) and swap it in.

        Deleted rows leave their bytes in Kùzu's file even after CHECKPOINT; a rebuild is what makes a
        purge real. Crash-safe: CURRENT is switched by an atomic rename, leftovers are removed at open.
        A failure before the switch (disk full, an unreadable export) removes what it wrote, reopens the
        database as it was and raises StorageUnavailable: the store stays usable and a later rebuild retries.
        """
        with self._lock.exclusive():
            old = self._current_name()
            number = int(old.split("-")[1].split(".")[0]) + 1
            new = f"graph-{number:06d}.kz"
            export_name = f".export-{number:06d}"
            self._cleanup_stale_files()  # a failed rebuild of this process may have left the same names
            with _plain_path(self._dir) as plain:
                self._rebuild_into(new, f"{plain}/{export_name}")

    def _rebuild_into(self, new: str, export: str) -> None:
        """EXPORT to ``export``, IMPORT into the file ``new``, switch CURRENT to it; the exclusive lock is held."""
        try:
            self._writer.execute(f"EXPORT DATABASE {cypher_string(export)} (format='parquet')")
        except RuntimeError as exc:
            self._cleanup_stale_files()
            raise _rebuild_failed(exc) from exc
        self._close_connections()
        self._db.close()
        try:
            fresh = kuzu.Database(str(self._dir / new))
            conn = kuzu.Connection(fresh)
            try:
                conn.execute(f"IMPORT DATABASE {cypher_string(export)}")
                _exec(conn, "CHECKPOINT")
            finally:
                conn.close()
                fresh.close()
            tmp = self._dir / "CURRENT.tmp"
            tmp.write_text(new)
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
            tmp.replace(self._dir / "CURRENT")
            _fsync_dir(self._dir)
        except (RuntimeError, OSError) as exc:
            self._cleanup_stale_files()  # CURRENT still names the old file: the new one goes
            self._open()
            raise _rebuild_failed(exc) from exc
        self._cleanup_stale_files()
        self._open()

    def checkpoint(self) -> None:
        """Fold the WAL into the database file (the files then hold every commit on their own)."""
        self._require_healthy()
        with self._lock.shared():
            try:
                self._writer.execute("CHECKPOINT")
            except RuntimeError as exc:
                if not _checkpoint_timeout(exc):
                    raise
                raise StorageUnavailable(
                    "the canonical store is busy: a long read (an export or backup) holds off its checkpoint",
                    hint="nothing changed; retry once the export or backup has finished",
                ) from exc

    @contextmanager
    def snapshot(self) -> Iterator[Session]:
        """A read connection inside one read-only transaction: every query in the block sees the same state,
        while writes go on."""
        with self.read() as session:
            conn = cast(kuzu.Connection, session)
            conn.execute("BEGIN TRANSACTION READ ONLY")
            try:
                yield conn
            finally:
                conn.execute("COMMIT")
