"""Cypher plumbing shared by the Kùzu adapter's modules: the schema, prepared statements, row decoding
and the file helpers of a rebuild. Only this package speaks Cypher; every value is a bound parameter."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import kuzu

from storage.adapters import _half as half
from storage.domain.errors import StorageUnavailable
from storage.domain.models import Memory, MemoryKind, Provenance
from storage.domain.records import (
    NewMemory,
)
from storage.ports.canonical import Session

log = logging.getLogger("mnemograph.graph")

SCHEMA_VERSION = "1"
# A canonical fetch of at least this many ids is split over two connections when an executor is given.
PARALLEL_FETCH = 6
# Databases whose commit failed: kept referenced so that no destructor checkpoints them before the process ends.
_ABANDONED: list[object] = []


_MEMORY_FIELDS = (
    "id, content, kind, principal, client, source, metadata, event_time, event_time_source, valid_from, "
    "valid_to, recorded_at, retired_at, retire_reason, supersedes, superseded_by"
)
_FIELD_NAMES = tuple(f.strip() for f in _MEMORY_FIELDS.split(","))
_RETURN_MEMORY = ", ".join(f"m.{f.strip()}" for f in _MEMORY_FIELDS.split(","))
_FETCH_ONE = f"MATCH (m:Memory {{id: $id}}) RETURN {_RETURN_MEMORY}, m.scopes, m.entity_names"
# A memory's vector: float16 numbers (as UINT16: the same bits) and the power of two they are scaled by
# (storage.adapters._half). Stores written before hold a FLOAT[dim] ``vector`` until ``GraphStore`` converts it.
VECTOR = "m.vector16, m.vector_exp"
_PROJECTION = f"m.id, m.content, m.kind, m.scopes, m.retired_at IS NULL AND m.superseded_by IS NULL, m.event_time, {VECTOR}"
_PROJECT_ONE = f"MATCH (m:Memory {{id: $id}}) RETURN {_PROJECTION}"


# What ``mentioning`` reads of a memory, copied onto each of its MENTIONS edges (column, type, value from ``m``):
# read from the memories, a hub entity's mentions cost a random read of six columns per mentioning memory (30 ms
# for an entity named 3,000-6,000 times at 100,000 memories); read from the edges, which Kùzu stores together per
# entity, a few ms (docs/benchmarks/scale.md, session 21). Every statement that creates a mention or changes one
# of these fields of a memory copies them again (``COPY_TO_MENTIONS``).
MENTION_COPIES = (
    ("memory_id", "STRING", "m.id"),
    ("scopes", "STRING[]", "m.scopes"),
    ("live", "BOOL", "m.retired_at IS NULL AND m.superseded_by IS NULL"),
    ("recorded_at", "TIMESTAMP", "m.recorded_at"),
    ("valid_from", "TIMESTAMP", "m.valid_from"),
    ("valid_to", "TIMESTAMP", "m.valid_to"),
)
# A SET clause for a memory ``m`` and its mention ``r``.
COPY_TO_MENTION = ", ".join(f"r.{column} = {value}" for column, _, value in MENTION_COPIES)
# Re-copy one memory's fields onto all its mentions (reached from its key: the cost follows its mentions).
RECOPY_MENTIONS = f"MATCH (m:Memory {{id: $id}})-[r:MENTIONS]->(:Entity) SET {COPY_TO_MENTION}"


def _schema(dim: int) -> list[str]:
    return [
        "CREATE NODE TABLE IF NOT EXISTS Meta(key STRING PRIMARY KEY, value STRING)",
        "CREATE NODE TABLE IF NOT EXISTS Memory(id STRING PRIMARY KEY, content STRING, kind STRING, "
        "principal STRING, client STRING, source STRING, metadata STRING, event_time TIMESTAMP, "
        "event_time_source STRING, valid_from TIMESTAMP, valid_to TIMESTAMP, recorded_at TIMESTAMP, "
        "retired_at TIMESTAMP, retire_reason STRING, supersedes STRING, superseded_by STRING, "
        f"vector16 UINT16[{dim}], vector_exp INT16, scopes STRING[], entity_names STRING[])",
        "CREATE NODE TABLE IF NOT EXISTS Scope(id STRING PRIMARY KEY, created_at TIMESTAMP)",
        "CREATE NODE TABLE IF NOT EXISTS Entity(id STRING PRIMARY KEY, name STRING, type STRING, aliases STRING[])",
        "CREATE NODE TABLE IF NOT EXISTS Change(seq INT64 PRIMARY KEY, op STRING, memory_id STRING, at TIMESTAMP)",
        "CREATE REL TABLE IF NOT EXISTS CONTAINS(FROM Scope TO Memory, added_at TIMESTAMP)",
        "CREATE REL TABLE IF NOT EXISTS PARENT_OF(FROM Scope TO Scope)",
        "CREATE REL TABLE IF NOT EXISTS SUPERSEDES(FROM Memory TO Memory, reason STRING, at TIMESTAMP)",
        # Each edge keeps the name, type and aliases that memory gave the entity, so that erasing the memory
        # can take back exactly what it gave (an alias given only by an erased memory must not stay live).
        # ``memory_id`` .. ``valid_to``: what the graph lane's ``mentioning`` filters and orders on, copied from
        # the memory and kept in step with it (``MENTION_COPIES``). Stores made before them get the columns at
        # open (``GraphStore``).
        "CREATE REL TABLE IF NOT EXISTS MENTIONS(FROM Memory TO Entity, name STRING, type STRING, aliases STRING[], "
        + ", ".join(f"{column} {kind}" for column, kind, _ in MENTION_COPIES)
        + ")",
        # ``scopes``: the recording memory's scope list, kept in step with it (the graph lane's window is chosen
        # among the edges a reader may see). Stores made before it get the column at open (``GraphStore``).
        "CREATE REL TABLE IF NOT EXISTS RELATES(FROM Entity TO Entity, predicate STRING, memory_id STRING, "
        "recorded_at TIMESTAMP, scopes STRING[], subject_name STRING, object_name STRING)",
        # Write-time reconciliation (storage.enrich.reconcile): a relation's validity, closed by the memory
        # that ended it; and CONTRADICTS between memories whose statements conflict. Added in place to
        # stores created before them (the columns read NULL there: open, as those relations were).
        "ALTER TABLE RELATES ADD IF NOT EXISTS valid_from TIMESTAMP",
        "ALTER TABLE RELATES ADD IF NOT EXISTS valid_to TIMESTAMP",
        "ALTER TABLE RELATES ADD IF NOT EXISTS ended_by STRING",
        # ``subject_name``/``object_name``: the ends as the recording memory spelt them, shown to readers of the
        # edge instead of the Entity's display name (which may be another scope's spelling). Stores made before
        # them get the columns, filled from the memory's mentions, at open (``GraphStore``).
        "CREATE REL TABLE IF NOT EXISTS CONTRADICTS(FROM Memory TO Memory, predicate STRING, at TIMESTAMP)",
        # The end a planned change gave a memory (``end_validity(by=...)``), kept when the plan is cancelled or
        # moved and the end undone: ``known_at`` between the plan and its withdrawal answers with it. ``id`` is
        # the memory's id and the plan's; created at the open of a store made before it.
        "CREATE NODE TABLE IF NOT EXISTS PlannedEnd(id STRING PRIMARY KEY, memory_id STRING, ended_by STRING, "
        "valid_to TIMESTAMP)",
        # The outcome of the optional LLM enrichment of a memory (never its content): shown by memory_read.
        "CREATE NODE TABLE IF NOT EXISTS Enrichment(id STRING PRIMARY KEY, status STRING, detail STRING, "
        "model STRING, input_tokens INT64, output_tokens INT64, cache_read_tokens INT64, "
        "cache_write_tokens INT64, at TIMESTAMP)",
        # Conversations handed over with conversation_write, and the digest the consolidator keeps for each
        # (storage.engine.conversations). The key is a hash; the caller's conversation id is not stored here.
        "CREATE NODE TABLE IF NOT EXISTS Conversation(key STRING PRIMARY KEY, changed_at TIMESTAMP, "
        "digested_at TIMESTAMP, digest STRING)",
        "CREATE REL TABLE IF NOT EXISTS IN_CONVERSATION(FROM Memory TO Conversation)",
        # Entity resolution (storage.engine.resolution): a proposal that two entities are one. Names live on
        # the Entity nodes; the edge holds the memory whose mention raised it, so erasing that memory drops it.
        "CREATE REL TABLE IF NOT EXISTS SAME_AS(FROM Entity TO Entity, id STRING, tier STRING, score DOUBLE, "
        "memory_id STRING, status STRING, created_at TIMESTAMP, decided_at TIMESTAMP, decided_by STRING, "
        "scopes STRING[])",
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
# While the canonical store is rewritten beside live traffic (``GraphStore.rebuild``), the statements that change
# data on the write connection are recorded here, per transaction, to be replayed into the new database. Every
# write goes through ``_exec`` with bound parameters and no clock or random function, so a replay in commit
# order on the snapshot's copy gives the same rows. A read recorded by mistake would only cost time.
_RECORDING: weakref.WeakKeyDictionary[kuzu.Connection, list[tuple[str, dict[str, Any]]]] = (
    weakref.WeakKeyDictionary()
)
_CHANGES_DATA = re.compile(r"\b(CREATE|MERGE|SET|DELETE|REMOVE|ALTER|DROP|COPY)\b")


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


def vector_params(vector: Sequence[float]) -> dict[str, Any]:
    """The parameters ``$vector16``, ``$vector_exp`` of a memory's vector as stored (``storage.adapters._half``)."""
    exp, halves = half.encode(vector)
    return {"vector16": half.as_int16(halves), "vector_exp": exp}


def vector_value(halves: Sequence[int] | None, exp: int | None) -> list[float]:
    """The float32 vector a memory row holds (``VECTOR`` read back)."""
    if halves is None:
        return []
    return [float(x) for x in half.decode(exp or 0, half.from_int16(halves))]


def _exec(session: Session, query: str, params: dict[str, Any] | None = None) -> kuzu.QueryResult:
    conn = cast(kuzu.Connection, session)  # the sessions this adapter hands out are its connections
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
    journal = _RECORDING.get(conn)
    if journal is not None and _CHANGES_DATA.search(query):
        journal.append((query, dict(params or {})))
    return result


def _rows(conn: Session, query: str, params: dict[str, Any] | None = None) -> list[list[Any]]:
    return [list(r) for r in _exec(conn, query, params).get_all()]


# Keys looked up by one statement at most (``by_keys``): a statement per count up to this is prepared per
# connection, and a recall asks for k (10 by default) at a time.
KEYS_PER_STATEMENT = 32
_KEY = re.compile(r"\$id\b")


def by_keys(
    conn: Session, one: str, keys: list[str], params: dict[str, Any] | None = None
) -> list[list[Any]]:
    """The rows of ``one`` (a statement that looks up the key ``$id`` by primary key) for every key, in as few
    statements as ``KEYS_PER_STATEMENT`` allows: the lookups joined by ``UNION ALL``, each still planned as a
    primary-key scan. Kùzu 0.11 answers ``WHERE m.id IN $ids`` and ``UNWIND $ids AS i MATCH (m {id: i})``
    with a scan of the whole table (160 and 57 ms for 10 ids among 100,000 rows, against 4 ms for 10
    statements). Rows come in no particular order; ``params`` are shared by every lookup."""
    out: list[list[Any]] = []
    for lo in range(0, len(keys), KEYS_PER_STATEMENT):
        chunk = keys[lo : lo + KEYS_PER_STATEMENT]
        if len(chunk) == 1:
            out += _rows(conn, one, {**(params or {}), "id": chunk[0]})
            continue
        query = " UNION ALL ".join(_KEY.sub(f"$id{k}", one) for k in range(len(chunk)))
        out += _rows(conn, query, {**(params or {}), **{f"id{k}": key for k, key in enumerate(chunk)}})
    return out


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


def _failed_past_the_log(exc: BaseException) -> bool:
    """A COMMIT failed in its checkpoint, after the WAL: Kùzu writes and syncs the commit to its WAL first and
    only then checkpoints (on its own once the WAL passes 16 MiB), so the commit is on disk and the next open
    replays it. Only a failure that names what a checkpoint writes (the database file, or the shadow file it
    stages pages in) counts: one that names the WAL, a spill file or no file is the commit's own write failing."""
    match = re.search(r"path: (\S+)", str(exc))
    return match is not None and match.group(1).endswith((".kz", ".kz.shadow"))


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
