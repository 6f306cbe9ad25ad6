"""The Kùzu adapter's export and restore (storage.engine.backup)."""

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
from storage.adapters.kuzu._cypher import (
    _FIELD_NAMES,
    _RETURN_MEMORY,
    COPY_TO_MENTION,
    VECTOR,
    _exec,
    _memory_params,
    _rows,
    utc,
    vector_params,
    vector_value,
)
from storage.adapters.kuzu.writes import _Writes
from storage.domain.models import Memory
from storage.ports.canonical import ContradictionRow, EnrichmentRow, MentionGiven, RelationRow, Session


class _Exports(_Writes):
    def export_scopes(self, conn: Session) -> list[tuple[str, datetime | None]]:
        return [
            (r[0], utc(r[1])) for r in _rows(conn, "MATCH (s:Scope) RETURN s.id, s.created_at ORDER BY s.id")
        ]

    def export_memories(self, conn: Session) -> Iterator[dict[str, Any]]:
        """Every memory with all its fields, its vector, its scopes (with when each was added) and the ids of
        the entities it mentions, in id order."""
        last = ""
        while True:
            rows = _rows(
                conn,
                f"MATCH (m:Memory) WHERE m.id > $after RETURN {_RETURN_MEMORY}, m.entity_names, {VECTOR} "
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
                record["entities"] = sorted(r[-3] or ())
                record["vector"] = vector_value(r[-2], r[-1])
                record["scopes"] = {
                    sid: utc(at)
                    for sid, at in _rows(
                        conn,
                        "MATCH (s:Scope)-[c:CONTAINS]->(m:Memory {id: $id}) RETURN s.id, c.added_at",
                        {"id": mid},
                    )
                }
                given = {
                    e: [name or "", etype or "thing", list(aliases or [])]
                    for e, name, etype, aliases in _rows(
                        conn,
                        "MATCH (m:Memory {id: $id})-[r:MENTIONS]->(e:Entity) RETURN e.id, r.name, r.type, r.aliases",
                        {"id": mid},
                    )
                }
                record["mentions"] = sorted(given)
                record["mentioned_as"] = dict(sorted(given.items()))
                yield record
            last = rows[-1][0]

    def export_entities(self, conn: Session) -> list[tuple[str, str, str, list[str]]]:
        rows = _rows(conn, "MATCH (e:Entity) RETURN e.id, e.name, e.type, e.aliases ORDER BY e.id")
        return [(i, n, t or "thing", list(a or [])) for i, n, t, a in rows]

    def export_supersedes(self, conn: Session) -> list[tuple[str, str, str, datetime | None]]:
        rows = _rows(conn, "MATCH (n:Memory)-[r:SUPERSEDES]->(o:Memory) RETURN n.id, o.id, r.reason, r.at")
        return [(n, o, reason or "", utc(at)) for n, o, reason, at in rows]

    def export_relations(self, conn: Session) -> list[RelationRow]:
        rows = _rows(
            conn,
            "MATCH (a:Entity)-[r:RELATES]->(b:Entity) RETURN a.id, b.id, r.predicate, r.memory_id, r.recorded_at, "
            "r.valid_from, r.valid_to, r.ended_by, r.subject_name, r.object_name",
        )
        return relation_rows(rows, utc)

    def export_contradictions(self, conn: Session) -> list[ContradictionRow]:
        rows = _rows(
            conn, "MATCH (n:Memory)-[r:CONTRADICTS]->(o:Memory) RETURN n.id, o.id, r.predicate, r.at"
        )
        return contradiction_rows(rows, utc)

    def export_enrichments(self, conn: Session) -> list[EnrichmentRow]:
        fields = ", ".join(f"x.{k}" for k in ENRICHMENT_KEYS)
        return enrichment_rows(_rows(conn, f"MATCH (x:Enrichment) RETURN x.id, {fields}, x.at"), utc)

    def restore_scopes(
        self,
        conn: Session,
        scopes: Sequence[tuple[str, datetime]],
        parents: Sequence[tuple[str, str]],
    ) -> None:
        for sid, at in scopes:
            _exec(conn, "MERGE (s:Scope {id: $id}) ON CREATE SET s.created_at = $at", {"id": sid, "at": at})
        for child, parent in parents:
            self.set_parent(conn, child, parent)

    def restore_entities(self, conn: Session, entities: Sequence[tuple[str, str, str, list[str]]]) -> None:
        for eid, name, etype, aliases in entities:
            _exec(
                conn,
                # MERGE: an import into a store that already knows the entity keeps the store's own record.
                "MERGE (e:Entity {id: $id}) ON CREATE SET e.name = $name, e.type = $type, "
                "e.aliases = CAST($aliases AS STRING[])",
                {"id": eid, "name": name, "type": etype, "aliases": list(aliases)},
            )

    def restore_memory(self, conn: Session, m: Memory, vector: Sequence[float],
                       added: Mapping[str, datetime], mentions: Sequence[str],
                       given: Mapping[str, MentionGiven] | None = None) -> None:  # fmt: skip
        """Create a memory exactly as exported: same id, times, status and version pointers."""
        _exec(
            conn,
            "CREATE (:Memory {id: $id, content: $content, kind: $kind, principal: $principal, client: $client, "
            "source: $source, metadata: $metadata, event_time: $event_time, event_time_source: $ets, "
            "valid_from: $valid_from, valid_to: $valid_to, recorded_at: $recorded_at, retired_at: $retired_at, "
            "retire_reason: $retire_reason, supersedes: $supersedes, superseded_by: $superseded_by, "
            "vector16: $vector16, vector_exp: CAST($vector_exp AS INT16), scopes: CAST($scopes AS STRING[]), "
            "entity_names: CAST($entities AS STRING[])})",
            {
                **_memory_params(m),
                "retired_at": m.retired_at,
                "retire_reason": m.retire_reason,
                "supersedes": m.supersedes,
                "superseded_by": m.superseded_by,
                **vector_params(vector),
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
        said, unsaid = mention_rows(mentions, given)
        if said:
            _exec(
                conn,
                "MATCH (m:Memory {id: $mid}) UNWIND $es AS x MATCH (e:Entity {id: x.e}) "
                "CREATE (m)-[r:MENTIONS {name: x.name, type: x.type, aliases: CAST(x.aliases AS STRING[])}]->(e) "
                f"SET {COPY_TO_MENTION}",
                {"mid": m.id, "es": said},
            )
        if unsaid:
            _exec(
                conn,
                # An older export does not say which memory gave an entity its type and aliases: each mention
                # holds them.
                "MATCH (m:Memory {id: $mid}) UNWIND $es AS eid MATCH (e:Entity {id: eid}) "
                f"CREATE (m)-[r:MENTIONS {{name: e.name, type: e.type, aliases: e.aliases}}]->(e) SET {COPY_TO_MENTION}",
                {"mid": m.id, "es": unsaid},
            )

    def restore_supersedes(self, conn: Session, new: str, old: str, reason: str, at: datetime) -> None:
        _exec(
            conn,
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
        _exec(
            conn,
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
