"""The FalkorDB adapter's writes. Each method buffers Cypher in the transaction's session (``_cypher``): the
transaction commits as one query, so everything here must hold whatever earlier statements of the same
transaction wrote. Where a Kùzu write reads first and writes what it computed, this one computes in the query
(scope lists, aliases) or reads the committed state and leaves out what this transaction itself removes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from storage.adapters._rows import ENRICHMENT_KEYS, planned_ends_by_memory
from storage.adapters.falkordb._cypher import _EPOCH, _NEWER_ERASED, LIVE, memory_params, session, union, utc
from storage.adapters.falkordb.reads import _Reads
from storage.domain.models import EntityIn
from storage.domain.records import Change, NewMemory, NewRow, OpenRelation, RelationState, SameAs, entity_key
from storage.ports.canonical import Session

# A validity ends at $vt, but never before it began: a date read from content ("since 1 October") may fall before
# the start of what it closes (a memory learned today), which then held for no time at all rather than for a
# negative one (recall's as_of never finds it; history keeps it).
_NOT_BEFORE = "CASE WHEN {start} IS NOT NULL AND {start} > $vt THEN {start} ELSE $vt END"


# Copies each memory's scope list onto the RELATES edges it recorded (``relations`` filters on it), reached
# through the entities it mentions (a relation's ends always are).
_RESTAMP = (
    "UNWIND $ids AS i MATCH (m:Memory {id: i})-[:MENTIONS]->(:Entity)-[r:RELATES]->(:Entity) "
    "WHERE r.memory_id = i SET r.scopes = m.scopes"
)


class _Writes(_Reads):
    def ensure_scopes(self, conn: Session, scopes: Sequence[str], at: datetime) -> None:
        session(conn).add(
            "UNWIND $ss AS sid MERGE (s:Scope {id: sid}) ON CREATE SET s.created_at = $at",
            {"ss": list(dict.fromkeys(scopes)), "at": at},
        )

    def set_parent(self, conn: Session, scope: str, parent: str | None) -> None:
        s = session(conn)
        s.add("MATCH (:Scope)-[r:PARENT_OF]->(:Scope {id: $c}) DELETE r", {"c": scope})
        if parent is not None:
            s.add(
                "MATCH (p:Scope {id: $p}), (c:Scope {id: $c}) CREATE (p)-[:PARENT_OF]->(c)",
                {"p": parent, "c": scope},
            )

    def insert_many(self, conn: Session, rows: Sequence[NewRow], at: datetime) -> None:
        # A shared store's transaction does not read its own buffered writes, so the engine writes one memory per
        # transaction there (the reconciler's rule); this is the same rows, one memory at a time.
        for r in rows:
            self.ensure_scopes(conn, r.scopes, at)
            self.insert_memory(conn, r.memory, r.scopes, r.entities)
            self.link(conn, r.memory.id, r.scopes, at)
            if r.entities:
                self.mention(conn, r.memory.id, r.entities)

    def insert_memory(
        self, conn: Session, m: NewMemory, scopes: Sequence[str], entities: Sequence[EntityIn]
    ) -> None:
        session(conn).add(
            "CREATE (:Memory {id: $id, content: $content, kind: $kind, principal: $principal, client: $client, "
            "source: $source, metadata: $metadata, event_time: $event_time, event_time_source: $event_time_source, "
            "valid_from: $valid_from, valid_to: $valid_to, recorded_at: $recorded_at, retire_reason: '', "
            "supersedes: $supersedes, vector: vecf32($vector), scopes: $scopes, entity_names: $entities})",
            {
                **memory_params(m),
                "supersedes": m.supersedes,
                "vector": [float(x) for x in m.vector],
                "scopes": list(dict.fromkeys(scopes)),
                "entities": sorted({e.name for e in entities}),
            },
        )

    def link(self, conn: Session, memory_id: str, scopes: Sequence[str], at: datetime) -> None:
        s = session(conn)
        ss = list(dict.fromkeys(scopes))
        s.add(
            f"MATCH (m:Memory {{id: $id}}) SET m.scopes = {union('m.scopes', '$ss')}",
            {"id": memory_id, "ss": ss},
        )
        s.add(
            "MATCH (m:Memory {id: $id}) UNWIND $ss AS sid MATCH (s:Scope {id: sid}) "
            "CREATE (s)-[:CONTAINS {added_at: $at}]->(m)",
            {"id": memory_id, "ss": ss, "at": at},
        )
        s.add(_RESTAMP, {"ids": [memory_id]})

    def mention(self, conn: Session, memory_id: str, entities: Sequence[EntityIn]) -> None:
        given: dict[str, EntityIn] = {}
        for e in entities:
            first = given.setdefault(entity_key(e.name), e)
            if first is not e:
                given[entity_key(e.name)] = EntityIn(first.name, first.type, (*first.aliases, *e.aliases))
        es = [
            {"id": k, "name": e.name, "type": e.type, "aliases": list(dict.fromkeys(e.aliases))}
            for k, e in given.items()
        ]
        session(conn).add(
            "MATCH (m:Memory {id: $mid}) UNWIND $es AS x "
            "MERGE (e:Entity {id: x.id}) ON CREATE SET e.name = x.name, e.type = x.type, e.aliases = x.aliases "
            f"ON MATCH SET e.aliases = {union('e.aliases', 'x.aliases')} "
            "CREATE (m)-[:MENTIONS {name: x.name, type: x.type, aliases: x.aliases}]->(e)",
            {"mid": memory_id, "es": es},
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
        session(conn).add(
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
        params: dict[str, Any] = {"a": entity_key(subject), "ps": list(dict.fromkeys(predicates))}
        target = "(b:Entity)"
        if obj is not None:
            target, params["b"] = "(b:Entity {id: $b})", entity_key(obj)
        other = ""
        if other_than is not None:
            other, params["x"] = " AND b.id <> $x", entity_key(other_than)
        if scopes is not None:  # the edge's own copy of its memory's scopes, as relations() filters
            other += " AND any(sc IN r.scopes WHERE sc IN $ss)"
            params["ss"] = list(dict.fromkeys(scopes))
        cut = ""
        if newest is not None:  # per predicate, before the memories are looked up
            cut = (
                "WITH r.predicate AS p, collect([r, b]) AS rb UNWIND rb[..$n] AS x WITH x[0] AS r, x[1] AS b "
            )
            params["n"] = newest
        still = "r.valid_to IS NULL"
        if at is not None:
            still, params["at"] = "(r.valid_to IS NULL OR r.valid_to > $at)", at
        rows = session(conn).rows(
            f"MATCH (a:Entity {{id: $a}})-[r:RELATES]->{target} WHERE r.predicate IN $ps AND {still}{other} "
            f"{'WITH r, b ORDER BY r.recorded_at DESC ' if cut else ''}{cut}"
            f"MATCH (m:Memory {{id: r.memory_id}}) WHERE {LIVE} "
            "RETURN r.predicate, b.id, r.object_name, r.memory_id, r.valid_from, r.recorded_at, m.scopes "
            "ORDER BY r.recorded_at",
            params,
        )
        by_predicate = {p: n for n, p in enumerate(params["ps"])}
        out = [
            OpenRelation(p, bid, bn, mid, utc(vf), utc(at) or _EPOCH, tuple(ss or ()))
            for p, bid, bn, mid, vf, at, ss in rows
        ]
        return sorted(out, key=lambda r: by_predicate[r.predicate])  # stable: by predicate, then time

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
        session(conn).add(
            "MATCH (a:Entity {id: $a})-[r:RELATES]->(b:Entity {id: $b}) WHERE r.memory_id = $m "
            "AND r.predicate = $p AND (r.valid_to IS NULL OR r.valid_to > $vt) SET r.valid_to = "
            + _NOT_BEFORE.format(start="r.valid_from")
            + ", r.ended_by = $by",
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
        session(conn).add(
            "MATCH (n:Memory {id: $new}), (o:Memory {id: $old}) CREATE (n)-[:CONTRADICTS {predicate: $p, at: $at}]->(o)",
            {"new": new, "old": old, "p": predicate, "at": at},
        )

    def propose_same(self, conn: Session, proposal: SameAs) -> bool:
        """Decided in the query (a read here would not see the entity this transaction is creating); so True
        means asked for, and the proposal exists after the commit unless the two were already linked."""
        session(conn).add(
            "MATCH (x:Entity {id: $a}), (y:Entity {id: $b}) OPTIONAL MATCH (x)-[r:SAME_AS {id: $id}]-(y) "
            "WITH x, y, count(r) AS linked WHERE linked = 0 "
            "CREATE (x)-[:SAME_AS {id: $id, tier: $tier, score: $score, memory_id: $m, status: 'pending', "
            "created_at: $at, decided_by: '', scopes: $ss}]->(y)",
            {
                "a": entity_key(proposal.a),
                "b": entity_key(proposal.b),
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
        return [True] * len(proposals)  # decided in the query that records it (propose_same)

    def propose_many(self, conn: Session, proposals: Sequence[SameAs]) -> None:
        for p in proposals:
            self.propose_same(conn, p)

    def decide_same(self, conn: Session, proposal_id: str, status: str, at: datetime | None, by: str) -> None:
        session(conn).add(
            "MATCH ()-[r:SAME_AS {id: $id}]->() SET r.status = $st, r.decided_at = $at, r.decided_by = $by",
            {"id": proposal_id, "st": status, "at": at, "by": by},
        )

    def contradictions(self, conn: Session, memory_id: str) -> list[str]:
        rows = session(conn).rows(
            "MATCH (a:Memory {id: $id})-[:CONTRADICTS]-(b:Memory) RETURN DISTINCT b.id ORDER BY b.id",
            {"id": memory_id},
        )
        return [r[0] for r in rows]

    def contradictions_of(self, conn: Session, memory_ids: Sequence[str]) -> dict[str, list[str]]:
        if not memory_ids:
            return {}
        rows = session(conn).rows(
            "MATCH (a:Memory)-[:CONTRADICTS]-(b:Memory) WHERE a.id IN $ids "
            "RETURN DISTINCT a.id, b.id ORDER BY a.id, b.id",
            {"ids": list(memory_ids)},
        )
        out: dict[str, list[str]] = {}
        for a, b in rows:
            out.setdefault(a, []).append(b)
        return out

    def record_enrichment(self, conn: Session, memory_id: str, row: Mapping[str, Any]) -> None:
        values = {k: row.get(k) for k in ENRICHMENT_KEYS}
        session(conn).add(
            "MERGE (x:Enrichment {id: $id}) SET x.status = $status, x.detail = $detail, x.model = $model, "
            "x.input_tokens = $input_tokens, x.output_tokens = $output_tokens, "
            "x.cache_read_tokens = $cache_read_tokens, x.cache_write_tokens = $cache_write_tokens, x.at = $at",
            {"id": memory_id, "at": row.get("at"), **values},
        )

    def enrichment_of(self, conn: Session, memory_id: str) -> dict[str, Any] | None:
        fields = ", ".join(f"x.{k}" for k in ENRICHMENT_KEYS)
        rows = session(conn).rows(f"MATCH (x:Enrichment {{id: $id}}) RETURN {fields}", {"id": memory_id})
        return dict(zip(ENRICHMENT_KEYS, rows[0], strict=True)) if rows else None

    def relation_history(self, conn: Session, memory_ids: Sequence[str]) -> list[RelationState]:
        rows = session(conn).rows(
            "UNWIND $ids AS i MATCH (m:Memory {id: i})-[:MENTIONS]->(a:Entity)-[r:RELATES]->(b:Entity) "
            "WHERE r.memory_id = i "
            "RETURN DISTINCT ID(r), i, r.subject_name, r.predicate, r.object_name, r.valid_from, r.valid_to, "
            "r.ended_by",
            {"ids": list(dict.fromkeys(memory_ids))},
        )
        out: dict[int, RelationState] = {}
        for rid, mid, a, p, b, vf, vt, by in rows:
            out.setdefault(int(rid), RelationState(a, p, b, mid, utc(vf), utc(vt), by))
        return list(out.values())

    def supersede(
        self, conn: Session, old: str, new: str, *, reason: str, at: datetime, close_valid_to: datetime
    ) -> None:
        session(conn).add(
            "MATCH (n:Memory {id: $new}), (o:Memory {id: $old}) "
            "CREATE (n)-[:SUPERSEDES {reason: $reason, at: $at}]->(o) "
            "SET o.superseded_by = $new, "
            "o.valid_to = CASE WHEN o.valid_to IS NULL OR o.valid_to > $vt THEN "
            + _NOT_BEFORE.format(start="o.valid_from")
            + " ELSE o.valid_to END",
            {"new": new, "old": old, "reason": reason, "at": at, "vt": close_valid_to},
        )

    def retire(self, conn: Session, memory_id: str, *, at: datetime, valid_to: datetime, reason: str) -> None:
        session(conn).add(
            "MATCH (m:Memory {id: $id}) SET m.retired_at = $at, m.retire_reason = $reason, "
            "m.valid_to = CASE WHEN m.valid_to IS NULL OR m.valid_to > $vt THEN "
            + _NOT_BEFORE.format(start="m.valid_from")
            + " ELSE m.valid_to END",
            {"id": memory_id, "at": at, "reason": reason, "vt": valid_to},
        )

    def reopen_ended_by(self, conn: Session, ended_by: str, *, at: datetime) -> list[str]:
        match = (
            "MATCH (p:Memory {id: $by})-[:MENTIONS]->(:Entity)-[r:RELATES]->(:Entity) "
            "WHERE r.ended_by = $by AND r.valid_to = $at "
        )
        params = {"by": ended_by, "at": at}
        ids = sorted({row[0] for row in session(conn).rows(match + "RETURN r.memory_id", params)})
        if not ids:
            return []
        session(conn).add(match + "SET r.valid_to = NULL, r.ended_by = NULL", params)
        session(conn).add(
            "UNWIND $ids AS i MATCH (m:Memory {id: i}) WHERE m.valid_to = $at AND m.retired_at IS NULL "
            "AND m.superseded_by IS NULL SET m.valid_to = NULL",
            {"ids": ids, "at": at},
        )
        return ids

    def end_validity(
        self, conn: Session, memory_id: str, *, valid_to: datetime, by: str | None = None
    ) -> None:
        session(conn).add(
            "MATCH (m:Memory {id: $id}) SET "
            "m.valid_to = CASE WHEN m.valid_to IS NULL OR m.valid_to > $vt THEN "
            + _NOT_BEFORE.format(start="m.valid_from")
            + " ELSE m.valid_to END",
            {"id": memory_id, "vt": valid_to},
        )
        if by is not None:
            self.keep_planned_end(conn, memory_id, by, valid_to)

    def keep_planned_end(self, conn: Session, memory_id: str, by: str, valid_to: datetime) -> None:
        session(conn).add(
            "MERGE (e:PlannedEnd {id: $key}) ON CREATE SET e.memory_id = $id, e.ended_by = $by, "
            "e.valid_to = $vt ON MATCH SET e.valid_to = CASE WHEN e.valid_to > $vt THEN $vt "
            "ELSE e.valid_to END",
            {"key": f"{memory_id} {by}", "id": memory_id, "by": by, "vt": valid_to},
        )

    def export_planned_ends(self, conn: Session) -> list[tuple[str, str, datetime]]:
        rows = session(conn).rows(
            "MATCH (e:PlannedEnd) RETURN e.memory_id, e.ended_by, e.valid_to ORDER BY e.memory_id, e.ended_by"
        )
        return [(mid, by, end) for mid, by, vt in rows if (end := utc(vt)) is not None]

    def planned_ends(self, conn: Session, memory_ids: Sequence[str]) -> dict[str, list[tuple[str, datetime]]]:
        rows = session(conn).rows(
            "UNWIND $ids AS i MATCH (e:PlannedEnd) WHERE e.memory_id = i RETURN e.memory_id, e.ended_by, "
            "e.valid_to ORDER BY e.memory_id, e.ended_by",
            {"ids": list(memory_ids)},
        )
        return planned_ends_by_memory(rows, utc)

    def append_changes(self, conn: Session, changes: Sequence[Change], at: datetime) -> None:
        """Number the changes from the shared counter, in the same query as the writes they log. The caller's
        ``seq`` values are ignored: other nodes take numbers from the same counter (the reconciler reads the
        head after the commit). The counter is created with the schema, never MERGEd here: concurrent MERGEs
        of one node can each create it (docs/benchmarks/falkordb.md)."""
        if not changes:
            return
        s = session(conn)
        s.add(
            "MATCH (q:Counter {name: 'changes'}) SET q.value = q.value + size($ops) "
            "WITH q.value - size($ops) AS base UNWIND range(0, size($ops) - 1) AS k "
            "CREATE (:Change {seq: base + k + 1, op: $ops[k], memory_id: $mids[k], at: $at, commit: $commit})",
            {
                "ops": [c.op for c in changes],
                "mids": [c.memory_id for c in changes],
                "at": at,
                "commit": s.token,
            },
        )
        s.logged = True

    def unlink(self, conn: Session, memory_id: str, scope: str) -> None:
        session(conn).add(
            "MATCH (:Scope {id: $s})-[r:CONTAINS]->(:Memory {id: $id}) DELETE r",
            {"s": scope, "id": memory_id},
        )
        self.unlink_all(conn, scope, [memory_id])

    def recopy(self, conn: Session) -> None:
        del conn  # reads every field from the memory itself: no copies

    def unlink_all(self, conn: Session, scope: str, shared: Sequence[str]) -> None:
        if shared:
            session(conn).add(
                "UNWIND $ids AS i MATCH (m:Memory {id: i}) SET m.scopes = [x IN m.scopes WHERE x <> $s]",
                {"ids": list(shared), "s": scope},
            )
            session(conn).add(_RESTAMP, {"ids": list(shared)})

    def delete_scope(self, conn: Session, scope: str, only: Sequence[str]) -> int:
        entities = self.delete_memories(conn, only)
        s = session(conn)
        s.add(
            "MATCH (p:Scope)-[:PARENT_OF]->(:Scope {id: $s})-[:PARENT_OF]->(c:Scope) CREATE (p)-[:PARENT_OF]->(c)",
            {"s": scope},
        )
        s.add("MATCH (s:Scope {id: $s}) DETACH DELETE s", {"s": scope})
        return entities

    def delete_memories(self, conn: Session, ids: Sequence[str]) -> int:
        """As the Kùzu adapter's, with what the deletion leaves decided from the committed state before it: an
        entity it concerns (mentioned by an erased memory, or an end of a relation or proposal one recorded)
        goes when nothing else mentions or relates it; one that stays gets the name, type and aliases its
        remaining mentions gave it. Every step starts from an index (``FalkorStore._schema``: memory ids, the
        version pointers, and the memory that recorded or ended a relation or raised a proposal), so the cost
        follows what is deleted, not the store."""
        ids = list(dict.fromkeys(ids))
        if not ids:
            return 0
        s = session(conn)
        # Unlabelled ends: a label on them makes the planner scan every entity before it uses the edge index.
        ends = s.rows(
            "MATCH (a)-[r:RELATES]->(b) WHERE r.memory_id IN $ids RETURN a.id, b.id "
            "UNION ALL MATCH (a)-[r:SAME_AS]->(b) WHERE r.memory_id IN $ids RETURN a.id, b.id",
            {"ids": ids},
        )
        touched = [
            r[0]
            for r in s.rows(
                "UNWIND $ids AS i MATCH (:Memory {id: i})-[:MENTIONS]->(e:Entity) RETURN DISTINCT e.id",
                {"ids": ids},
            )
        ]
        concerned = list(dict.fromkeys([*touched, *(e for pair in ends for e in pair)]))
        states = s.rows(
            "UNWIND $es AS k MATCH (e:Entity {id: k}) "
            "OPTIONAL MATCH (o:Memory)-[:MENTIONS]->(e) WHERE NOT o.id IN $ids WITH e, count(o) AS others "
            "OPTIONAL MATCH (e)-[r:RELATES]-(:Entity) WHERE NOT r.memory_id IN $ids "
            "RETURN e.id, e.name, others, count(r)",
            {"es": concerned, "ids": ids},
        )
        orphans = [eid for eid, _, others, rels in states if int(others) == 0 and int(rels) == 0]
        mentioned = set(touched)
        regiven = [
            self._regiven(s.rows, eid, name, ids)
            for eid, name, others, rels in states
            if eid in mentioned and (int(others) or int(rels))
        ]
        s.add("MATCH ()-[r:RELATES]->() WHERE r.memory_id IN $ids DELETE r", {"ids": ids})
        s.add("UNWIND $ids AS i MATCH (x:Enrichment {id: i}) DELETE x", {"ids": ids})
        # A SAME_AS proposal raised by an erased memory's mention goes with it.
        s.add("MATCH ()-[r:SAME_AS]->() WHERE r.memory_id IN $ids DELETE r", {"ids": ids})
        # A relation closed by an erased memory is open again: what ended it is no longer known.
        s.add(
            "MATCH ()-[r:RELATES]->() WHERE r.ended_by IN $ids SET r.valid_to = NULL, r.ended_by = NULL",
            {"ids": ids},
        )
        s.add("MATCH (e:PlannedEnd) WHERE e.memory_id IN $ids OR e.ended_by IN $ids DELETE e", {"ids": ids})
        s.add("MATCH (m:Memory) WHERE m.supersedes IN $ids SET m.supersedes = NULL", {"ids": ids})
        s.add(
            "UNWIND $ids AS i MATCH (n:Memory {id: i})-[r:SUPERSEDES]->(o:Memory) WHERE NOT o.id IN $ids "
            "SET o.retire_reason = CASE WHEN o.retired_at IS NULL THEN $why ELSE o.retire_reason END, "
            "o.retired_at = coalesce(o.retired_at, r.at), o.superseded_by = NULL",
            {"ids": ids, "why": _NEWER_ERASED},
        )
        s.add(
            "MATCH (m:Memory) WHERE m.superseded_by IN $ids "
            "SET m.retire_reason = CASE WHEN m.retired_at IS NULL THEN $why ELSE m.retire_reason END, "
            "m.retired_at = coalesce(m.retired_at, m.valid_to, m.recorded_at), m.superseded_by = NULL",
            {"ids": ids, "why": _NEWER_ERASED},
        )
        s.add("UNWIND $ids AS i MATCH (m:Memory {id: i}) DETACH DELETE m", {"ids": ids})
        s.add("UNWIND $es AS i MATCH (e:Entity {id: i}) DETACH DELETE e", {"es": orphans})
        s.add(
            "UNWIND $es AS x MATCH (e:Entity {id: x.id}) SET e.name = x.name, e.type = x.type, e.aliases = x.aliases",
            {"es": regiven},
        )
        return len(orphans)

    @staticmethod
    def _regiven(rows: Any, entity: str, held: str, erased: Sequence[str]) -> dict[str, Any]:
        """An entity's name, type and aliases from the mentions that stay: the earliest mention's name and
        type, every mention's aliases; with none left (kept by a relation), its name (``held``) alone."""
        found = rows(
            "MATCH (m:Memory)-[r:MENTIONS]->(e:Entity {id: $e}) WHERE NOT m.id IN $ids "
            "RETURN r.name, r.type, r.aliases ORDER BY m.recorded_at, m.id",
            {"e": entity, "ids": list(erased)},
        )
        name = next((n for n, _, _ in found if n), held)
        etype = next((t for _, t, _ in found if t), "thing")
        aliases = list(dict.fromkeys(a for _, _, given in found for a in (given or ())))
        return {"id": entity, "name": name, "type": etype, "aliases": aliases}
