"""The Kùzu adapter's reads."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor, wait
from datetime import datetime
from typing import Any, TypeVar

import kuzu

from storage.adapters.kuzu._cypher import (
    _EPOCH,
    _FETCH_ONE,
    _PROJECT_ONE,
    _PROJECTION,
    MENTION_COPIES,
    PARALLEL_FETCH,
    VECTOR,
    _exec,
    _memory,
    _rows,
    by_keys,
    utc,
    vector_value,
)
from storage.adapters.kuzu._kept import MENTIONS_PER_ENTITY, RELATIONS_PER_ENTITY, Mention, PerEntity, select
from storage.domain.models import Memory
from storage.domain.records import (
    Change,
    KnownEntity,
    ProjectionRow,
    Relation,
    SameAs,
)
from storage.ports.canonical import Session

T = TypeVar("T")
ItemT = TypeVar("ItemT")

_VISIBLE_ONE = (
    "MATCH (m:Memory {id: $id}) WITH m "
    # "shares a scope with $ss", without a list comprehension over a parameter (see mentioning())
    "WHERE size(list_distinct(list_concat(m.scopes, $ss))) < size(m.scopes) + size($ss) "
    "AND m.retired_at IS NULL AND m.superseded_by IS NULL "
    "AND m.valid_from <= $now AND (m.valid_to IS NULL OR m.valid_to > $now) RETURN m.id"
)


def _first(seen: set[Any], key: Any) -> bool:
    """Whether ``key`` is met for the first time (and remember it)."""
    if key in seen:
        return False
    seen.add(key)
    return True


class _Reads:
    """Queries inside ``read()`` / ``transaction()``: records, scopes, entities, the change log."""

    _writer: kuzu.Connection
    _local: threading.local
    # Moves when a transaction ends (``GraphStore.transaction``): what is kept was read at one value of it.
    _data_version: int
    _mentions: PerEntity[Mention]
    _relations: PerEntity[Relation]

    def _thread_conn(self) -> kuzu.Connection:
        raise NotImplementedError  # GraphStore's

    def _keeps(self, conn: Session) -> bool:
        """Whether a read on ``conn`` sees committed data only, so that what it reads may be kept: the calling
        thread's read connection (``read()``) outside a snapshot, never the writer inside its transaction."""
        return (
            conn is getattr(self._local, "conn", None)
            and conn is not self._writer
            and not getattr(self._local, "snapshot", False)
        )

    def max_seq(self, conn: Session) -> int:
        rows = _rows(conn, "MATCH (c:Change) RETURN max(c.seq)")
        return int(rows[0][0]) if rows and rows[0][0] is not None else 0

    def oldest_change(self, conn: Session) -> int | None:
        rows = _rows(conn, "MATCH (c:Change) RETURN min(c.seq)")
        return int(rows[0][0]) if rows and rows[0][0] is not None else None

    def changes_since(self, conn: Session, seq: int, *, limit: int = 1_000_000) -> list[Change]:
        rows = _rows(
            conn,
            "MATCH (c:Change) WHERE c.seq > $s RETURN c.seq, c.op, c.memory_id ORDER BY c.seq LIMIT $n",
            {"s": seq, "n": limit},
        )
        return [Change(int(s), op, mid) for s, op, mid in rows]

    def prune_changes(self, conn: Session, upto: int) -> None:
        _exec(conn, "MATCH (c:Change) WHERE c.seq <= $s DELETE c", {"s": upto})

    def fetch(self, conn: Session, ids: Iterable[str], executor: Executor | None = None) -> dict[str, Memory]:
        """Full records for the given ids (missing ids are absent from the result).

        One primary-key lookup per id, up to 32 of them joined in one statement (``by_keys``): Kùzu answers
        ``id IN [...]`` with a scan of every memory, and reading scope membership through CONTAINS edges costs a
        traversal per memory, so each memory carries its scope and entity names as lists kept in step with the
        edges in the same transaction. The records come in the order of ``ids``.

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

    def read_each(
        self,
        conn: Session,
        read: Callable[[Session, ItemT], T],
        items: Sequence[ItemT],
        executor: Executor | None = None,
    ) -> list[T]:
        """Each item's read on a worker's own connection while this thread reads the first (Kùzu releases the
        GIL while it queries), as ``fetch`` does. The workers rely on the caller's read lock, held until every
        read is back; a read still queued (the pool is busy) is done by this thread instead."""
        if executor is None or len(items) < 2 or conn is self._writer:
            return [read(conn, item) for item in items]

        def on_worker(item: ItemT) -> T:
            return read(self._thread_conn(), item)

        futures = [executor.submit(on_worker, item) for item in items[1:]]
        try:
            out = [read(conn, items[0])]
            for item, f in zip(items[1:], futures, strict=True):
                out.append(read(conn, item) if f.cancel() else f.result())
        except BaseException:
            for f in futures:
                f.cancel()
            wait(futures)  # never leave a worker reading once the caller's read lock may be released
            raise
        return out

    def _fetch(self, conn: Session, ids: Sequence[str]) -> dict[str, Memory]:
        got = {r[0]: r for r in by_keys(conn, _FETCH_ONE, list(ids))}
        return {
            mid: _memory(r[:-2], tuple(sorted(r[-2] or ())), tuple(sorted(r[-1] or ())))
            for mid in ids
            if (r := got.get(mid)) is not None
        }

    def has_metadata_key(self, conn: Session, key: str) -> bool:
        """Whether any memory's metadata has ``key`` (a scan, stopped at the first match; may say yes for a
        value that merely contains the key's JSON text)."""
        needle = json.dumps(key, ensure_ascii=False) + ":"
        rows = _rows(
            conn, "MATCH (m:Memory) WHERE contains(m.metadata, $n) RETURN m.id LIMIT 1", {"n": needle}
        )
        return bool(rows)

    def ids_with_prefix(self, conn: Session, prefix: str, limit: int = 2) -> list[str]:
        rows = _rows(
            conn,
            "MATCH (m:Memory) WHERE starts_with(m.id, $p) RETURN m.id ORDER BY m.id LIMIT $n",
            {"p": prefix, "n": limit},
        )
        return [r[0] for r in rows]

    def chain(self, conn: Session, memory_id: str) -> list[str]:
        """Ids of every version connected to memory_id by SUPERSEDES, oldest first."""
        rows = _rows(
            conn,
            # SHORTEST: one breadth-first search, one path per version. Kùzu's default semantic for a variable
            # length pattern is WALK, and undirected walks go back and forth along the chain: their number grows
            # exponentially with its length before DISTINCT (six versions took over 4 GB and minutes).
            # The start is added back (the walk used to reach it through a neighbour), as FalkorDB's adapter does.
            "MATCH (a:Memory {id: $id})-[:SUPERSEDES* SHORTEST 1..30]-(b:Memory) WITH a, collect(DISTINCT b) AS bs "
            "UNWIND list_concat(bs, [a]) AS x RETURN DISTINCT x.id, x.recorded_at ORDER BY x.recorded_at, x.id",
            {"id": memory_id},
        )
        return [r[0] for r in rows]

    def scope_parents(self, conn: Session) -> tuple[list[str], dict[str, str]]:
        scopes = [r[0] for r in _rows(conn, "MATCH (s:Scope) RETURN s.id ORDER BY s.id")]
        parents = {c: p for p, c in _rows(conn, "MATCH (p:Scope)-[:PARENT_OF]->(c:Scope) RETURN p.id, c.id")}
        return scopes, parents

    def scope_counts(self, conn: Session) -> dict[str, int]:
        rows = _rows(
            conn,
            "MATCH (s:Scope)-[:CONTAINS]->(m:Memory) WHERE m.retired_at IS NULL AND m.superseded_by IS NULL "
            "RETURN s.id, count(m)",
        )
        return {sid: int(n) for sid, n in rows}

    def list_scope(
        self,
        conn: Session,
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

    def known_entities(self, conn: Session) -> list[KnownEntity]:
        """Every entity with how many memories mention it and how many relations touch it."""
        mentions = dict(_rows(conn, "MATCH (:Memory)-[:MENTIONS]->(e:Entity) RETURN e.id, count(*)"))
        relations = dict(_rows(conn, "MATCH (e:Entity)-[r:RELATES]-(:Entity) RETURN e.id, count(r)"))
        inside: dict[str, list[tuple[str, int]]] = {}
        for eid, sid, n in _rows(
            conn, "MATCH (s:Scope)-[:CONTAINS]->(:Memory)-[:MENTIONS]->(e:Entity) RETURN e.id, s.id, count(*)"
        ):
            inside.setdefault(eid, []).append((sid, int(n)))
        return [
            KnownEntity(
                i,
                n,
                tuple(a or ()),
                int(mentions.get(i, 0)),
                int(relations.get(i, 0)),
                tuple(inside.get(i, ())),
            )
            for i, n, a in _rows(conn, "MATCH (e:Entity) RETURN e.id, e.name, e.aliases")
        ]

    def same_as(
        self,
        conn: Session,
        ids: Sequence[str] | None = None,
        *,
        status: str | None = None,
        after: tuple[datetime, str] | None = None,
        limit: int | None = None,
    ) -> list[SameAs]:
        where, params = _same_as_filter(ids, status, after)
        page = ""
        if limit is not None:
            page, params["n"] = " LIMIT $n", limit
        rows = _rows(
            conn,
            f"MATCH (a:Entity)-[r:SAME_AS]->(b:Entity){where} RETURN r.id, a.name, b.name, r.tier, r.score, "
            "r.memory_id, r.status, r.created_at, r.decided_at, r.decided_by, r.scopes "
            f"ORDER BY r.created_at, r.id{page}",
            params,
        )
        return [
            SameAs(i, a, b, t, float(sc), m, st, utc(c) or c, utc(d), by or "", tuple(ss or ()))
            for i, a, b, t, sc, m, st, c, d, by, ss in rows
        ]

    def pending_same_count(self, conn: Session, scope: str) -> int:
        rows = _rows(
            conn,
            "MATCH ()-[r:SAME_AS]->() WHERE r.status = 'pending' AND list_contains(r.scopes, $s) RETURN count(*)",
            {"s": scope},
        )
        return int(rows[0][0]) if rows else 0

    def mentioning(
        self,
        conn: Session,
        entity: str,
        *,
        scopes: Sequence[str],
        live_only: bool,
        limit: int,
        valid_at: datetime | None = None,
    ) -> list[str]:
        """Ids of memories in any of ``scopes`` that mention the entity (by id), most recently recorded
        first, at most ``limit`` (the canonical filter in recall still decides what is returned). With
        ``valid_at`` (and ``live_only``), only memories valid at that instant: exactly those a current-view
        query may see (``recall.visible``)."""
        if self._keeps(conn):
            kept = self._mentions.fetch(entity, self._data_version, lambda: self._mentions_of(conn, entity))
            if kept is not None and kept is not False:
                return select(kept, scopes, live_only=live_only, limit=limit, valid_at=valid_at)
        live = " AND r.live" if live_only else ""
        if live_only and valid_at is not None:
            live += " AND r.valid_from <= $now AND (r.valid_to IS NULL OR r.valid_to > $now)"
        params: dict[str, Any] = {"e": entity, "ss": list(dict.fromkeys(scopes)), "n": limit}
        if "$now" in live:
            params["now"] = valid_at
        rows = _rows(
            conn,
            # Entity first, then WITH: written as one pattern with the filter in its WHERE, Kùzu 0.11 plans a
            # scan of every memory (the filter pushed into it) joined to the mentions, a cost that grows with
            # the store (11 ms a call at 5,000 memories); this way only the entity's mentions are read. Only
            # the edges' own columns (``MENTION_COPIES``): reading ``m.id`` as well costs a random read per
            # mention again (39 instead of 6 ms for an entity named 3,000-6,000 times at 100,000 memories).
            "MATCH (e:Entity {id: $e})<-[r:MENTIONS]-(:Memory) WITH r "
            # "shares a scope with $ss", written without a list comprehension over a parameter: that form
            # crashes Kùzu 0.11 (KU_UNREACHABLE, or a segfault). Both lists hold distinct values.
            f"WHERE size(list_distinct(list_concat(r.scopes, $ss))) < size(r.scopes) + size($ss){live} "
            "RETURN r.memory_id ORDER BY r.recorded_at DESC, r.memory_id LIMIT $n",
            params,
        )
        return [r[0] for r in rows]

    def _mentions_of(self, conn: Session, entity: str) -> list[Mention] | None:
        """Every memory mentioning the entity, in ``mentioning``'s order, with what its filter reads; None when
        there are more than ``MENTIONS_PER_ENTITY`` (then the reader's filter runs in the store)."""
        count = _rows(conn, "MATCH (e:Entity {id: $e})<-[:MENTIONS]-(:Memory) RETURN count(*)", {"e": entity})
        if count and int(count[0][0]) > MENTIONS_PER_ENTITY:
            return None
        rows = _rows(
            conn,
            # Entity first, then WITH, as in ``mentioning``: only the entity's mentions are read, and only
            # their own columns.
            "MATCH (e:Entity {id: $e})<-[r:MENTIONS]-(:Memory) WITH r "
            "RETURN r.memory_id, r.scopes, r.live, r.valid_from, r.valid_to "
            "ORDER BY r.recorded_at DESC, r.memory_id LIMIT $n",
            {"e": entity, "n": MENTIONS_PER_ENTITY + 1},
        )
        if len(rows) > MENTIONS_PER_ENTITY:
            return None
        # One frozenset per distinct scope list: most of an entity's mentions share a handful of them.
        sets: dict[tuple[str, ...], frozenset[str]] = {}
        out = []
        for mid, ss, live, vf, vt in rows:
            key = tuple(ss or ())
            scope_set = sets.get(key)
            if scope_set is None:
                scope_set = sets[key] = frozenset(key)
            out.append(Mention(mid, scope_set, bool(live), vf, vt))
        return out

    def aliases_given(self, conn: Session, entity: str, *, scopes: Sequence[str]) -> set[str]:
        rows = _rows(
            conn,
            # Entity first, then WITH, as in ``mentioning``: only the entity's mentions are read.
            "MATCH (e:Entity {id: $e})<-[r:MENTIONS]-(:Memory) WITH r "
            "WHERE r.aliases IS NOT NULL AND size(r.aliases) > 0 "
            "AND size(list_distinct(list_concat(r.scopes, $ss))) < size(r.scopes) + size($ss) "
            "RETURN r.aliases",
            {"e": entity, "ss": list(dict.fromkeys(scopes))},
        )
        return {a for (aliases,) in rows for a in aliases or ()}

    def names_given(self, conn: Session, entity: str, *, scopes: Sequence[str]) -> set[str]:
        rows = _rows(
            conn,
            # Entity first, then WITH, as in ``aliases_given``: only the entity's mentions are read.
            "MATCH (e:Entity {id: $e})<-[r:MENTIONS]-(:Memory) WITH r "
            "WHERE r.name IS NOT NULL "
            "AND size(list_distinct(list_concat(r.scopes, $ss))) < size(r.scopes) + size($ss) "
            "RETURN DISTINCT r.name",
            {"e": entity, "ss": list(dict.fromkeys(scopes))},
        )
        return {name for (name,) in rows}

    def visible_among(
        self, conn: Session, entity: str, ids: Sequence[str], *, scopes: Sequence[str], now: datetime
    ) -> set[str]:
        """Which of ``ids`` a current-view query over ``scopes`` may see at ``now`` (a shared scope; neither
        retired nor superseded; valid at ``now``): the same answer as ``recall.visible`` on their records, for
        the graph walk's edges without fetching whole records. One primary-key lookup per id (joined in one
        statement, ``by_keys``; WITH before the filter, else the lookup is planned as a scan): walking the
        entity's mentions instead (the ids are among them) cost 30-120 ms for an entity named by thousands of
        memories at 100,000 (``id IN [...]`` is a scan of every memory in Kùzu 0.11)."""
        del entity  # every id recorded a relation of it; the lookups need only the ids
        params: dict[str, Any] = {"ss": list(dict.fromkeys(scopes)), "now": now}
        return {r[0] for r in by_keys(conn, _VISIBLE_ONE, list(dict.fromkeys(ids)), params)}

    def relations(
        self, conn: Session, entity: str, *, limit: int, scopes: Sequence[str] | None = None
    ) -> list[Relation]:
        """RELATES edges touching the entity (by id) in either direction, newest first, at most ``limit``.
        Each names the memory that recorded it, whose visibility decides the edge's. With ``scopes``, only edges
        whose memory shares one of them, filtered before the cut: each edge carries its memory's scope list
        (``r.scopes``), so the filter costs no memory lookup (a join on ``m.id = r.memory_id`` scans every
        memory in Kùzu 0.11). One undirected match (the direction read from the edge's start node): half the
        store queries of one per direction."""
        if scopes is not None and not scopes:
            return []  # no scope to share (and Kùzu cannot type an empty list parameter: "ANY type")
        if self._keeps(conn):
            kept = self._relations.fetch(entity, self._data_version, lambda: self._relations_of(conn, entity))
            if kept is not None and kept is not False:
                if scopes is not None:
                    wanted = set(scopes)
                    kept = [r for r in kept if not wanted.isdisjoint(r.scopes)]
                return kept[:limit]
        return self._read_relations(conn, entity, limit=limit, scopes=scopes)

    def _relations_of(self, conn: Session, entity: str) -> list[Relation] | None:
        """Every relation of the entity, in ``relations``' order; None when there are more than
        ``RELATIONS_PER_ENTITY`` (then the reader's filter runs in the store)."""
        count = _rows(conn, "MATCH (a:Entity {id: $e})-[r:RELATES]-(:Entity) RETURN count(r)", {"e": entity})
        if count and int(count[0][0]) > RELATIONS_PER_ENTITY:
            return None
        rels = self._read_relations(conn, entity, limit=RELATIONS_PER_ENTITY + 1, scopes=None)
        return None if len(rels) > RELATIONS_PER_ENTITY else rels

    def _read_relations(
        self, conn: Session, entity: str, *, limit: int, scopes: Sequence[str] | None
    ) -> list[Relation]:
        shares = ""
        params: dict[str, Any] = {"e": entity, "n": limit}
        if scopes is not None:
            # "shares a scope with $ss", without a list comprehension over a parameter (see mentioning())
            shares = "WHERE size(list_distinct(list_concat(r.scopes, $ss))) < size(r.scopes) + size($ss) "
            params["ss"] = list(dict.fromkeys(scopes))
        query = (
            # The direction comes from the edge's own source: in an undirected match Kùzu 0.11's START_NODE(r)
            # names the bound end (``a``), whichever way the edge points, while the edge's ``_src`` does not.
            # Only the columns read: returning ``r`` whole builds a dict per edge in Python with every column
            # and its internal ids (13 instead of 4 ms for 65 of a hub's edges, 54 instead of 15 for 2,049 at
            # 100,000 memories: the graph lane's costliest read).
            f"MATCH (a:Entity {{id: $e}})-[r:RELATES]-(b:Entity) {shares}"
            "RETURN r.predicate, r.memory_id, b.id, struct_extract(r, '_src') = ID(a), r.scopes, "
            "r.subject_name, r.object_name ORDER BY r.recorded_at DESC, r.memory_id, b.id LIMIT $n"
        )
        # The undirected match meets an edge from the entity to itself from both ends: two rows, one relation
        # (its memory and predicate tell it; the same statement twice in one memory says nothing more). Kept
        # once, and read on until ``limit`` distinct edges are had: else each self-relation took two of the
        # window's places, and 8 of them pushed a 17-relation entity's oldest out of the graph lane's 20.
        while True:
            rows = _rows(conn, query, params)
            seen: set[Any] = set()
            distinct = [row for row in rows if row[2] != entity or _first(seen, (row[1], row[0]))]
            if len(distinct) >= limit or len(rows) < params["n"]:
                break
            params["n"] += limit - len(distinct)
        rows = distinct[:limit]
        # One object per distinct predicate, end, name and scope list of the read: an entity's relations share a
        # few of each, and kept (``_relations_of``) every row's own copies took 530 bytes a relation, not 250.
        shared: dict[Any, Any] = {}
        one = shared.setdefault
        out = []
        for predicate, mid, bid, outgoing, ss, subject, obj in rows:
            own, other = (subject, obj) if outgoing else (obj, subject)
            scopes = tuple(ss or ())
            out.append(
                Relation(
                    one(predicate, predicate),
                    mid,
                    one(bid, bid),
                    one(other, other),
                    bool(outgoing),
                    one(scopes, scopes),
                    one(own, own),
                )
            )
        return out

    def projection_rows(self, conn: Session, ids: Iterable[str] | None = None) -> dict[str, ProjectionRow]:
        """What the projections need of the given memories (of every memory when ``ids`` is None)."""
        if ids is None:
            rows = _rows(conn, f"MATCH (m:Memory) RETURN {_PROJECTION}")
        else:
            # Many primary-key lookups per statement (``by_keys``): one statement per memory was a tenth of a bulk
            # import's time, the projector reading back each chunk it applies.
            rows = by_keys(conn, _PROJECT_ONE, list(dict.fromkeys(ids)))
        return {
            r[0]: ProjectionRow(
                r[0],
                r[1],
                r[2],
                tuple(sorted(r[3] or ())),
                bool(r[4]),
                utc(r[5]) or _EPOCH,
                vector_value(r[6], r[7]),
            )
            for r in rows
        }

    def all_ids(self, conn: Session) -> dict[str, bool]:
        """Every memory id, mapped to whether it is live (neither retired nor superseded)."""
        rows = _rows(conn, "MATCH (m:Memory) RETURN m.id, m.retired_at IS NULL AND m.superseded_by IS NULL")
        return {r[0]: bool(r[1]) for r in rows}

    def stale_copies(self, conn: Session) -> list[str]:
        """Memories whose MENTIONS edges' copies (``MENTION_COPIES``) disagree with them: one pass over every
        mention (0.4 s at 100,000 memories, 310,000 mentions)."""
        agree = " AND ".join(
            # equal, or both NULL (``=`` with a NULL side is NULL)
            f"coalesce(r.{column} = ({value}), r.{column} IS NULL AND ({value}) IS NULL)"
            for column, _, value in MENTION_COPIES
        )
        rows = _rows(
            conn, f"MATCH (m:Memory)-[r:MENTIONS]->(:Entity) WHERE NOT ({agree}) RETURN DISTINCT m.id"
        )
        return sorted(r[0] for r in rows)

    def memory_count(self, conn: Session) -> int:
        rows = _rows(conn, "MATCH (m:Memory) RETURN count(m)")
        return int(rows[0][0]) if rows else 0

    def vector_of(self, conn: Session, memory_id: str) -> list[float] | None:
        rows = _rows(conn, f"MATCH (m:Memory {{id: $id}}) RETURN {VECTOR}", {"id": memory_id})
        return vector_value(*rows[0]) if rows else None

    def present(self, conn: Session, ids: Sequence[str]) -> set[str]:
        # Primary-key lookups, one statement for the lot (a ``WHERE m.id IN $ids`` scans every memory).
        rows = _rows(conn, "UNWIND $ids AS i MATCH (m:Memory {id: i}) RETURN m.id", {"ids": list(ids)})
        return {r[0] for r in rows}

    def current_texts(
        self, conn: Session, ids: Sequence[str], now: datetime
    ) -> dict[str, tuple[str, str, list[float]]]:
        rows = by_keys(  # primary-key lookups: an UNWIND of ids is a scan of every memory in Kùzu 0.11
            conn,
            "MATCH (m:Memory {id: $id}) WHERE m.retired_at IS NULL AND m.superseded_by IS NULL "
            f"AND (m.valid_to IS NULL OR m.valid_to > $now) RETURN m.id, m.content, m.kind, {VECTOR}",
            list(dict.fromkeys(ids)),
            {"now": now},
        )
        return {r[0]: (r[1], r[2], vector_value(r[3], r[4])) for r in rows}

    def live_state(self, conn: Session, memory_id: str) -> bool | None:
        """None when no memory has this id; else whether it is live (neither retired nor superseded)."""
        rows = _rows(
            conn,
            "MATCH (m:Memory {id: $id}) RETURN m.retired_at IS NULL AND m.superseded_by IS NULL",
            {"id": memory_id},
        )
        return bool(rows[0][0]) if rows else None

    def scopes_of(self, conn: Session, memory_id: str) -> list[str]:
        rows = _rows(conn, "MATCH (s:Scope)-[:CONTAINS]->(m:Memory {id: $id}) RETURN s.id", {"id": memory_id})
        return sorted(r[0] for r in rows)

    def memories_of_scope(self, conn: Session, scope: str) -> tuple[list[str], list[str]]:
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


def _same_as_filter(
    ids: Sequence[str] | None, status: str | None, after: tuple[datetime, str] | None
) -> tuple[str, dict[str, Any]]:
    """The WHERE clause (and its parameters) of a ``same_as`` read."""
    terms: list[str] = []
    params: dict[str, Any] = {}
    if ids is not None:
        terms.append("r.id IN $ids")
        params["ids"] = list(ids)
    if status is not None:
        terms.append("r.status = $st")
        params["st"] = status
    if after is not None:
        terms.append("(r.created_at > $at OR (r.created_at = $at AND r.id > $aid))")
        params["at"], params["aid"] = after
    return (" WHERE " + " AND ".join(terms) if terms else ""), params
