"""The FalkorDB adapter's reads: one round trip per call where the Kùzu adapter makes one per id, since each
query here crosses the network."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor
from datetime import datetime
from typing import Any, TypeVar

from storage.adapters.falkordb._cypher import (
    _EPOCH,
    LIVE,
    RETURN_MEMORY,
    graph_replaced,
    memory,
    session,
    utc,
)
from storage.domain.errors import StorageUnavailable
from storage.domain.models import Memory
from storage.domain.records import Change, KnownEntity, ProjectionRow, Relation, SameAs
from storage.ports.canonical import Session

T = TypeVar("T")
ItemT = TypeVar("ItemT")

_PROJECTION = f"m.id, m.content, m.kind, m.scopes, {LIVE}, m.event_time, m.vector"
_SHARES = "any(x IN m.scopes WHERE x IN $ss)"


class _Reads:
    identity: str  # FalkorStore's, read when it opened the graph

    def max_seq(self, conn: Session) -> int:
        # The counter every write increments in its own query: the head of the log, even after pruning. Read
        # with the graph's identity (each node asks before every recall and after every commit): a graph made
        # anew under the same name while this node runs (restored, flushed, another node recreated it) has
        # another log, and answering from this node's projections would mix the two stores.
        rows = session(conn).rows(
            "OPTIONAL MATCH (q:Counter {name: 'changes'}) OPTIONAL MATCH (s:Meta {key: 'store_id'}) "
            "RETURN q.value, s.value"
        )
        if not rows or rows[0][0] is None or f"falkordb:{rows[0][1]}" != self.identity:
            raise graph_replaced()
        return int(rows[0][0])

    def oldest_change(self, conn: Session) -> int | None:
        rows = session(conn).rows("MATCH (c:Change) RETURN min(c.seq)")
        return int(rows[0][0]) if rows and rows[0][0] is not None else None

    def changes_since(self, conn: Session, seq: int, *, limit: int = 1_000_000) -> list[Change]:
        rows = session(conn).rows(
            "MATCH (c:Change) WHERE c.seq > $s RETURN c.seq, c.op, c.memory_id ORDER BY c.seq LIMIT $n",
            {"s": seq, "n": limit},
        )
        return [Change(int(s), op, mid) for s, op, mid in rows]

    def prune_changes(self, conn: Session, upto: int) -> None:
        session(conn).add("MATCH (c:Change) WHERE c.seq <= $s DELETE c", {"s": upto})

    def fetch(self, conn: Session, ids: Iterable[str], executor: Executor | None = None) -> dict[str, Memory]:
        """Full records for the given ids in one query (``UNWIND`` + the id index)."""
        unique = list(dict.fromkeys(ids))
        if not unique:
            return {}
        rows = session(conn).rows(
            f"UNWIND $ids AS i MATCH (m:Memory {{id: i}}) RETURN {RETURN_MEMORY}, m.scopes, m.entity_names",
            {"ids": unique},
        )
        return {r[0]: memory(r[:-2], r[-2], r[-1]) for r in rows}

    def has_metadata_key(self, conn: Session, key: str) -> bool:
        needle = json.dumps(key, ensure_ascii=False) + ":"
        rows = session(conn).rows(
            "MATCH (m:Memory) WHERE m.metadata CONTAINS $n RETURN m.id LIMIT 1", {"n": needle}
        )
        return bool(rows)

    def ids_with_prefix(self, conn: Session, prefix: str, limit: int = 2) -> list[str]:
        rows = session(conn).rows(
            "MATCH (m:Memory) WHERE m.id STARTS WITH $p RETURN m.id ORDER BY m.id LIMIT $n",
            {"p": prefix, "n": limit},
        )
        return [r[0] for r in rows]

    def chain(self, conn: Session, memory_id: str) -> list[str]:
        # Kùzu's walk reaches the start node back through its neighbour; FalkorDB's path does not: add it.
        rows = session(conn).rows(
            "MATCH (a:Memory {id: $id})-[:SUPERSEDES*1..30]-(b:Memory) WITH a, collect(DISTINCT b) AS bs "
            "UNWIND bs + [a] AS x RETURN DISTINCT x.id, x.recorded_at ORDER BY x.recorded_at, x.id",
            {"id": memory_id},
        )
        return [r[0] for r in rows]

    def scope_parents(self, conn: Session) -> tuple[list[str], dict[str, str]]:
        s = session(conn)
        scopes = [r[0] for r in s.rows("MATCH (s:Scope) RETURN s.id ORDER BY s.id")]
        parents = {c: p for p, c in s.rows("MATCH (p:Scope)-[:PARENT_OF]->(c:Scope) RETURN p.id, c.id")}
        return scopes, parents

    def scope_counts(self, conn: Session) -> dict[str, int]:
        rows = session(conn).rows(
            f"MATCH (s:Scope)-[:CONTAINS]->(m:Memory) WHERE {LIVE} RETURN s.id, count(m)"
        )
        return {sid: int(n) for sid, n in rows}

    def list_scope(
        self, conn: Session, scope: str, *, after: tuple[datetime, str] | None, live_only: bool, limit: int
    ) -> list[str]:
        where = []
        params: dict[str, Any] = {"s": scope, "n": limit}
        if live_only:
            where.append(LIVE)
        if after is not None:
            where.append("(m.recorded_at > $t OR (m.recorded_at = $t AND m.id > $i))")
            params["t"], params["i"] = after
        clause = f"WHERE {' AND '.join(where)} " if where else ""
        rows = session(conn).rows(
            f"MATCH (s:Scope {{id: $s}})-[:CONTAINS]->(m:Memory) {clause}"
            "RETURN m.id ORDER BY m.recorded_at, m.id LIMIT $n",
            params,
        )
        return [r[0] for r in rows]

    def known_entities(self, conn: Session) -> list[KnownEntity]:
        s = session(conn)
        mentions = dict(s.rows("MATCH (:Memory)-[:MENTIONS]->(e:Entity) RETURN e.id, count(*)"))
        relations = dict(s.rows("MATCH (e:Entity)-[r:RELATES]-(:Entity) RETURN e.id, count(r)"))
        inside: dict[str, list[tuple[str, int]]] = {}
        for eid, sid, n in s.rows(
            "MATCH (s:Scope)-[:CONTAINS]->(:Memory)-[:MENTIONS]->(e:Entity) RETURN e.id, s.id, count(*)"
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
            for i, n, a in s.rows("MATCH (e:Entity) RETURN e.id, e.name, e.aliases ORDER BY e.id")
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
        where = " WHERE " + " AND ".join(terms) if terms else ""
        page = ""
        if limit is not None:
            page, params["n"] = " LIMIT $n", limit
        rows = session(conn).rows(
            f"MATCH (a:Entity)-[r:SAME_AS]->(b:Entity){where} RETURN r.id, a.name, b.name, r.tier, r.score, "
            "r.memory_id, r.status, r.created_at, r.decided_at, r.decided_by, r.scopes "
            f"ORDER BY r.created_at, r.id{page}",
            params,
        )
        return [
            SameAs(i, a, b, t, float(sc), m, st, utc(c) or _EPOCH, utc(d), by or "", tuple(ss or ()))
            for i, a, b, t, sc, m, st, c, d, by, ss in rows
        ]

    def pending_same_count(self, conn: Session, scope: str) -> int:
        rows = session(conn).rows(
            "MATCH ()-[r:SAME_AS]->() WHERE r.status = 'pending' AND $s IN r.scopes RETURN count(r)",
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
        where = [_SHARES]
        params: dict[str, Any] = {"e": entity, "ss": list(dict.fromkeys(scopes)), "n": limit}
        if live_only:
            where.append(LIVE)
            if valid_at is not None:
                where.append("m.valid_from <= $now AND (m.valid_to IS NULL OR m.valid_to > $now)")
                params["now"] = valid_at
        rows = session(conn).rows(
            f"MATCH (e:Entity {{id: $e}})<-[:MENTIONS]-(m:Memory) WHERE {' AND '.join(where)} "
            "RETURN m.id ORDER BY m.recorded_at DESC, m.id LIMIT $n",
            params,
        )
        return [r[0] for r in rows]

    def aliases_given(self, conn: Session, entity: str, *, scopes: Sequence[str]) -> set[str]:
        rows = session(conn).rows(
            f"MATCH (e:Entity {{id: $e}})<-[r:MENTIONS]-(m:Memory) WHERE {_SHARES} "
            "AND r.aliases IS NOT NULL AND size(r.aliases) > 0 RETURN r.aliases",
            {"e": entity, "ss": list(dict.fromkeys(scopes))},
        )
        return {a for (aliases,) in rows for a in aliases or ()}

    def names_given(self, conn: Session, entity: str, *, scopes: Sequence[str]) -> set[str]:
        rows = session(conn).rows(
            f"MATCH (e:Entity {{id: $e}})<-[r:MENTIONS]-(m:Memory) WHERE {_SHARES} "
            "AND r.name IS NOT NULL RETURN DISTINCT r.name",
            {"e": entity, "ss": list(dict.fromkeys(scopes))},
        )
        return {name for (name,) in rows}

    def visible_among(
        self, conn: Session, entity: str, ids: Sequence[str], *, scopes: Sequence[str], now: datetime
    ) -> set[str]:
        """One query over the id index (``UNWIND``): its cost follows ``ids``, not the entity's mentions."""
        del entity  # every id recorded a relation of it
        if not ids:
            return set()
        rows = session(conn).rows(
            f"UNWIND $ids AS i MATCH (m:Memory {{id: i}}) WHERE {_SHARES} AND {LIVE} "
            "AND m.valid_from <= $now AND (m.valid_to IS NULL OR m.valid_to > $now) RETURN m.id",
            {"ids": list(dict.fromkeys(ids)), "ss": list(dict.fromkeys(scopes)), "now": now},
        )
        return {r[0] for r in rows}

    def read_each(
        self,
        conn: Session,
        read: Callable[[Session, ItemT], T],
        items: Sequence[ItemT],
        executor: Executor | None = None,
    ) -> list[T]:
        """In turn on the one session: a server round trip each, and no read lock to share with workers."""
        del executor
        return [read(conn, item) for item in items]

    def relations(
        self, conn: Session, entity: str, *, limit: int, scopes: Sequence[str] | None = None
    ) -> list[Relation]:
        """With ``scopes``, only edges whose memory shares one (the edge's own copy of its memory's scope list,
        ``r.scopes``), filtered before the cut, as the Kùzu adapter does."""
        shares = ""
        params: dict[str, Any] = {"e": entity, "n": limit}
        if scopes is not None:
            shares, params["ss"] = "WHERE any(x IN r.scopes WHERE x IN $ss) ", list(dict.fromkeys(scopes))
        rows = session(conn).rows(
            f"MATCH (a:Entity {{id: $e}})-[r:RELATES]-(b:Entity) {shares}"
            "RETURN r.predicate, r.memory_id, b.id, ID(startNode(r)) = ID(a), r.scopes, r.subject_name, "
            "r.object_name ORDER BY r.recorded_at DESC, r.memory_id, b.id LIMIT $n",
            params,
        )
        return [
            Relation(p, mid, bid, on if out else sn, bool(out), tuple(ss or ()), sn if out else on)
            for p, mid, bid, out, ss, sn, on in rows
        ]

    def projection_rows(self, conn: Session, ids: Iterable[str] | None = None) -> dict[str, ProjectionRow]:
        s = session(conn)
        if ids is None:
            rows = s.rows(f"MATCH (m:Memory) RETURN {_PROJECTION}")
        else:
            wanted = list(dict.fromkeys(ids))
            rows = s.rows(
                f"UNWIND $ids AS i MATCH (m:Memory {{id: i}}) RETURN {_PROJECTION}", {"ids": wanted}
            )
        for r in rows:
            if r[1] is None or r[2] is None or r[6] is None:
                # Never a row of Nones to the projections (Tantivy refused it deep in a batch, every retry).
                raise StorageUnavailable(
                    f"memory {r[0]} in the shared graph has lost its content, kind or vector",
                    hint="a server that served Mnemograph before its commits took turns may hold a spoiled query "
                    "plan (docs/scale-out.md, 'Commits take turns'): restart the FalkorDB server, then write "
                    "the memory again or erase it",
                )
        return {
            r[0]: ProjectionRow(
                r[0], r[1], r[2], tuple(sorted(r[3] or ())), bool(r[4]), utc(r[5]) or _EPOCH, list(r[6])
            )
            for r in rows
        }

    def all_ids(self, conn: Session) -> dict[str, bool]:
        rows = session(conn).rows(f"MATCH (m:Memory) RETURN m.id, {LIVE}")
        return {r[0]: bool(r[1]) for r in rows}

    def stale_copies(self, conn: Session) -> list[str]:
        del conn
        return []  # reads every field from the memory itself: no copies

    def memory_count(self, conn: Session) -> int:
        rows = session(conn).rows("MATCH (m:Memory) RETURN count(m)")
        return int(rows[0][0]) if rows else 0

    def vector_of(self, conn: Session, memory_id: str) -> list[float] | None:
        rows = session(conn).rows("MATCH (m:Memory {id: $id}) RETURN m.vector", {"id": memory_id})
        return [float(x) for x in rows[0][0]] if rows else None

    def present(self, conn: Session, ids: Sequence[str]) -> set[str]:
        rows = session(conn).rows("UNWIND $ids AS i MATCH (m:Memory {id: i}) RETURN m.id", {"ids": list(ids)})
        return {r[0] for r in rows}

    def current_texts(
        self, conn: Session, ids: Sequence[str], now: datetime
    ) -> dict[str, tuple[str, str, list[float]]]:
        rows = session(conn).rows(
            f"UNWIND $ids AS i MATCH (m:Memory {{id: i}}) WHERE {LIVE} "
            "AND (m.valid_to IS NULL OR m.valid_to > $now) RETURN m.id, m.content, m.kind, m.vector",
            {"ids": list(dict.fromkeys(ids)), "now": now},
        )
        return {r[0]: (r[1], r[2], [float(x) for x in r[3]]) for r in rows}

    def live_state(self, conn: Session, memory_id: str) -> bool | None:
        rows = session(conn).rows(f"MATCH (m:Memory {{id: $id}}) RETURN {LIVE}", {"id": memory_id})
        return bool(rows[0][0]) if rows else None

    def scopes_of(self, conn: Session, memory_id: str) -> list[str]:
        rows = session(conn).rows(
            "MATCH (s:Scope)-[:CONTAINS]->(m:Memory {id: $id}) RETURN s.id", {"id": memory_id}
        )
        return sorted(r[0] for r in rows)

    def memories_of_scope(self, conn: Session, scope: str) -> tuple[list[str], list[str]]:
        rows = session(conn).rows(
            "MATCH (s:Scope {id: $s})-[:CONTAINS]->(m:Memory) OPTIONAL MATCH (o:Scope)-[:CONTAINS]->(m) "
            "WHERE o.id <> $s RETURN m.id, count(o)",
            {"s": scope},
        )
        return [r[0] for r in rows if int(r[1]) == 0], [r[0] for r in rows if int(r[1]) > 0]
