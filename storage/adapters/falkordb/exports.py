"""The FalkorDB adapter's export and restore (storage.engine.backup)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from storage.adapters._rows import (
    ENRICHMENT_KEYS,
    contradiction_rows,
    enrichment_rows,
    mention_rows,
    relation_rows,
)
from storage.adapters.falkordb._cypher import MEMORY_FIELDS, RETURN_MEMORY, memory_params, session, utc
from storage.adapters.falkordb.writes import _Writes
from storage.domain.models import Memory
from storage.ports.canonical import ContradictionRow, EnrichmentRow, MentionGiven, RelationRow, Session

_TIMES = ("event_time", "valid_from", "valid_to", "recorded_at", "retired_at")


class _Exports(_Writes):
    def export_scopes(self, conn: Session) -> list[tuple[str, datetime | None]]:
        rows = session(conn).rows("MATCH (s:Scope) RETURN s.id, s.created_at ORDER BY s.id")
        return [(r[0], utc(r[1])) for r in rows]

    def export_memories(self, conn: Session) -> Iterator[dict[str, Any]]:
        s = session(conn)
        last = ""
        while True:
            rows = s.rows(
                f"MATCH (m:Memory) WHERE m.id > $after RETURN {RETURN_MEMORY}, m.entity_names, m.vector "
                "ORDER BY m.id LIMIT 1000",
                {"after": last},
            )
            if not rows:
                return
            ids = [r[0] for r in rows]
            added: dict[str, dict[str, datetime | None]] = {i: {} for i in ids}
            for mid, sid, at in s.rows(
                "UNWIND $ids AS i MATCH (s:Scope)-[c:CONTAINS]->(m:Memory {id: i}) RETURN i, s.id, c.added_at",
                {"ids": ids},
            ):
                added[mid][sid] = utc(at)
            mentions: dict[str, dict[str, list[Any]]] = {i: {} for i in ids}
            for mid, eid, name, etype, aliases in s.rows(
                "UNWIND $ids AS i MATCH (m:Memory {id: i})-[r:MENTIONS]->(e:Entity) "
                "RETURN i, e.id, r.name, r.type, r.aliases",
                {"ids": ids},
            ):
                mentions[mid][eid] = [name or "", etype or "thing", list(aliases or [])]
            for r in rows:
                record: dict[str, Any] = dict(zip(MEMORY_FIELDS, r[: len(MEMORY_FIELDS)], strict=True))
                for key in _TIMES:
                    record[key] = utc(record[key])
                record["entities"] = sorted(r[-2] or ())
                record["vector"] = [float(x) for x in r[-1]]
                record["scopes"] = added[r[0]]
                record["mentions"] = sorted(mentions[r[0]])
                record["mentioned_as"] = dict(sorted(mentions[r[0]].items()))
                yield record
            last = rows[-1][0]

    def export_entities(self, conn: Session) -> list[tuple[str, str, str, list[str]]]:
        rows = session(conn).rows("MATCH (e:Entity) RETURN e.id, e.name, e.type, e.aliases ORDER BY e.id")
        return [(i, n, t or "thing", list(a or [])) for i, n, t, a in rows]

    def export_supersedes(self, conn: Session) -> list[tuple[str, str, str, datetime | None]]:
        rows = session(conn).rows(
            "MATCH (n:Memory)-[r:SUPERSEDES]->(o:Memory) RETURN n.id, o.id, r.reason, r.at"
        )
        return [(n, o, reason or "", utc(at)) for n, o, reason, at in rows]

    def export_relations(self, conn: Session) -> list[RelationRow]:
        rows = session(conn).rows(
            "MATCH (a:Entity)-[r:RELATES]->(b:Entity) RETURN a.id, b.id, r.predicate, r.memory_id, r.recorded_at, "
            "r.valid_from, r.valid_to, r.ended_by, r.subject_name, r.object_name"
        )
        return relation_rows(rows, utc)

    def export_contradictions(self, conn: Session) -> list[ContradictionRow]:
        rows = session(conn).rows(
            "MATCH (n:Memory)-[r:CONTRADICTS]->(o:Memory) RETURN n.id, o.id, r.predicate, r.at"
        )
        return contradiction_rows(rows, utc)

    def export_enrichments(self, conn: Session) -> list[EnrichmentRow]:
        fields = ", ".join(f"x.{k}" for k in ENRICHMENT_KEYS)
        return enrichment_rows(session(conn).rows(f"MATCH (x:Enrichment) RETURN x.id, {fields}, x.at"), utc)

    def restore_scopes(
        self, conn: Session, scopes: Sequence[tuple[str, datetime]], parents: Sequence[tuple[str, str]]
    ) -> None:
        s = session(conn)
        s.add(
            "UNWIND $ss AS x MERGE (s:Scope {id: x.id}) ON CREATE SET s.created_at = x.at",
            {"ss": [{"id": sid, "at": at} for sid, at in scopes]},
        )
        for child, parent in parents:
            self.set_parent(conn, child, parent)

    def restore_entities(self, conn: Session, entities: Sequence[tuple[str, str, str, list[str]]]) -> None:
        session(conn).add(
            "UNWIND $es AS x MERGE (e:Entity {id: x.id}) "
            "ON CREATE SET e.name = x.name, e.type = x.type, e.aliases = x.aliases",
            {"es": [{"id": i, "name": n, "type": t, "aliases": list(a)} for i, n, t, a in entities]},
        )

    def restore_memory(self, conn: Session, m: Memory, vector: Sequence[float],
                       added: Mapping[str, datetime], mentions: Sequence[str],
                       given: Mapping[str, MentionGiven] | None = None) -> None:  # fmt: skip
        s = session(conn)
        s.add(
            "CREATE (:Memory {id: $id, content: $content, kind: $kind, principal: $principal, client: $client, "
            "source: $source, metadata: $metadata, event_time: $event_time, event_time_source: $event_time_source, "
            "valid_from: $valid_from, valid_to: $valid_to, recorded_at: $recorded_at, retired_at: $retired_at, "
            "retire_reason: $retire_reason, supersedes: $supersedes, superseded_by: $superseded_by, "
            "vector: vecf32($vector), scopes: $scopes, entity_names: $entities})",
            {
                **memory_params(m),
                "retired_at": m.retired_at,
                "retire_reason": m.retire_reason,
                "supersedes": m.supersedes,
                "superseded_by": m.superseded_by,
                "vector": [float(x) for x in vector],
                "scopes": sorted(added),
                "entities": list(m.entities),
            },
        )
        s.add(
            "MATCH (m:Memory {id: $id}) UNWIND $added AS x MATCH (s:Scope {id: x.id}) "
            "CREATE (s)-[:CONTAINS {added_at: x.at}]->(m)",
            {"id": m.id, "added": [{"id": sid, "at": at} for sid, at in added.items()]},
        )
        said, unsaid = mention_rows(mentions, given)
        if said:
            s.add(
                "MATCH (m:Memory {id: $mid}) UNWIND $es AS x MATCH (e:Entity {id: x.e}) "
                "CREATE (m)-[:MENTIONS {name: x.name, type: x.type, aliases: x.aliases}]->(e)",
                {"mid": m.id, "es": said},
            )
        if unsaid:  # an older export: each mention holds the entity's type and aliases
            s.add(
                "MATCH (m:Memory {id: $mid}) UNWIND $es AS eid MATCH (e:Entity {id: eid}) "
                "CREATE (m)-[:MENTIONS {name: e.name, type: e.type, aliases: e.aliases}]->(e)",
                {"mid": m.id, "es": unsaid},
            )

    def restore_supersedes(self, conn: Session, new: str, old: str, reason: str, at: datetime) -> None:
        session(conn).add(
            "MATCH (n:Memory {id: $new}), (o:Memory {id: $old}) CREATE (n)-[:SUPERSEDES {reason: $r, at: $at}]->(o)",
            {"new": new, "old": old, "r": reason, "at": at},
        )

    def restore_relation(
        self,
        conn: Session,
        subject: str,
        obj: str,
        predicate: str,
        memory_id: str,
        at: datetime,
        *,
        valid_from: datetime | None = None,
        valid_to: datetime | None = None,
        ended_by: str | None = None,
        subject_name: str | None = None,
        object_name: str | None = None,
    ) -> None:
        session(conn).add(
            # Its memory is imported before it; the edge carries the memory's scope list, as ``relate`` does,
            # and the ends' names as exported, else (an older export) as the memory's mentions of them gave them.
            "MATCH (a:Entity {id: $a}), (b:Entity {id: $b}), (m:Memory {id: $m}) "
            "OPTIONAL MATCH (m)-[ma:MENTIONS]->(a) OPTIONAL MATCH (m)-[mb:MENTIONS]->(b) "
            "CREATE (a)-[:RELATES {predicate: $p, memory_id: $m, recorded_at: $at, valid_from: $vf, "
            "valid_to: $vt, ended_by: $by, scopes: m.scopes, subject_name: coalesce($sname, ma.name, a.name), "
            "object_name: coalesce($oname, mb.name, b.name)}]->(b)",
            {
                "sname": subject_name,
                "oname": object_name,
                "a": subject,
                "b": obj,
                "p": predicate,
                "m": memory_id,
                "at": at,
                "vf": valid_from,
                "vt": valid_to,
                "by": ended_by,
            },
        )
