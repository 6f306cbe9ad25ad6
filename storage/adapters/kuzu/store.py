"""The canonical store: Kùzu holds every memory, its scopes, entities, version edges and the change log.

Only this module speaks Cypher, and every value is a bound parameter. The database file is versioned by a
generation number so that a purge can rebuild it (EXPORT/IMPORT) and swap it in: Kùzu keeps the bytes of
deleted rows in its file, and a purge must leave no trace of what it erased.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
import threading
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Executor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import kuzu

from storage.adapters._rwlock import RWLock
from storage.domain.errors import StorageUnavailable, StoreFailed, StoreMismatch
from storage.domain.models import EntityIn, Memory, MemoryKind, Provenance

log = logging.getLogger("mnemograph.graph")

SCHEMA_VERSION = "1"
# A canonical fetch of at least this many ids is split over two connections when an executor is given.
PARALLEL_FETCH = 6
# Databases whose commit failed: kept referenced so that no destructor checkpoints them before the process ends.
_ABANDONED: list[kuzu.Database] = []

# What the reconciler hands to intents; named here so that only this adapter imports kuzu.
Connection = kuzu.Connection

_MEMORY_FIELDS = (
    "id, content, kind, principal, client, source, metadata, event_time, event_time_source, valid_from, "
    "valid_to, recorded_at, retired_at, retire_reason, supersedes, superseded_by"
)
_FIELD_NAMES = tuple(f.strip() for f in _MEMORY_FIELDS.split(","))
_RETURN_MEMORY = ", ".join(f"m.{f.strip()}" for f in _MEMORY_FIELDS.split(","))
_FETCH_ONE = f"MATCH (m:Memory {{id: $id}}) RETURN {_RETURN_MEMORY}, m.scopes, m.entity_names"
_PROJECTION = "m.id, m.content, m.kind, m.scopes, m.retired_at IS NULL AND m.superseded_by IS NULL, m.event_time, m.vector"
_PROJECT_ONE = f"MATCH (m:Memory {{id: $id}}) RETURN {_PROJECTION}"


def _schema(dim: int) -> list[str]:
    return [
        "CREATE NODE TABLE IF NOT EXISTS Meta(key STRING PRIMARY KEY, value STRING)",
        "CREATE NODE TABLE IF NOT EXISTS Memory(id STRING PRIMARY KEY, content STRING, kind STRING, "
        "principal STRING, client STRING, source STRING, metadata STRING, event_time TIMESTAMP, "
        "event_time_source STRING, valid_from TIMESTAMP, valid_to TIMESTAMP, recorded_at TIMESTAMP, "
        f"retired_at TIMESTAMP, retire_reason STRING, supersedes STRING, superseded_by STRING, vector FLOAT[{dim}], "
        "scopes STRING[], entity_names STRING[])",
        "CREATE NODE TABLE IF NOT EXISTS Scope(id STRING PRIMARY KEY, created_at TIMESTAMP)",
        "CREATE NODE TABLE IF NOT EXISTS Entity(id STRING PRIMARY KEY, name STRING, type STRING, aliases STRING[])",
        "CREATE NODE TABLE IF NOT EXISTS Change(seq INT64 PRIMARY KEY, op STRING, memory_id STRING, at TIMESTAMP)",
        "CREATE REL TABLE IF NOT EXISTS CONTAINS(FROM Scope TO Memory, added_at TIMESTAMP)",
        "CREATE REL TABLE IF NOT EXISTS PARENT_OF(FROM Scope TO Scope)",
        "CREATE REL TABLE IF NOT EXISTS SUPERSEDES(FROM Memory TO Memory, reason STRING, at TIMESTAMP)",
        # Each edge keeps the name, type and aliases that memory gave the entity, so that erasing the memory
        # can take back exactly what it gave (an alias given only by an erased memory must not stay live).
        "CREATE REL TABLE IF NOT EXISTS MENTIONS(FROM Memory TO Entity, name STRING, type STRING, aliases STRING[])",
        "CREATE REL TABLE IF NOT EXISTS RELATES(FROM Entity TO Entity, predicate STRING, memory_id STRING, "
        "recorded_at TIMESTAMP)",
        # Write-time reconciliation (storage.enrich.reconcile): a relation's validity, closed by the memory
        # that ended it; and CONTRADICTS between memories whose statements conflict. Added in place to
        # stores created before them (the columns read NULL there: open, as those relations were).
        "ALTER TABLE RELATES ADD IF NOT EXISTS valid_from TIMESTAMP",
        "ALTER TABLE RELATES ADD IF NOT EXISTS valid_to TIMESTAMP",
        "ALTER TABLE RELATES ADD IF NOT EXISTS ended_by STRING",
        "CREATE REL TABLE IF NOT EXISTS CONTRADICTS(FROM Memory TO Memory, predicate STRING, at TIMESTAMP)",
        # The outcome of the optional LLM enrichment of a memory (never its content): shown by memory_read.
        "CREATE NODE TABLE IF NOT EXISTS Enrichment(id STRING PRIMARY KEY, status STRING, detail STRING, "
        "model STRING, input_tokens INT64, output_tokens INT64, cache_read_tokens INT64, "
        "cache_write_tokens INT64, at TIMESTAMP)",
    ]


def utc(value: datetime | None) -> datetime | None:
    """Kùzu returns naive UTC timestamps; the domain speaks aware UTC."""
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


# Parsing and planning a Cypher statement costs as much as running it; each connection keeps its own.
_PREPARED: weakref.WeakKeyDictionary[kuzu.Connection, dict[str, kuzu.PreparedStatement]] = (
    weakref.WeakKeyDictionary()
)


def _memory_params(m: Memory | NewMemory) -> dict[str, Any]:
    """The parameters every ``CREATE (:Memory ...)`` shares: content, provenance and both time axes."""
    return {
        "id": m.id,
        "content": m.content,
        "kind": m.kind.value,
        "principal": m.provenance.principal,
        "client": m.provenance.client,
        "source": m.provenance.source,
        "metadata": json.dumps(m.metadata, ensure_ascii=False, sort_keys=True),
        "event_time": m.event_time,
        "ets": m.event_time_source,
        "valid_from": m.valid_from,
        "valid_to": m.valid_to,
        "recorded_at": m.recorded_at,
    }


def _exec(conn: kuzu.Connection, query: str, params: dict[str, Any] | None = None) -> kuzu.QueryResult:
    cache = _PREPARED.setdefault(conn, {})
    stmt = cache.get(query)
    if stmt is None:
        # Connection.prepare() is deprecated in favour of execute(str), which re-plans every call.
        stmt = kuzu.PreparedStatement(conn, query)
        if not stmt.is_success():
            raise RuntimeError(stmt.get_error_message())
        cache[query] = stmt
    result = conn.execute(stmt, params or {})
    assert not isinstance(result, list)
    return result


def _rows(conn: kuzu.Connection, query: str, params: dict[str, Any] | None = None) -> list[list[Any]]:
    return [list(r) for r in _exec(conn, query, params).get_all()]


def entity_key(name: str) -> str:
    """Entities are identified by their case-folded, whitespace-collapsed name."""
    return " ".join(name.casefold().split())


@dataclass(frozen=True, slots=True)
class NewMemory:
    id: str
    content: str
    kind: MemoryKind
    provenance: Provenance
    metadata: dict[str, Any]
    event_time: datetime
    event_time_source: str
    valid_from: datetime
    valid_to: datetime | None
    recorded_at: datetime
    vector: Sequence[float]
    supersedes: str | None = None


@dataclass(frozen=True, slots=True)
class ProjectionRow:
    """What the derived stores need of one memory."""

    id: str
    content: str
    kind: str
    scopes: tuple[str, ...]
    live: bool
    event_time: datetime
    vector: list[float]


@dataclass(frozen=True, slots=True)
class KnownEntity:
    id: str
    name: str
    aliases: tuple[str, ...]
    mentions: int
    relations: int


@dataclass(frozen=True, slots=True)
class Relation:
    """One RELATES edge seen from an entity: ``outgoing`` when that entity is the subject."""

    predicate: str
    memory_id: str
    other_id: str
    other_name: str
    outgoing: bool


@dataclass(frozen=True, slots=True)
class OpenRelation:
    """A RELATES edge still valid, as reconciliation sees it: the memory that recorded it and its scopes."""

    predicate: str
    object_id: str
    object_name: str
    memory_id: str
    valid_from: datetime | None
    recorded_at: datetime
    scopes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RelationState:
    subject: str
    predicate: str
    object: str
    memory_id: str
    valid_from: datetime | None
    valid_to: datetime | None
    ended_by: str | None


@dataclass(frozen=True, slots=True)
class Change:
    seq: int
    op: str
    memory_id: str


class GraphStore:
    """Owns the Kùzu database of a data directory. Thread-safe: one write connection (used only by the
    reconciler's thread) and one read connection per reading thread."""

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
    def read(self) -> Iterator[kuzu.Connection]:
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
    def transaction(self) -> Iterator[kuzu.Connection]:
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
    def snapshot(self) -> Iterator[kuzu.Connection]:
        """A read connection inside one read-only transaction: every query in the block sees the same state,
        while writes go on."""
        with self.read() as conn:
            conn.execute("BEGIN TRANSACTION READ ONLY")
            try:
                yield conn
            finally:
                conn.execute("COMMIT")

    # -- export and restore (storage.engine.backup) ------------------------------------------------------

    def export_scopes(self, conn: kuzu.Connection) -> list[tuple[str, datetime | None]]:
        return [
            (r[0], utc(r[1])) for r in _rows(conn, "MATCH (s:Scope) RETURN s.id, s.created_at ORDER BY s.id")
        ]

    def export_memories(self, conn: kuzu.Connection) -> Iterator[dict[str, Any]]:
        """Every memory with all its fields, its vector, its scopes (with when each was added) and the ids of
        the entities it mentions, in id order."""
        last = ""
        while True:
            rows = _rows(
                conn,
                f"MATCH (m:Memory) WHERE m.id > $after RETURN {_RETURN_MEMORY}, m.entity_names, m.vector "
                "ORDER BY m.id LIMIT 1000",
                {"after": last},
            )
            if not rows:
                return
            for r in rows:
                mid = r[0]
                names = _FIELD_NAMES
                record: dict[str, Any] = dict(zip(names, r[: len(names)], strict=True))
                for key in ("event_time", "valid_from", "valid_to", "recorded_at", "retired_at"):
                    record[key] = utc(record[key])
                record["entities"] = sorted(r[-2] or ())
                record["vector"] = list(r[-1])
                record["scopes"] = {
                    sid: utc(at)
                    for sid, at in _rows(
                        conn,
                        "MATCH (s:Scope)-[c:CONTAINS]->(m:Memory {id: $id}) RETURN s.id, c.added_at",
                        {"id": mid},
                    )
                }
                record["mentions"] = sorted(
                    e
                    for (e,) in _rows(
                        conn, "MATCH (m:Memory {id: $id})-[:MENTIONS]->(e:Entity) RETURN e.id", {"id": mid}
                    )
                )
                yield record
            last = rows[-1][0]

    def export_entities(self, conn: kuzu.Connection) -> list[tuple[str, str, str, list[str]]]:
        rows = _rows(conn, "MATCH (e:Entity) RETURN e.id, e.name, e.type, e.aliases ORDER BY e.id")
        return [(i, n, t or "thing", list(a or [])) for i, n, t, a in rows]

    def export_supersedes(self, conn: kuzu.Connection) -> list[tuple[str, str, str, datetime | None]]:
        rows = _rows(conn, "MATCH (n:Memory)-[r:SUPERSEDES]->(o:Memory) RETURN n.id, o.id, r.reason, r.at")
        return [(n, o, reason or "", utc(at)) for n, o, reason, at in rows]

    def export_relations(self, conn: kuzu.Connection) -> list[tuple[str, str, str, str, datetime | None]]:
        rows = _rows(
            conn,
            "MATCH (a:Entity)-[r:RELATES]->(b:Entity) RETURN a.id, b.id, r.predicate, r.memory_id, r.recorded_at",
        )
        return [(a, b, p, m, utc(at)) for a, b, p, m, at in rows]

    def restore_scopes(
        self,
        conn: kuzu.Connection,
        scopes: Sequence[tuple[str, datetime]],
        parents: Sequence[tuple[str, str]],
    ) -> None:
        for sid, at in scopes:
            _exec(conn, "MERGE (s:Scope {id: $id}) ON CREATE SET s.created_at = $at", {"id": sid, "at": at})
        for child, parent in parents:
            self.set_parent(conn, child, parent)

    def restore_entities(
        self, conn: kuzu.Connection, entities: Sequence[tuple[str, str, str, list[str]]]
    ) -> None:
        for eid, name, etype, aliases in entities:
            _exec(
                conn,
                # MERGE: an import into a store that already knows the entity keeps the store's own record.
                "MERGE (e:Entity {id: $id}) ON CREATE SET e.name = $name, e.type = $type, "
                "e.aliases = CAST($aliases AS STRING[])",
                {"id": eid, "name": name, "type": etype, "aliases": list(aliases)},
            )

    def restore_memory(self, conn: kuzu.Connection, m: Memory, vector: Sequence[float],
                       added: Mapping[str, datetime], mentions: Sequence[str]) -> None:  # fmt: skip
        """Create a memory exactly as exported: same id, times, status and version pointers."""
        _exec(
            conn,
            "CREATE (:Memory {id: $id, content: $content, kind: $kind, principal: $principal, client: $client, "
            "source: $source, metadata: $metadata, event_time: $event_time, event_time_source: $ets, "
            "valid_from: $valid_from, valid_to: $valid_to, recorded_at: $recorded_at, retired_at: $retired_at, "
            "retire_reason: $retire_reason, supersedes: $supersedes, superseded_by: $superseded_by, "
            "vector: $vector, scopes: CAST($scopes AS STRING[]), entity_names: CAST($entities AS STRING[])})",
            {
                **_memory_params(m),
                "retired_at": m.retired_at,
                "retire_reason": m.retire_reason,
                "supersedes": m.supersedes,
                "superseded_by": m.superseded_by,
                "vector": list(map(float, vector)),
                "scopes": sorted(added),
                "entities": list(m.entities),
            },
        )
        for sid, at in added.items():
            _exec(
                conn,
                "MATCH (s:Scope {id: $s}), (m:Memory {id: $id}) CREATE (s)-[:CONTAINS {added_at: $at}]->(m)",
                {"s": sid, "id": m.id, "at": at},
            )
        if mentions:
            _exec(
                conn,
                # An export does not say which memory gave an entity its type and aliases: each mention holds them.
                "MATCH (m:Memory {id: $mid}) UNWIND $es AS eid MATCH (e:Entity {id: eid}) "
                "CREATE (m)-[:MENTIONS {name: e.name, type: e.type, aliases: e.aliases}]->(e)",
                {"mid": m.id, "es": list(mentions)},
            )

    def restore_supersedes(
        self, conn: kuzu.Connection, new: str, old: str, reason: str, at: datetime
    ) -> None:
        _exec(
            conn,
            "MATCH (n:Memory {id: $new}), (o:Memory {id: $old}) CREATE (n)-[:SUPERSEDES {reason: $r, at: $at}]->(o)",
            {"new": new, "old": old, "r": reason, "at": at},
        )

    def restore_relation(
        self, conn: kuzu.Connection, subject: str, obj: str, predicate: str, memory_id: str, at: datetime
    ) -> None:
        _exec(
            conn,
            "MATCH (a:Entity {id: $a}), (b:Entity {id: $b}) "
            "CREATE (a)-[:RELATES {predicate: $p, memory_id: $m, recorded_at: $at}]->(b)",
            {"a": subject, "b": obj, "p": predicate, "m": memory_id, "at": at},
        )

    # -- reads -------------------------------------------------------------------------------------

    def max_seq(self, conn: kuzu.Connection) -> int:
        rows = _rows(conn, "MATCH (c:Change) RETURN max(c.seq)")
        return int(rows[0][0]) if rows and rows[0][0] is not None else 0

    def oldest_change(self, conn: kuzu.Connection) -> int | None:
        rows = _rows(conn, "MATCH (c:Change) RETURN min(c.seq)")
        return int(rows[0][0]) if rows and rows[0][0] is not None else None

    def changes_since(self, conn: kuzu.Connection, seq: int, *, limit: int = 1_000_000) -> list[Change]:
        rows = _rows(
            conn,
            "MATCH (c:Change) WHERE c.seq > $s RETURN c.seq, c.op, c.memory_id ORDER BY c.seq LIMIT $n",
            {"s": seq, "n": limit},
        )
        return [Change(int(s), op, mid) for s, op, mid in rows]

    def prune_changes(self, conn: kuzu.Connection, upto: int) -> None:
        _exec(conn, "MATCH (c:Change) WHERE c.seq <= $s DELETE c", {"s": upto})

    def fetch(
        self, conn: kuzu.Connection, ids: Iterable[str], executor: Executor | None = None
    ) -> dict[str, Memory]:
        """Full records for the given ids (missing ids are absent from the result).

        One primary-key lookup per id: Kùzu answers ``id IN [...]`` with a scan of every memory, and reading
        scope membership through CONTAINS edges costs a traversal per memory, so each memory carries its
        scope and entity names as lists kept in step with the edges in the same transaction.

        With an ``executor`` and a read connection (``conn`` from ``read()``), half of a batch of at least
        ``PARALLEL_FETCH`` ids is looked up on a worker's own connection meanwhile (Kùzu releases the GIL):
        10 records in 1.6 instead of 2.8 ms. The worker relies on the caller's read lock, which the caller
        holds until both halves are back.
        """
        unique = list(dict.fromkeys(ids))
        if executor is None or len(unique) < PARALLEL_FETCH or conn is self._writer:
            return self._fetch(conn, unique)
        half = len(unique) // 2
        rest = unique[half:]
        other = executor.submit(lambda: self._fetch(self._thread_conn(), rest))
        try:
            out = self._fetch(conn, unique[:half])
        except BaseException:
            if not other.cancel():
                wait([other])  # never leave the worker reading once the caller's read lock may be released
            raise
        # Still queued (the pool is busy with other recalls' lanes): this thread reads that half too.
        out.update(self._fetch(conn, rest) if other.cancel() else other.result())
        return out

    def _fetch(self, conn: kuzu.Connection, ids: Sequence[str]) -> dict[str, Memory]:
        out: dict[str, Memory] = {}
        for mid in ids:
            for r in _rows(conn, _FETCH_ONE, {"id": mid}):
                out[mid] = _memory(r[:-2], tuple(sorted(r[-2] or ())), tuple(sorted(r[-1] or ())))
        return out

    def has_metadata_key(self, conn: kuzu.Connection, key: str) -> bool:
        """Whether any memory's metadata has ``key`` (a scan, stopped at the first match; may say yes for a
        value that merely contains the key's JSON text)."""
        needle = json.dumps(key, ensure_ascii=False) + ":"
        rows = _rows(
            conn, "MATCH (m:Memory) WHERE contains(m.metadata, $n) RETURN m.id LIMIT 1", {"n": needle}
        )
        return bool(rows)

    def ids_with_prefix(self, conn: kuzu.Connection, prefix: str, limit: int = 2) -> list[str]:
        rows = _rows(
            conn,
            "MATCH (m:Memory) WHERE starts_with(m.id, $p) RETURN m.id ORDER BY m.id LIMIT $n",
            {"p": prefix, "n": limit},
        )
        return [r[0] for r in rows]

    def chain(self, conn: kuzu.Connection, memory_id: str) -> list[str]:
        """Ids of every version connected to memory_id by SUPERSEDES, oldest first."""
        rows = _rows(
            conn,
            "MATCH (a:Memory {id: $id})-[:SUPERSEDES*1..30]-(b:Memory) RETURN DISTINCT b.id, b.recorded_at",
            {"id": memory_id},
        )
        return [r[0] for r in rows]

    def scope_parents(self, conn: kuzu.Connection) -> tuple[list[str], dict[str, str]]:
        scopes = [r[0] for r in _rows(conn, "MATCH (s:Scope) RETURN s.id ORDER BY s.id")]
        parents = {c: p for p, c in _rows(conn, "MATCH (p:Scope)-[:PARENT_OF]->(c:Scope) RETURN p.id, c.id")}
        return scopes, parents

    def scope_counts(self, conn: kuzu.Connection) -> dict[str, int]:
        rows = _rows(
            conn,
            "MATCH (s:Scope)-[:CONTAINS]->(m:Memory) WHERE m.retired_at IS NULL AND m.superseded_by IS NULL "
            "RETURN s.id, count(m)",
        )
        return {sid: int(n) for sid, n in rows}

    def list_scope(
        self,
        conn: kuzu.Connection,
        scope: str,
        *,
        after: tuple[datetime, str] | None,
        live_only: bool,
        limit: int,
    ) -> list[str]:
        where = ["s.id = $s"]
        params: dict[str, Any] = {"s": scope, "n": limit}
        if live_only:
            where.append("m.retired_at IS NULL AND m.superseded_by IS NULL")
        if after is not None:
            where.append("(m.recorded_at > $t OR (m.recorded_at = $t AND m.id > $i))")
            params["t"], params["i"] = after
        rows = _rows(
            conn,
            f"MATCH (s:Scope)-[:CONTAINS]->(m:Memory) WHERE {' AND '.join(where)} "
            "RETURN m.id ORDER BY m.recorded_at, m.id LIMIT $n",
            params,
        )
        return [r[0] for r in rows]

    def known_entities(self, conn: kuzu.Connection) -> list[KnownEntity]:
        """Every entity with how many memories mention it and how many relations touch it."""
        mentions = dict(_rows(conn, "MATCH (:Memory)-[:MENTIONS]->(e:Entity) RETURN e.id, count(*)"))
        relations = dict(_rows(conn, "MATCH (e:Entity)-[r:RELATES]-(:Entity) RETURN e.id, count(r)"))
        return [
            KnownEntity(i, n, tuple(a or ()), int(mentions.get(i, 0)), int(relations.get(i, 0)))
            for i, n, a in _rows(conn, "MATCH (e:Entity) RETURN e.id, e.name, e.aliases")
        ]

    def mentioning(
        self, conn: kuzu.Connection, entity: str, *, scopes: Sequence[str], live_only: bool, limit: int
    ) -> list[str]:
        """Ids of memories in any of ``scopes`` that mention the entity (by id), most recently recorded
        first, at most ``limit`` (the canonical filter in recall still decides what is returned)."""
        live = " AND m.retired_at IS NULL AND m.superseded_by IS NULL" if live_only else ""
        rows = _rows(
            conn,
            "MATCH (m:Memory)-[:MENTIONS]->(e:Entity {id: $e}) "
            # "shares a scope with $ss", written without a list comprehension over a parameter: that form
            # crashes Kùzu 0.11 (KU_UNREACHABLE, or a segfault). Both lists hold distinct values.
            f"WHERE size(list_distinct(list_concat(m.scopes, $ss))) < size(m.scopes) + size($ss){live} "
            "RETURN m.id ORDER BY m.recorded_at DESC, m.id LIMIT $n",
            {"e": entity, "ss": list(dict.fromkeys(scopes)), "n": limit},
        )
        return [r[0] for r in rows]

    def relations(self, conn: kuzu.Connection, entity: str, *, limit: int) -> list[Relation]:
        """RELATES edges touching the entity (by id) in either direction, newest first, at most ``limit``
        per direction. Each names the memory that recorded it, whose visibility decides the edge's."""
        out: list[Relation] = []
        for pattern, outgoing in (("(a)-[r:RELATES]->(b)", True), ("(b)-[r:RELATES]->(a)", False)):
            rows = _rows(
                conn,
                f"MATCH (a:Entity {{id: $e}}) MATCH {pattern} "
                "RETURN r.predicate, r.memory_id, b.id, b.name ORDER BY r.recorded_at DESC LIMIT $n",
                {"e": entity, "n": limit},
            )
            out.extend(Relation(p, mid, bid, bname, outgoing) for p, mid, bid, bname in rows)
        return out

    def projection_rows(
        self, conn: kuzu.Connection, ids: Iterable[str] | None = None
    ) -> dict[str, ProjectionRow]:
        """What the projections need of the given memories (of every memory when ``ids`` is None)."""
        if ids is None:
            rows = _rows(conn, f"MATCH (m:Memory) RETURN {_PROJECTION}")
        else:
            rows = [r for mid in dict.fromkeys(ids) for r in _rows(conn, _PROJECT_ONE, {"id": mid})]
        return {
            r[0]: ProjectionRow(
                r[0], r[1], r[2], tuple(sorted(r[3] or ())), bool(r[4]), utc(r[5]) or _EPOCH, r[6]
            )
            for r in rows
        }

    def all_ids(self, conn: kuzu.Connection) -> dict[str, bool]:
        """Every memory id, mapped to whether it is live (neither retired nor superseded)."""
        rows = _rows(conn, "MATCH (m:Memory) RETURN m.id, m.retired_at IS NULL AND m.superseded_by IS NULL")
        return {r[0]: bool(r[1]) for r in rows}

    def vector_of(self, conn: kuzu.Connection, memory_id: str) -> list[float] | None:
        rows = _rows(conn, "MATCH (m:Memory {id: $id}) RETURN m.vector", {"id": memory_id})
        return list(rows[0][0]) if rows else None

    def live_state(self, conn: kuzu.Connection, memory_id: str) -> bool | None:
        """None when no memory has this id; else whether it is live (neither retired nor superseded)."""
        rows = _rows(
            conn,
            "MATCH (m:Memory {id: $id}) RETURN m.retired_at IS NULL AND m.superseded_by IS NULL",
            {"id": memory_id},
        )
        return bool(rows[0][0]) if rows else None

    def scopes_of(self, conn: kuzu.Connection, memory_id: str) -> list[str]:
        rows = _rows(conn, "MATCH (s:Scope)-[:CONTAINS]->(m:Memory {id: $id}) RETURN s.id", {"id": memory_id})
        return sorted(r[0] for r in rows)

    def memories_of_scope(self, conn: kuzu.Connection, scope: str) -> tuple[list[str], list[str]]:
        """(ids only in this scope, ids also in another scope)."""
        rows = _rows(
            conn,
            "MATCH (s:Scope {id: $s})-[:CONTAINS]->(m:Memory) OPTIONAL MATCH (o:Scope)-[:CONTAINS]->(m) "
            "WHERE o.id <> $s RETURN m.id, count(o)",
            {"s": scope},
        )
        only = [r[0] for r in rows if int(r[1]) == 0]
        shared = [r[0] for r in rows if int(r[1]) > 0]
        return only, shared

    # -- writes (inside transaction()) -------------------------------------------------------------

    def ensure_scopes(self, conn: kuzu.Connection, scopes: Sequence[str], at: datetime) -> None:
        _exec(
            conn,
            "UNWIND $ss AS sid MERGE (s:Scope {id: sid}) ON CREATE SET s.created_at = $at",
            {"ss": list(scopes), "at": at},
        )

    def set_parent(self, conn: kuzu.Connection, scope: str, parent: str | None) -> None:
        _exec(conn, "MATCH (p:Scope)-[r:PARENT_OF]->(c:Scope {id: $c}) DELETE r", {"c": scope})
        if parent is not None:
            _exec(
                conn,
                "MATCH (p:Scope {id: $p}), (c:Scope {id: $c}) CREATE (p)-[:PARENT_OF]->(c)",
                {"p": parent, "c": scope},
            )

    def insert_memory(
        self, conn: kuzu.Connection, m: NewMemory, scopes: Sequence[str], entities: Sequence[EntityIn]
    ) -> None:
        _exec(
            conn,
            "CREATE (:Memory {id: $id, content: $content, kind: $kind, principal: $principal, client: $client, "
            "source: $source, metadata: $metadata, event_time: $event_time, event_time_source: $ets, "
            "valid_from: $valid_from, valid_to: $valid_to, recorded_at: $recorded_at, retire_reason: '', "
            "supersedes: $supersedes, vector: $vector, scopes: CAST($scopes AS STRING[]), "
            "entity_names: CAST($entities AS STRING[])})",
            {
                **_memory_params(m),
                "supersedes": m.supersedes,
                "vector": list(map(float, m.vector)),
                "scopes": list(scopes),
                "entities": sorted({e.name for e in entities}),
            },
        )

    def link(self, conn: kuzu.Connection, memory_id: str, scopes: Sequence[str], at: datetime) -> None:
        """Add ``memory_id`` to ``scopes``, which must not contain it yet (MERGE on an edge would scan every
        CONTAINS edge in the store; callers pass only the missing scopes)."""
        _exec(
            conn,
            "MATCH (m:Memory {id: $id}) SET m.scopes = list_sort(list_distinct(list_concat(m.scopes, $ss)))",
            {"id": memory_id, "ss": list(scopes)},
        )
        _exec(
            conn,
            "MATCH (m:Memory {id: $id}) UNWIND $ss AS sid MATCH (s:Scope {id: sid}) "
            "CREATE (s)-[:CONTAINS {added_at: $at}]->(m)",
            {"id": memory_id, "ss": list(scopes), "at": at},
        )

    def mention(self, conn: kuzu.Connection, memory_id: str, entities: Sequence[EntityIn]) -> None:
        given: dict[str, EntityIn] = {}
        for e in entities:
            _exec(
                conn,
                "MERGE (e:Entity {id: $id}) ON CREATE SET e.name = $name, e.type = $type, e.aliases = $aliases "
                "ON MATCH SET e.aliases = list_distinct(list_concat(e.aliases, $aliases))",
                {"id": entity_key(e.name), "name": e.name, "type": e.type, "aliases": list(e.aliases)},
            )
            first = given.setdefault(entity_key(e.name), e)
            if first is not e:
                given[entity_key(e.name)] = EntityIn(first.name, first.type, (*first.aliases, *e.aliases))
        for key, e in given.items():
            _exec(
                conn,
                "MATCH (m:Memory {id: $mid}), (e:Entity {id: $eid}) "
                "CREATE (m)-[:MENTIONS {name: $name, type: $type, aliases: CAST($aliases AS STRING[])}]->(e)",
                {"mid": memory_id, "eid": key, "name": e.name, "type": e.type, "aliases": list(e.aliases)},
            )

    def relate(
        self,
        conn: kuzu.Connection,
        memory_id: str,
        subject: str,
        predicate: str,
        obj: str,
        at: datetime,
        valid_from: datetime | None = None,
    ) -> None:
        _exec(
            conn,
            "MATCH (a:Entity {id: $a}), (b:Entity {id: $b}) "
            "CREATE (a)-[:RELATES {predicate: $p, memory_id: $m, recorded_at: $at, valid_from: $vf}]->(b)",
            {
                "a": entity_key(subject),
                "b": entity_key(obj),
                "p": predicate,
                "m": memory_id,
                "at": at,
                "vf": valid_from,
            },
        )

    def open_relations(
        self, conn: kuzu.Connection, subject: str, predicates: Sequence[str], obj: str | None = None
    ) -> list[OpenRelation]:
        """RELATES edges from ``subject`` with one of ``predicates`` whose validity is open, recorded by a
        current memory (with that memory's scopes), oldest first. ``valid_from`` is None unless a time was
        stated for the relation."""
        out: list[OpenRelation] = []
        for predicate in dict.fromkeys(predicates):
            # One query per predicate: a list parameter (``IN $ps``) in a cached prepared statement has been
            # seen to match a previous call's values in Kùzu 0.11. The recording memories are then looked up
            # by primary key (a join on ``m.id = r.memory_id`` would scan every memory).
            params = {"a": entity_key(subject), "p": predicate}
            target = "(b:Entity)"
            if obj is not None:  # only this object: a key lookup on both ends
                target, params["b"] = "(b:Entity {id: $b})", entity_key(obj)
            rows = _rows(
                conn,
                f"MATCH (a:Entity {{id: $a}})-[r:RELATES]->{target} WHERE r.predicate = $p AND r.valid_to IS NULL "
                "RETURN b.id, b.name, r.memory_id, r.valid_from, r.recorded_at ORDER BY r.recorded_at",
                params,
            )
            for bid, bn, mid, vf, at in rows:
                state = _rows(
                    conn,
                    "MATCH (m:Memory {id: $id}) RETURN m.retired_at IS NULL AND m.superseded_by IS NULL, m.scopes",
                    {"id": mid},
                )
                if state and state[0][0]:
                    out.append(
                        OpenRelation(
                            predicate, bid, bn, mid, utc(vf), utc(at) or _EPOCH, tuple(state[0][1] or ())
                        )
                    )
        return out

    def close_relation(
        self,
        conn: kuzu.Connection,
        memory_id: str,
        subject: str,
        predicate: str,
        obj: str,
        *,
        valid_to: datetime,
        ended_by: str,
    ) -> None:
        _exec(
            conn,
            "MATCH (a:Entity {id: $a})-[r:RELATES]->(b:Entity {id: $b}) "
            "WHERE r.memory_id = $m AND r.predicate = $p AND r.valid_to IS NULL SET r.valid_to = $vt, r.ended_by = $by",
            {
                "a": entity_key(subject),
                "b": entity_key(obj),
                "m": memory_id,
                "p": predicate,
                "vt": valid_to,
                "by": ended_by,
            },
        )

    def open_relation_count(self, conn: kuzu.Connection, memory_id: str) -> int:
        return sum(r.valid_to is None for r in self.relation_history(conn, [memory_id]))

    def contradict(self, conn: kuzu.Connection, new: str, old: str, predicate: str, at: datetime) -> None:
        _exec(
            conn,
            "MATCH (n:Memory {id: $new}), (o:Memory {id: $old}) "
            "CREATE (n)-[:CONTRADICTS {predicate: $p, at: $at}]->(o)",
            {"new": new, "old": old, "p": predicate, "at": at},
        )

    def contradictions(self, conn: kuzu.Connection, memory_id: str) -> list[str]:
        """Ids of memories linked to this one by CONTRADICTS, in either direction."""
        rows = _rows(
            conn,
            "MATCH (a:Memory {id: $id})-[:CONTRADICTS]-(b:Memory) RETURN DISTINCT b.id ORDER BY b.id",
            {"id": memory_id},
        )
        return [r[0] for r in rows]

    def record_enrichment(self, conn: kuzu.Connection, memory_id: str, row: Mapping[str, Any]) -> None:
        """Keep how the LLM enrichment of a memory went (status, detail, model, token counts)."""
        _exec(
            conn,
            "MERGE (x:Enrichment {id: $id}) SET x.status = $status, x.detail = $detail, x.model = $model, "
            "x.input_tokens = $input_tokens, x.output_tokens = $output_tokens, "
            "x.cache_read_tokens = $cache_read_tokens, x.cache_write_tokens = $cache_write_tokens, x.at = $at",
            {"id": memory_id, **row},
        )

    def enrichment_of(self, conn: kuzu.Connection, memory_id: str) -> dict[str, Any] | None:
        rows = _rows(
            conn,
            "MATCH (x:Enrichment {id: $id}) RETURN x.status, x.detail, x.model, x.input_tokens, x.output_tokens, "
            "x.cache_read_tokens, x.cache_write_tokens",
            {"id": memory_id},
        )
        if not rows:
            return None
        keys = (
            "status",
            "detail",
            "model",
            "input_tokens",
            "output_tokens",
            "cache_read_tokens",
            "cache_write_tokens",
        )
        return dict(zip(keys, rows[0], strict=True))

    def relation_history(self, conn: kuzu.Connection, memory_ids: Sequence[str]) -> list[RelationState]:
        """Every relation the given memories recorded, with its validity. Reached through the entities each
        memory mentions (a relation's ends always are), so the cost does not grow with the store."""
        out: dict[Any, RelationState] = {}
        for mid in dict.fromkeys(memory_ids):
            rows = _rows(
                conn,
                "MATCH (m:Memory {id: $m})-[:MENTIONS]->(a:Entity)-[r:RELATES]->(b:Entity) WHERE r.memory_id = $m "
                "RETURN ID(r), a.name, r.predicate, b.name, r.valid_from, r.valid_to, r.ended_by",
                {"m": mid},
            )
            for rid, a, p, b, vf, vt, by in rows:
                out.setdefault(str(rid), RelationState(a, p, b, mid, utc(vf), utc(vt), by))
        return list(out.values())

    def supersede(
        self,
        conn: kuzu.Connection,
        old: str,
        new: str,
        *,
        reason: str,
        at: datetime,
        close_valid_to: datetime,
    ) -> None:
        _exec(
            conn,
            "MATCH (n:Memory {id: $new}), (o:Memory {id: $old}) "
            "CREATE (n)-[:SUPERSEDES {reason: $reason, at: $at}]->(o) "
            "SET o.superseded_by = $new, "
            "o.valid_to = CASE WHEN o.valid_to IS NULL OR o.valid_to > $vt THEN $vt ELSE o.valid_to END",
            {"new": new, "old": old, "reason": reason, "at": at, "vt": close_valid_to},
        )

    def retire(
        self, conn: kuzu.Connection, memory_id: str, *, at: datetime, valid_to: datetime, reason: str
    ) -> None:
        _exec(
            conn,
            "MATCH (m:Memory {id: $id}) SET m.retired_at = $at, m.retire_reason = $reason, "
            "m.valid_to = CASE WHEN m.valid_to IS NULL OR m.valid_to > $vt THEN $vt ELSE m.valid_to END",
            {"id": memory_id, "at": at, "reason": reason, "vt": valid_to},
        )

    def append_changes(self, conn: kuzu.Connection, changes: Sequence[Change], at: datetime) -> None:
        _exec(
            conn,
            "UNWIND $cs AS c CREATE (:Change {seq: c.seq, op: c.op, memory_id: c.mid, at: $at})",
            {"cs": [{"seq": c.seq, "op": c.op, "mid": c.memory_id} for c in changes], "at": at},
        )

    def unlink(self, conn: kuzu.Connection, memory_id: str, scope: str) -> None:
        """Remove ``memory_id`` from ``scope``: the CONTAINS edge and the entry in its scope list."""
        _exec(
            conn,
            "MATCH (s:Scope {id: $s})-[r:CONTAINS]->(m:Memory {id: $id}) DELETE r",
            {"s": scope, "id": memory_id},
        )
        self.unlink_all(conn, scope, [memory_id])

    def unlink_all(self, conn: kuzu.Connection, scope: str, shared: Sequence[str]) -> None:
        """Remove ``scope`` from the scope lists of memories that stay in other scopes."""
        for mid in shared:
            rows = _rows(conn, "MATCH (m:Memory {id: $id}) RETURN m.scopes", {"id": mid})
            remaining = [x for x in (rows[0][0] or []) if x != scope]
            _exec(conn, "MATCH (m:Memory {id: $id}) SET m.scopes = $ss", {"id": mid, "ss": remaining})

    def delete_scope(self, conn: kuzu.Connection, scope: str, only: Sequence[str]) -> int:
        """Erase a scope: its exclusive memories, its edges, its node; children move to its parent.

        Returns how many entities were left unmentioned and deleted.
        """
        entities = self.delete_memories(conn, only)
        _exec(
            conn,
            "MATCH (p:Scope)-[:PARENT_OF]->(s:Scope {id: $s})-[:PARENT_OF]->(c:Scope) CREATE (p)-[:PARENT_OF]->(c)",
            {"s": scope},
        )
        _exec(conn, "MATCH (s:Scope {id: $s}) DETACH DELETE s", {"s": scope})
        return entities

    def delete_memories(self, conn: kuzu.Connection, ids: Sequence[str]) -> int:
        """Delete memories with their edges, the relations they recorded, version pointers to them, and the
        entities no remaining memory mentions; an entity that stays keeps only the name, type and aliases its
        remaining mentions gave it. Returns how many entities were deleted."""
        ids = list(ids)
        touched = [
            r[0]
            for r in _rows(
                conn,
                "MATCH (m:Memory)-[:MENTIONS]->(e:Entity) WHERE m.id IN $ids RETURN DISTINCT e.id",
                {"ids": ids},
            )
        ]
        _exec(conn, "MATCH ()-[r:RELATES]->() WHERE r.memory_id IN $ids DELETE r", {"ids": ids})
        _exec(conn, "MATCH (x:Enrichment) WHERE x.id IN $ids DELETE x", {"ids": ids})
        # A relation closed by an erased memory is open again: what ended it is no longer known.
        _exec(
            conn,
            "MATCH ()-[r:RELATES]->() WHERE r.ended_by IN $ids SET r.valid_to = NULL, r.ended_by = NULL",
            {"ids": ids},
        )
        _exec(conn, "MATCH (m:Memory) WHERE m.supersedes IN $ids SET m.supersedes = NULL", {"ids": ids})
        # A version that stays while its newer version goes must not point at it; it stays out of current
        # recall (its validity was closed when it was superseded), now as retired at that same moment.
        _exec(
            conn,
            "MATCH (n:Memory)-[r:SUPERSEDES]->(o:Memory) WHERE n.id IN $ids AND NOT o.id IN $ids "
            "SET o.retire_reason = CASE WHEN o.retired_at IS NULL THEN $why ELSE o.retire_reason END, "
            "o.retired_at = coalesce(o.retired_at, r.at), o.superseded_by = NULL",
            {"ids": ids, "why": _NEWER_ERASED},
        )
        _exec(
            conn,
            "MATCH (m:Memory) WHERE m.superseded_by IN $ids "
            "SET m.retire_reason = CASE WHEN m.retired_at IS NULL THEN $why ELSE m.retire_reason END, "
            "m.retired_at = coalesce(m.retired_at, m.valid_to, m.recorded_at), m.superseded_by = NULL",
            {"ids": ids, "why": _NEWER_ERASED},
        )
        _exec(conn, "MATCH (m:Memory) WHERE m.id IN $ids DETACH DELETE m", {"ids": ids})
        orphans = _rows(
            conn,
            "MATCH (e:Entity) WHERE NOT EXISTS { MATCH (:Memory)-[:MENTIONS]->(e) } "
            "AND NOT EXISTS { MATCH (e)-[:RELATES]-(:Entity) } RETURN e.id",
        )
        _exec(conn, "MATCH (e:Entity) WHERE e.id IN $ids DETACH DELETE e", {"ids": [r[0] for r in orphans]})
        gone = {r[0] for r in orphans}
        for eid in touched:
            if eid not in gone:
                self._regive(conn, eid)
        return len(orphans)

    def _regive(self, conn: kuzu.Connection, entity: str) -> None:
        """Set an entity's name, type and aliases from the mentions that remain: the earliest mention's name
        and type, every mention's aliases."""
        rows = _rows(
            conn,
            "MATCH (m:Memory)-[r:MENTIONS]->(e:Entity {id: $e}) RETURN r.name, r.type, r.aliases, e.name "
            "ORDER BY m.recorded_at, m.id",
            {"e": entity},
        )
        if not rows:  # kept by relations alone (a relation's ends are always mentioned, so not expected)
            rows = [
                [None, None, None, r[0]]
                for r in _rows(conn, "MATCH (e:Entity {id: $e}) RETURN e.name", {"e": entity})
            ]
        name = next((n for n, _, _, _ in rows if n), rows[0][3])
        etype = next((t for _, t, _, _ in rows if t), "thing")
        aliases = list(dict.fromkeys(a for _, _, given, _ in rows for a in (given or ())))
        _exec(
            conn,
            "MATCH (e:Entity {id: $e}) SET e.name = $name, e.type = $type, e.aliases = CAST($aliases AS STRING[])",
            {"e": entity, "name": name, "type": etype, "aliases": aliases},
        )


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NEWER_ERASED = "its newer version was erased"


def _memory(r: list[Any], scopes: tuple[str, ...], entities: tuple[str, ...]) -> Memory:
    (mid, content, kind, principal, client, source, metadata, event_time, ets, valid_from, valid_to, recorded_at,
     retired_at, retire_reason, supersedes, superseded_by) = r  # fmt: skip
    return Memory(
        id=mid,
        content=content,
        kind=MemoryKind(kind),
        scopes=scopes,
        entities=entities,
        provenance=Provenance(principal or "", client or "", source or ""),
        metadata=json.loads(metadata) if metadata else {},
        event_time=utc(event_time) or _EPOCH,
        event_time_source=ets,
        valid_from=utc(valid_from) or _EPOCH,
        valid_to=utc(valid_to),
        recorded_at=utc(recorded_at) or _EPOCH,
        retired_at=utc(retired_at),
        retire_reason=retire_reason or "",
        supersedes=supersedes,
        superseded_by=superseded_by,
    )


def cypher_string(value: str) -> str:
    """``value`` as a Cypher string literal, for the few statements that take no parameters (EXPORT and
    IMPORT DATABASE paths). Backslash and single quote are escaped, so a path such as ``/home/o'brien`` stays
    one literal; every other value goes in as a bound parameter."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


_PLAIN = re.compile(r"[A-Za-z0-9_./-]+")


@contextmanager
def _plain_path(directory: Path) -> Iterator[str]:
    """A path to ``directory`` made of plain characters only, valid for the block.

    Kùzu's EXPORT DATABASE writes the paths it was given, unescaped, into the script IMPORT DATABASE runs, so a
    data directory under ``/home/o'brien`` or one with a double quote would break the import however the
    statement itself is quoted. A plain path is used as it is; otherwise the directory is reached through an
    open descriptor (``/proc/self/fd/N``, Linux) or a symbolic link in a fresh temporary directory.
    """
    text = str(directory)
    if _PLAIN.fullmatch(text):
        yield text
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        via_fd = f"/proc/self/fd/{fd}"
        if os.path.isdir(f"{via_fd}/.") and os.path.samefile(via_fd, directory):
            yield via_fd
            return
        link_dir = tempfile.mkdtemp(prefix="mnemograph-")
        try:
            link = f"{link_dir}/d"
            os.symlink(directory, link)
            if not _PLAIN.fullmatch(link):
                raise StorageUnavailable(
                    f"no plain path reaches the data directory {text!r} for the canonical store's rewrite",
                    hint="set TMPDIR to a directory whose path has only letters, digits, '.', '_', '-' and '/'",
                )
            yield link
        finally:
            shutil.rmtree(link_dir, ignore_errors=True)
    finally:
        os.close(fd)


def _checkpoint_timeout(exc: BaseException) -> bool:
    """Kùzu's checkpoint gave up waiting for open transactions: transient, nothing was lost."""
    return str(exc).startswith(
        "Timeout waiting for active transactions to leave the system before checkpointing"
    )


def _rebuild_failed(exc: BaseException) -> StorageUnavailable:
    return StorageUnavailable(
        f"the canonical store could not be rewritten: {str(exc)[:300]}",
        hint="nothing acknowledged was lost and the store stays usable; the rewrite that removes erased bytes "
        "from disk is retried at the next erase or purge and at the next start (check free disk space)",
    )


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
