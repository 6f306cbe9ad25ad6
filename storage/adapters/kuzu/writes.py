"""The Kùzu adapter's writes: every method runs inside ``transaction()``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from storage.adapters._rows import ENRICHMENT_KEYS, planned_ends_by_memory
from storage.adapters.kuzu._cypher import (
    _EPOCH,
    _NEWER_ERASED,
    COPY_TO_MENTION,
    KEYS_PER_STATEMENT,
    RECOPY_MENTIONS,
    _exec,
    _memory_params,
    _rows,
    by_keys,
    utc,
    vector_params,
)
from storage.adapters.kuzu.reads import _Reads
from storage.domain.models import EntityIn
from storage.domain.records import (
    Change,
    NewMemory,
    NewRow,
    OpenRelation,
    RelationState,
    SameAs,
    entity_key,
)
from storage.ports.canonical import Session

# A validity ends at $vt, but never before it began: a date read from content ("since 1 October") may fall before
# the start of what it closes (a memory learned today), which then held for no time at all rather than for a
# negative one (recall's as_of never finds it; history keeps it).
_NOT_BEFORE = "CASE WHEN {start} IS NOT NULL AND {start} > $vt THEN {start} ELSE $vt END"


class _Writes(_Reads):
    def ensure_scopes(self, conn: Session, scopes: Sequence[str], at: datetime) -> None:
        _exec(
            conn,
            "UNWIND $ss AS sid MERGE (s:Scope {id: sid}) ON CREATE SET s.created_at = $at",
            {"ss": list(scopes), "at": at},
        )

    def set_parent(self, conn: Session, scope: str, parent: str | None) -> None:
        _exec(conn, "MATCH (p:Scope)-[r:PARENT_OF]->(c:Scope {id: $c}) DELETE r", {"c": scope})
        if parent is not None:
            _exec(
                conn,
                "MATCH (p:Scope {id: $p}), (c:Scope {id: $c}) CREATE (p)-[:PARENT_OF]->(c)",
                {"p": parent, "c": scope},
            )

    def insert_memory(
        self, conn: Session, m: NewMemory, scopes: Sequence[str], entities: Sequence[EntityIn]
    ) -> None:
        _exec(
            conn,
            "CREATE (:Memory {id: $id, content: $content, kind: $kind, principal: $principal, client: $client, "
            "source: $source, metadata: $metadata, event_time: $event_time, event_time_source: $ets, "
            "valid_from: $valid_from, valid_to: $valid_to, recorded_at: $recorded_at, retire_reason: '', "
            "supersedes: $supersedes, vector16: $vector16, vector_exp: CAST($vector_exp AS INT16), "
            "scopes: CAST($scopes AS STRING[]), entity_names: CAST($entities AS STRING[])})",
            {
                **_memory_params(m),
                "supersedes": m.supersedes,
                **vector_params(m.vector),
                "scopes": list(scopes),
                "entities": sorted({e.name for e in entities}),
            },
        )

    def insert_many(self, conn: Session, rows: Sequence[NewRow], at: datetime) -> None:
        # Three set-based statements for the lot instead of five or more per memory (a statement costs about a
        # millisecond whatever it does: per-row writes held a bulk import to some 50 memories a second).
        self.ensure_scopes(conn, list(dict.fromkeys(s for r in rows for s in r.scopes)), at)
        # Entities as ``mention`` leaves them after each memory in turn: the first mention names and types a
        # new entity, every mention adds its aliases.
        first: dict[str, EntityIn] = {}
        more: dict[str, list[str]] = {}
        mentions: list[list[dict[str, Any]]] = []
        for r in rows:
            given: dict[str, EntityIn] = {}
            for e in r.entities:
                key = entity_key(e.name)
                if key in first:
                    more.setdefault(key, []).extend(e.aliases)
                else:
                    first[key] = e
                one = given.setdefault(key, e)
                if one is not e:
                    given[key] = EntityIn(one.name, one.type, (*one.aliases, *e.aliases))
            mentions.append(
                [
                    {"e": key, "name": e.name, "type": e.type, "aliases": list(e.aliases)}
                    for key, e in given.items()
                ]
            )
        if first:  # before the memories: their mentions are created with them
            _exec(
                conn,
                "UNWIND $es AS x MERGE (e:Entity {id: x.id}) ON CREATE SET e.name = x.name, e.type = x.type, "
                "e.aliases = CAST(x.created AS STRING[]) "
                "ON MATCH SET e.aliases = list_distinct(list_concat(e.aliases, CAST(x.given AS STRING[])))",
                {
                    "es": [
                        {
                            "id": key,
                            "name": e.name,
                            "type": e.type,
                            # list_distinct keeps first occurrences in order, as dict.fromkeys does
                            "created": list(dict.fromkeys([*e.aliases, *more[key]]))
                            if key in more
                            else list(e.aliases),
                            "given": [*e.aliases, *more.get(key, [])],
                        }
                        for key, e in first.items()
                    ]
                },
            )
        # The memories with their scope edges and mentions in one statement, each edge made from the node just
        # created: a later ``UNWIND ... MATCH (m:Memory {id: ...})`` is planned as a scan of every memory, which
        # made the mentions' statement cost 0.4 s a run at 100,000 memories (most of a bulk import's time once
        # duplicates cut the chunks into short runs). Scopes and entities are small tables.
        _exec(
            conn,
            "UNWIND $rows AS x CREATE (m:Memory {id: x.id, content: x.content, kind: x.kind, "
            "principal: x.principal, client: x.client, source: x.source, metadata: x.metadata, "
            "event_time: x.event_time, event_time_source: x.ets, valid_from: x.valid_from, "
            "valid_to: CAST(x.valid_to AS TIMESTAMP), recorded_at: x.recorded_at, retire_reason: '', supersedes: x.supersedes, "
            "vector16: x.vector16, vector_exp: CAST(x.vector_exp AS INT16), scopes: list_sort(list_distinct(CAST(x.scopes AS STRING[]))), "
            "entity_names: CAST(x.entities AS STRING[])}) "
            "WITH m, x UNWIND CAST(x.scopes AS STRING[]) AS sid MATCH (s:Scope {id: sid}) "
            "CREATE (s)-[:CONTAINS {added_at: $at}]->(m) "
            "WITH m, CAST(x.mentions AS STRUCT(e STRING, name STRING, type STRING, aliases STRING[])[]) AS ms, "
            "count(*) AS _n UNWIND ms AS y MATCH (e:Entity {id: y.e}) "
            "CREATE (m)-[r:MENTIONS {name: y.name, type: y.type, aliases: y.aliases}]->(e) "
            f"SET {COPY_TO_MENTION}",
            {
                "rows": [
                    {
                        **_memory_params(r.memory),
                        "supersedes": r.memory.supersedes,
                        **vector_params(r.memory.vector),
                        "scopes": list(r.scopes),
                        "entities": sorted({e.name for e in r.entities}),
                        "mentions": ms,
                    }
                    for r, ms in zip(rows, mentions, strict=True)
                ],
                "at": at,
            },
        )

    def link(self, conn: Session, memory_id: str, scopes: Sequence[str], at: datetime) -> None:
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
        _restamp(conn, memory_id)

    def mention(self, conn: Session, memory_id: str, entities: Sequence[EntityIn]) -> None:
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
                "CREATE (m)-[r:MENTIONS {name: $name, type: $type, aliases: CAST($aliases AS STRING[])}]->(e) "
                f"SET {COPY_TO_MENTION}",
                {"mid": memory_id, "eid": key, "name": e.name, "type": e.type, "aliases": list(e.aliases)},
            )

    def relate(
        self,
        conn: Session,
        memory_id: str,
        subject: str,
        predicate: str,
        obj: str,
        at: datetime,
        valid_from: datetime | None = None,
    ) -> None:
        _exec(
            conn,
            # The memory is written first in the same transaction; the edge carries its scope list.
            "MATCH (a:Entity {id: $a}), (b:Entity {id: $b}), (m:Memory {id: $m}) "
            "CREATE (a)-[:RELATES {predicate: $p, memory_id: $m, recorded_at: $at, valid_from: $vf, "
            "scopes: m.scopes, subject_name: $sname, object_name: $oname}]->(b)",
            {
                "a": entity_key(subject),
                "b": entity_key(obj),
                "sname": subject,
                "oname": obj,
                "p": predicate,
                "m": memory_id,
                "at": at,
                "vf": valid_from,
            },
        )

    def open_relations(
        self,
        conn: Session,
        subject: str,
        predicates: Sequence[str],
        obj: str | None = None,
        *,
        newest: int | None = None,
        other_than: str | None = None,
        scopes: Sequence[str] | None = None,
        at: datetime | None = None,
    ) -> list[OpenRelation]:
        """RELATES edges from ``subject`` with one of ``predicates`` whose validity is open, recorded by a
        current memory (with that memory's scopes), oldest first. ``valid_from`` is None unless a time was
        stated for the relation. ``scopes``: only edges whose memory shares one, filtered before the cut."""
        if scopes is not None and not scopes:
            return []  # no scope to share (and Kùzu cannot type an empty list parameter)
        out: list[OpenRelation] = []
        for predicate in dict.fromkeys(predicates):
            # One query per predicate: a list parameter (``IN $ps``) in a cached prepared statement has been
            # seen to match a previous call's values in Kùzu 0.11. The recording memories are then looked up
            # by primary key (a join on ``m.id = r.memory_id`` would scan every memory).
            params: dict[str, object] = {"a": entity_key(subject), "p": predicate}
            target = "(b:Entity)"
            if obj is not None:  # only this object: a key lookup on both ends
                target, params["b"] = "(b:Entity {id: $b})", entity_key(obj)
            other = ""
            if other_than is not None:
                other, params["x"] = " AND b.id <> $x", entity_key(other_than)
            if scopes is not None:  # "shares a scope with $ss", as relations() asks it
                other += " AND size(list_distinct(list_concat(r.scopes, $ss))) < size(r.scopes) + size($ss)"
                params["ss"] = list(dict.fromkeys(scopes))
            cut = ""
            if newest is not None:
                cut, params["n"] = " DESC LIMIT $n", newest
            still = "r.valid_to IS NULL"
            if at is not None:
                still, params["at"] = "(r.valid_to IS NULL OR r.valid_to > $at)", at
            rows = _rows(
                conn,
                f"MATCH (a:Entity {{id: $a}})-[r:RELATES]->{target} WHERE r.predicate = $p AND {still}{other} "
                f"RETURN b.id, r.object_name, r.memory_id, r.valid_from, r.recorded_at ORDER BY r.recorded_at{cut}",
                params,
            )
            if newest is not None:
                rows.reverse()  # oldest first, as without the cut
            # The recording memories' state, by key, many per statement (``by_keys``): one statement per edge
            # held the writer for seconds when a subject had thousands of open relations (100,000 memories).
            live = {
                mid: tuple(ss or ())
                for mid, ok, ss in by_keys(
                    conn,
                    "MATCH (m:Memory {id: $id}) "
                    "RETURN m.id, m.retired_at IS NULL AND m.superseded_by IS NULL, m.scopes",
                    list(dict.fromkeys(r[2] for r in rows)),
                )
                if ok
            }
            for bid, bn, mid, vf, recorded in rows:  # not ``at``: the argument holds for every predicate
                if mid in live:
                    out.append(
                        OpenRelation(predicate, bid, bn, mid, utc(vf), utc(recorded) or _EPOCH, live[mid])
                    )
        return out

    def close_relation(
        self,
        conn: Session,
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
            "WHERE r.memory_id = $m AND r.predicate = $p AND (r.valid_to IS NULL OR r.valid_to > $vt) "
            "SET r.valid_to = " + _NOT_BEFORE.format(start="r.valid_from") + ", r.ended_by = $by",
            {
                "a": entity_key(subject),
                "b": entity_key(obj),
                "m": memory_id,
                "p": predicate,
                "vt": valid_to,
                "by": ended_by,
            },
        )

    def contradict(self, conn: Session, new: str, old: str, predicate: str, at: datetime) -> None:
        _exec(
            conn,
            "MATCH (n:Memory {id: $new}), (o:Memory {id: $old}) "
            "CREATE (n)-[:CONTRADICTS {predicate: $p, at: $at}]->(o)",
            {"new": new, "old": old, "p": predicate, "at": at},
        )

    def propose_same(self, conn: Session, proposal: SameAs) -> bool:
        a, b = entity_key(proposal.a), entity_key(proposal.b)
        linked = _rows(
            conn,
            "MATCH (x:Entity {id: $a}), (y:Entity {id: $b}) "
            "OPTIONAL MATCH (x)-[r:SAME_AS]-(y) WHERE r.id = $id RETURN x.id, count(r)",
            {"a": a, "b": b, "id": proposal.id},
        )
        if not linked or linked[0][1]:
            return False
        _exec(
            conn,
            "MATCH (x:Entity {id: $a}), (y:Entity {id: $b}) CREATE (x)-[:SAME_AS {id: $id, tier: $tier, "
            "score: $score, memory_id: $m, status: 'pending', created_at: $at, decided_by: '', "
            "scopes: CAST($ss AS STRING[])}]->(y)",
            {
                "a": a,
                "b": b,
                "id": proposal.id,
                "tier": proposal.tier,
                "score": proposal.score,
                "m": proposal.memory_id,
                "at": proposal.created_at,
                "ss": list(proposal.scopes),
            },
        )
        return True

    def proposable(self, conn: Session, proposals: Sequence[SameAs]) -> list[bool]:
        rows = _rows(
            conn,
            "UNWIND $ps AS p MATCH (x:Entity {id: p.a}), (y:Entity {id: p.b}) "
            "OPTIONAL MATCH (x)-[r:SAME_AS]-(y) WHERE r.id = p.id RETURN p.i, count(r)",
            {
                "ps": [
                    {"i": i, "a": entity_key(p.a), "b": entity_key(p.b), "id": p.id}
                    for i, p in enumerate(proposals)
                ]
            },
        )
        free = {i for i, linked in rows if not linked}
        return [i in free for i in range(len(proposals))]

    def propose_many(self, conn: Session, proposals: Sequence[SameAs]) -> None:
        if not proposals:
            return
        _exec(
            conn,
            "UNWIND $ps AS p MATCH (x:Entity {id: p.a}), (y:Entity {id: p.b}) CREATE (x)-[:SAME_AS {id: p.id, "
            "tier: p.tier, score: p.score, memory_id: p.m, status: 'pending', created_at: p.at, decided_by: '', "
            "scopes: CAST(p.ss AS STRING[])}]->(y)",
            {
                "ps": [
                    {
                        "a": entity_key(p.a),
                        "b": entity_key(p.b),
                        "id": p.id,
                        "tier": p.tier,
                        "score": float(p.score),
                        "m": p.memory_id,
                        "at": p.created_at,
                        "ss": list(p.scopes),
                    }
                    for p in proposals
                ]
            },
        )

    def decide_same(self, conn: Session, proposal_id: str, status: str, at: datetime | None, by: str) -> None:
        when = "r.decided_at = $at" if at is not None else "r.decided_at = NULL"
        _exec(
            conn,
            f"MATCH ()-[r:SAME_AS]->() WHERE r.id = $id SET r.status = $st, {when}, r.decided_by = $by",
            {"id": proposal_id, "st": status, "by": by, **({"at": at} if at is not None else {})},
        )

    def contradictions(self, conn: Session, memory_id: str) -> list[str]:
        """Ids of memories linked to this one by CONTRADICTS, in either direction."""
        rows = _rows(
            conn,
            "MATCH (a:Memory {id: $id})-[:CONTRADICTS]-(b:Memory) RETURN DISTINCT b.id ORDER BY b.id",
            {"id": memory_id},
        )
        return [r[0] for r in rows]

    def contradictions_of(self, conn: Session, memory_ids: Sequence[str]) -> dict[str, list[str]]:
        if not memory_ids:
            return {}
        # Primary-key lookups (``by_keys``): every recall asks this of its hits, and ``WHERE a.id IN $ids`` is a
        # scan of every memory in Kùzu 0.11.
        rows = by_keys(
            conn, "MATCH (a:Memory {id: $id})-[:CONTRADICTS]-(b:Memory) RETURN a.id, b.id", list(memory_ids)
        )
        out: dict[str, list[str]] = {}
        for a, b in sorted({(a, b) for a, b in rows}):
            out.setdefault(a, []).append(b)
        return out

    def record_enrichment(self, conn: Session, memory_id: str, row: Mapping[str, Any]) -> None:
        """Keep how the LLM enrichment of a memory went (status, detail, model, token counts)."""
        _exec(
            conn,
            "MERGE (x:Enrichment {id: $id}) SET x.status = $status, x.detail = $detail, x.model = $model, "
            "x.input_tokens = $input_tokens, x.output_tokens = $output_tokens, "
            "x.cache_read_tokens = $cache_read_tokens, x.cache_write_tokens = $cache_write_tokens, x.at = $at",
            {"id": memory_id, **row},
        )

    def enrichment_of(self, conn: Session, memory_id: str) -> dict[str, Any] | None:
        rows = _rows(
            conn,
            "MATCH (x:Enrichment {id: $id}) RETURN x.status, x.detail, x.model, x.input_tokens, x.output_tokens, "
            "x.cache_read_tokens, x.cache_write_tokens",
            {"id": memory_id},
        )
        if not rows:
            return None
        return dict(zip(ENRICHMENT_KEYS, rows[0], strict=True))

    def relation_history(self, conn: Session, memory_ids: Sequence[str]) -> list[RelationState]:
        """Every relation the given memories recorded, with its validity. Reached through the entities each
        memory mentions (a relation's ends always are), so the cost does not grow with the store."""
        out: dict[Any, RelationState] = {}
        for mid in dict.fromkeys(memory_ids):
            rows = _rows(
                conn,
                "MATCH (m:Memory {id: $m})-[:MENTIONS]->(a:Entity)-[r:RELATES]->(b:Entity) WHERE r.memory_id = $m "
                "RETURN ID(r), r.subject_name, r.predicate, r.object_name, r.valid_from, r.valid_to, r.ended_by",
                {"m": mid},
            )
            for rid, a, p, b, vf, vt, by in rows:
                out.setdefault(str(rid), RelationState(a, p, b, mid, utc(vf), utc(vt), by))
        return list(out.values())

    def supersede(
        self,
        conn: Session,
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
            "o.valid_to = CASE WHEN o.valid_to IS NULL OR o.valid_to > $vt THEN "
            + _NOT_BEFORE.format(start="o.valid_from")
            + " ELSE o.valid_to END",
            {"new": new, "old": old, "reason": reason, "at": at, "vt": close_valid_to},
        )
        _exec(conn, RECOPY_MENTIONS, {"id": old})

    def retire(self, conn: Session, memory_id: str, *, at: datetime, valid_to: datetime, reason: str) -> None:
        _exec(
            conn,
            "MATCH (m:Memory {id: $id}) SET m.retired_at = $at, m.retire_reason = $reason, "
            "m.valid_to = CASE WHEN m.valid_to IS NULL OR m.valid_to > $vt THEN "
            + _NOT_BEFORE.format(start="m.valid_from")
            + " ELSE m.valid_to END",
            {"id": memory_id, "at": at, "reason": reason, "vt": valid_to},
        )
        _exec(conn, RECOPY_MENTIONS, {"id": memory_id})

    def reopen_ended_by(self, conn: Session, ended_by: str, *, at: datetime) -> list[str]:
        match = (
            "MATCH (p:Memory {id: $by})-[:MENTIONS]->(:Entity)-[r:RELATES]->(:Entity) "
            "WHERE r.ended_by = $by AND r.valid_to = $at "
        )
        params = {"by": ended_by, "at": at}
        ids = sorted({row[0] for row in _rows(conn, match + "RETURN r.memory_id", params)})
        if not ids:
            return []
        _exec(conn, match + "SET r.valid_to = NULL, r.ended_by = NULL", params)
        for mid in ids:
            _exec(
                conn,
                "MATCH (m:Memory {id: $id}) WHERE m.valid_to = $at AND m.retired_at IS NULL "
                "AND m.superseded_by IS NULL SET m.valid_to = NULL",
                {"id": mid, "at": at},
            )
            _exec(conn, RECOPY_MENTIONS, {"id": mid})
        return ids

    def end_validity(
        self, conn: Session, memory_id: str, *, valid_to: datetime, by: str | None = None
    ) -> None:
        _exec(
            conn,
            "MATCH (m:Memory {id: $id}) SET "
            "m.valid_to = CASE WHEN m.valid_to IS NULL OR m.valid_to > $vt THEN "
            + _NOT_BEFORE.format(start="m.valid_from")
            + " ELSE m.valid_to END",
            {"id": memory_id, "vt": valid_to},
        )
        _exec(conn, RECOPY_MENTIONS, {"id": memory_id})
        if by is not None:
            self.keep_planned_end(conn, memory_id, by, valid_to)

    def keep_planned_end(self, conn: Session, memory_id: str, by: str, valid_to: datetime) -> None:
        _exec(
            conn,
            "MERGE (e:PlannedEnd {id: $key}) ON CREATE SET e.memory_id = $id, e.ended_by = $by, "
            "e.valid_to = $vt ON MATCH SET e.valid_to = CASE WHEN e.valid_to > $vt THEN $vt "
            "ELSE e.valid_to END",
            {"key": f"{memory_id} {by}", "id": memory_id, "by": by, "vt": valid_to},
        )

    def export_planned_ends(self, conn: Session) -> list[tuple[str, str, datetime]]:
        rows = _rows(
            conn,
            "MATCH (e:PlannedEnd) RETURN e.memory_id, e.ended_by, e.valid_to ORDER BY e.memory_id, e.ended_by",
        )
        return [(mid, by, end) for mid, by, vt in rows if (end := utc(vt)) is not None]

    def planned_ends(self, conn: Session, memory_ids: Sequence[str]) -> dict[str, list[tuple[str, datetime]]]:
        rows = _rows(
            conn,
            "MATCH (e:PlannedEnd) WHERE e.memory_id IN $ids RETURN e.memory_id, e.ended_by, e.valid_to "
            "ORDER BY e.memory_id, e.ended_by",
            {"ids": list(memory_ids)},
        )
        return planned_ends_by_memory(rows, utc)

    def append_changes(self, conn: Session, changes: Sequence[Change], at: datetime) -> None:
        _exec(
            conn,
            "UNWIND $cs AS c CREATE (:Change {seq: c.seq, op: c.op, memory_id: c.mid, at: $at})",
            {"cs": [{"seq": c.seq, "op": c.op, "mid": c.memory_id} for c in changes], "at": at},
        )

    def unlink(self, conn: Session, memory_id: str, scope: str) -> None:
        """Remove ``memory_id`` from ``scope``: the CONTAINS edge and the entry in its scope list."""
        _exec(
            conn,
            "MATCH (s:Scope {id: $s})-[r:CONTAINS]->(m:Memory {id: $id}) DELETE r",
            {"s": scope, "id": memory_id},
        )
        self.unlink_all(conn, scope, [memory_id])

    def recopy(self, conn: Session) -> None:
        """Every mention's copies again (``MENTION_COPIES``): one pass over every mention and its memory (about a
        minute at 100,000 memories under load)."""
        _exec(conn, f"MATCH (m:Memory)-[r:MENTIONS]->(:Entity) SET {COPY_TO_MENTION}")

    def unlink_all(self, conn: Session, scope: str, shared: Sequence[str]) -> None:
        """Remove ``scope`` from the scope lists of memories that stay in other scopes."""
        for mid in shared:
            rows = _rows(conn, "MATCH (m:Memory {id: $id}) RETURN m.scopes", {"id": mid})
            remaining = [x for x in (rows[0][0] or []) if x != scope]
            _exec(conn, "MATCH (m:Memory {id: $id}) SET m.scopes = $ss", {"id": mid, "ss": remaining})
            _restamp(conn, mid)

    def delete_scope(self, conn: Session, scope: str, only: Sequence[str]) -> int:
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

    def delete_memories(self, conn: Session, ids: Sequence[str]) -> int:
        """Delete memories with their edges, the relations they recorded, version pointers to them, and the
        entities no remaining memory mentions; an entity that stays keeps only the name, type and aliases its
        remaining mentions gave it. Returns how many entities were deleted.

        The entities looked at are those the deletion concerns (mentioned by a deleted memory, or an end of a
        relation or proposal one recorded): deleted when nothing mentions or relates them any more. The cost
        follows what is deleted, not the store: up to ``KEYS_PER_STATEMENT`` memories are reached by primary key
        (``WHERE m.id IN $ids`` and ``UNWIND`` scan the whole table in Kùzu 0.11), then along their edges;
        more (a purge) take one set-based statement per step. The relations and proposals they recorded or
        ended are found in one pass over those edge tables: nothing indexes them, and their ends need not be
        entities the memory mentions (an imported relation, a closing statement's subject)."""
        ids = list(dict.fromkeys(ids))
        if not ids:
            return 0
        touched = _keyed(
            conn,
            ids,
            "MATCH (:Memory {id: $id})-[:MENTIONS]->(e:Entity) RETURN DISTINCT e.id",
            "MATCH (m:Memory)-[:MENTIONS]->(e:Entity) WHERE m.id IN $ids RETURN DISTINCT e.id",
        )
        ends = _rows(
            conn,
            "MATCH (a:Entity)-[r:RELATES]->(b:Entity) WHERE r.memory_id IN $ids DELETE r RETURN a.id, b.id",
            {"ids": ids},
        )
        # A SAME_AS proposal raised by an erased memory's mention goes with it.
        ends += _rows(
            conn,
            "MATCH (a:Entity)-[r:SAME_AS]->(b:Entity) WHERE r.memory_id IN $ids DELETE r RETURN a.id, b.id",
            {"ids": ids},
        )
        # A relation closed by an erased memory is open again: what ended it is no longer known.
        _exec(
            conn,
            "MATCH ()-[r:RELATES]->() WHERE r.ended_by IN $ids SET r.valid_to = NULL, r.ended_by = NULL",
            {"ids": ids},
        )
        _exec(
            conn,
            "MATCH (e:PlannedEnd) WHERE e.memory_id IN $ids OR e.ended_by IN $ids DELETE e",
            {"ids": ids},
        )
        if len(ids) <= KEYS_PER_STATEMENT:
            for mid in ids:
                _exec(conn, "MATCH (x:Enrichment {id: $id}) DELETE x", {"id": mid})
                # ``supersedes`` is set only on a version written with its SUPERSEDES edge (``supersede``;
                # an import refuses a pointer without its edge): the edge leads to every one to clear.
                _exec(
                    conn,
                    "MATCH (n:Memory)-[:SUPERSEDES]->(:Memory {id: $id}) WHERE n.supersedes = $id "
                    "SET n.supersedes = NULL",
                    {"id": mid},
                )
            for mid in ids:
                # A version that stays while its newer version goes must not point at it; it stays out of
                # current recall (its validity was closed when it was superseded), now as retired at that same
                # moment. (``superseded_by`` is likewise set only with the edge, so this reaches every one.)
                # Not live before, not live after, validity unchanged: its mentions' copies still agree.
                _exec(
                    conn,
                    _RETIRE_OLDER,
                    {"id": mid, "ids": ids, "why": _NEWER_ERASED},
                )
            for mid in ids:
                _exec(conn, "MATCH (m:Memory {id: $id}) DETACH DELETE m", {"id": mid})
        else:
            _exec(conn, "MATCH (x:Enrichment) WHERE x.id IN $ids DELETE x", {"ids": ids})
            _exec(conn, "MATCH (m:Memory) WHERE m.supersedes IN $ids SET m.supersedes = NULL", {"ids": ids})
            _exec(
                conn,
                # (Written out: a ``WITH n MATCH (n)-...`` form of it crashes Kùzu 0.11's planner.)
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
        concerned = list(dict.fromkeys([*(r[0] for r in touched), *(e for pair in ends for e in pair)]))
        mentioned = {r[0] for r in touched}
        if len(concerned) > KEYS_PER_STATEMENT:
            orphans = [
                r[0]
                for r in _rows(
                    conn,
                    "MATCH (e:Entity) WHERE e.id IN $ids AND NOT EXISTS { MATCH (:Memory)-[:MENTIONS]->(e) } "
                    "AND NOT EXISTS { MATCH (e)-[:RELATES]-(:Entity) } RETURN e.id",
                    {"ids": concerned},
                )
            ]
            _exec(conn, "MATCH (e:Entity) WHERE e.id IN $ids DETACH DELETE e", {"ids": orphans})
            for eid in mentioned.difference(orphans):
                self._regive(conn, eid, self._given(conn, eid))
            return len(orphans)
        orphans = []
        for eid in concerned:
            given = self._given(conn, eid)
            # Counted from the entity's key: an EXISTS subquery is planned as a scan of the edge table.
            related = given is None and _rows(conn, _RELATED, {"id": eid})[0][0]
            if given is None and not related:
                _exec(conn, "MATCH (e:Entity {id: $id}) DETACH DELETE e", {"id": eid})
                orphans.append(eid)
            elif eid in mentioned:
                self._regive(conn, eid, given)
        return len(orphans)

    @staticmethod
    def _given(conn: Session, entity: str) -> list[Any] | None:
        """What the remaining mentions of an entity give it, without order (``_regive``), with what it holds:
        [name, type, aliases, distinct names, types, alias lists]; None when nothing mentions it."""
        rows = _rows(
            conn,
            "MATCH (e:Entity {id: $e})<-[r:MENTIONS]-() RETURN e.name, e.type, e.aliases, "
            "collect(DISTINCT r.name), collect(DISTINCT r.type), collect(DISTINCT r.aliases)",
            {"e": entity},
        )
        return rows[0] if rows else None

    def _regive(self, conn: Session, entity: str, given: list[Any] | None) -> None:
        """Set an entity's name, type and aliases from the mentions that remain (``given``, from ``_given``):
        the earliest mention's name and type, every mention's aliases."""
        if given is not None:
            # Most often every mention gives the same name, type and aliases (or none): then their order does
            # not matter, and the mentions need not be sorted by their memories' times (a join that reads every
            # memory of an entity mentioned thousands of times). Unchanged, nothing is written.
            held, (names, types, lists) = given[:3], ([x for x in col if x] for col in given[3:])
            if len(names) == 1 and len(types) <= 1 and len(lists) <= 1:
                want = [
                    names[0],
                    types[0] if types else "thing",
                    list(dict.fromkeys(lists[0] if lists else [])),
                ]
                if [held[0], held[1], list(held[2] or [])] != want:
                    _exec(
                        conn,
                        "MATCH (e:Entity {id: $e}) SET e.name = $name, e.type = $type, "
                        "e.aliases = CAST($aliases AS STRING[])",
                        {"e": entity, "name": want[0], "type": want[1], "aliases": want[2]},
                    )
                return
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


_RELATED = "MATCH (:Entity {id: $id})-[:RELATES]-() RETURN count(*)"
# The older versions of a deleted memory ``n`` that stay (not deleted with it): no longer superseded, retired.
_RETIRE_OLDER = (
    "MATCH (n:Memory {id: $id})-[r:SUPERSEDES]->(o:Memory) WHERE NOT o.id IN $ids "
    "SET o.retire_reason = CASE WHEN o.retired_at IS NULL THEN $why ELSE o.retire_reason END, "
    "o.retired_at = coalesce(o.retired_at, r.at), o.superseded_by = NULL"
)


def _keyed(conn: Session, ids: Sequence[str], one: str, many: str) -> list[list[Any]]:
    """The rows of ``one`` (a lookup of ``$id`` by primary key) for every id, or of ``many`` (the same over
    ``$ids``, a scan) once there are more than ``KEYS_PER_STATEMENT``: past that, one scan costs less."""
    if len(ids) <= KEYS_PER_STATEMENT:
        return by_keys(conn, one, list(ids))
    return _rows(conn, many, {"ids": list(ids)})


def _restamp(conn: Session, memory_id: str) -> None:
    """Copy the memory's scope list onto its MENTIONS edges (``MENTION_COPIES``) and the RELATES edges it recorded
    (``relations`` filters on it). Reached through the entities it mentions (a relation's ends always are), so the
    cost does not grow with the store."""
    _exec(conn, RECOPY_MENTIONS, {"id": memory_id})
    _exec(
        conn,
        "MATCH (m:Memory {id: $id})-[:MENTIONS]->(:Entity)-[r:RELATES]->(:Entity) WHERE r.memory_id = $id "
        "SET r.scopes = m.scopes",
        {"id": memory_id},
    )
