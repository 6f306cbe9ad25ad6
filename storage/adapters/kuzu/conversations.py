"""The Kùzu adapter's conversations: membership of messages and the digest of each (``CanonicalConversations``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from storage.adapters.kuzu._cypher import KEYS_PER_STATEMENT, _exec, _rows, utc
from storage.adapters.kuzu.writes import _Writes
from storage.ports.canonical import Session


class _Conversations(_Writes):
    def id_secret(self, conn: Session) -> str:
        rows = _rows(conn, "MATCH (m:Meta {key: 'id_secret'}) RETURN m.value")
        return str(rows[0][0]) if rows else ""

    def set_id_secret(self, conn: Session, secret: str) -> None:
        _exec(conn, "MERGE (m:Meta {key: 'id_secret'}) SET m.value = $v", {"v": secret})

    def drop_conversations(self, conn: Session, keys: Sequence[str]) -> None:
        if keys:
            _exec(conn, "MATCH (c:Conversation) WHERE c.key IN $keys DETACH DELETE c", {"keys": list(keys)})

    def scope_zones(self, conn: Session) -> dict[str, str]:
        rows = _rows(conn, "MATCH (m:Meta) WHERE m.key STARTS WITH 'tz:' RETURN m.key, m.value")
        return {str(k)[3:]: str(z) for k, z in rows}

    def set_scope_zone(self, conn: Session, scope: str, zone: str | None) -> None:
        if zone is None:
            _exec(conn, "MATCH (m:Meta {key: $k}) DELETE m", {"k": f"tz:{scope}"})
        else:
            _exec(conn, "MERGE (m:Meta {key: $k}) SET m.value = $v", {"k": f"tz:{scope}", "v": zone})

    def join_conversation(self, conn: Session, key: str, memory_ids: Sequence[str], at: datetime) -> None:
        _exec(conn, "MERGE (c:Conversation {key: $k}) SET c.changed_at = $at", {"k": key, "at": at})
        ids = list(dict.fromkeys(memory_ids))
        if len(ids) > KEYS_PER_STATEMENT:  # a whole conversation handed over: one pass over the memories
            _exec(
                conn,
                "UNWIND $ids AS mid MATCH (m:Memory {id: mid}), (c:Conversation {key: $k}) "
                "WHERE NOT EXISTS { MATCH (m)-[:IN_CONVERSATION]->(c) } CREATE (m)-[:IN_CONVERSATION]->(c)",
                {"ids": ids, "k": key},
            )
            return
        for (
            mid
        ) in ids:  # a message or two (an amended message's new version): by key, not a scan (UNWIND is one)
            if not _rows(
                conn,
                "MATCH (:Memory {id: $id})-[:IN_CONVERSATION]->(:Conversation {key: $k}) RETURN count(*)",
                {"id": mid, "k": key},
            )[0][0]:
                _exec(
                    conn,
                    "MATCH (m:Memory {id: $id}), (c:Conversation {key: $k}) CREATE (m)-[:IN_CONVERSATION]->(c)",
                    {"id": mid, "k": key},
                )

    def conversation_members(self, conn: Session, key: str) -> list[str]:
        rows = _rows(
            conn, "MATCH (m:Memory)-[:IN_CONVERSATION]->(c:Conversation {key: $k}) RETURN m.id", {"k": key}
        )
        return [r[0] for r in rows]

    def conversations_of(self, conn: Session, memory_ids: Sequence[str]) -> dict[str, str | None]:
        ids = list(memory_ids)
        found: dict[str, str | None] = {}
        if len(ids) <= 64:  # one key lookup each: an IN list over Memory ids scans the table
            for mid in ids:
                for key, digest in _rows(
                    conn,
                    "MATCH (m:Memory {id: $id})-[:IN_CONVERSATION]->(c:Conversation) RETURN c.key, c.digest",
                    {"id": mid},
                ):
                    found[key] = digest
        else:  # many (a purge): one pass over the conversations' edges instead
            for key, digest in _rows(
                conn,
                "MATCH (m:Memory)-[:IN_CONVERSATION]->(c:Conversation) WHERE m.id IN $ids "
                "RETURN DISTINCT c.key, c.digest",
                {"ids": ids},
            ):
                found[key] = digest
        for key, digest in _rows(
            conn, "MATCH (c:Conversation) WHERE c.digest IN $ids RETURN c.key, c.digest", {"ids": ids}
        ):
            found[key] = digest
        return found

    def pending_conversations(self, conn: Session) -> list[tuple[str, datetime]]:
        rows = _rows(
            conn,
            "MATCH (c:Conversation) WHERE c.digested_at IS NULL OR c.changed_at > c.digested_at "
            "RETURN c.key, c.changed_at ORDER BY c.changed_at, c.key",
        )
        return [(k, utc(t) or t) for k, t in rows]

    def conversation_state(self, conn: Session, key: str) -> tuple[datetime | None, str | None] | None:
        rows = _rows(conn, "MATCH (c:Conversation {key: $k}) RETURN c.changed_at, c.digest", {"k": key})
        return (utc(rows[0][0]), rows[0][1]) if rows else None

    def set_digest(self, conn: Session, key: str, digest_id: str | None, at: datetime) -> None:
        _exec(
            conn,
            "MATCH (c:Conversation {key: $k}) SET c.digest = $d, c.digested_at = $at",
            {"k": key, "d": digest_id, "at": at},
        )

    def touch_conversations(self, conn: Session, keys: Sequence[str], at: datetime) -> None:
        for key in keys:
            # Counted from the conversation's key; listing the members' ids would read every memory's id.
            if _rows(
                conn,
                "MATCH (:Memory)-[:IN_CONVERSATION]->(c:Conversation {key: $k}) RETURN count(*)",
                {"k": key},
            )[0][0]:
                _exec(conn, "MATCH (c:Conversation {key: $k}) SET c.changed_at = $at", {"k": key, "at": at})
            else:
                _exec(conn, "MATCH (c:Conversation {key: $k}) DETACH DELETE c", {"k": key})

    def conversation_keys_ending(self, conn: Session, suffix: str) -> list[str]:
        rows = _rows(conn, "MATCH (c:Conversation) WHERE ends_with(c.key, $s) RETURN c.key", {"s": suffix})
        return sorted(r[0] for r in rows)

    def export_conversations(self, conn: Session) -> list[tuple[str, list[str]]]:
        rows = _rows(
            conn,
            "MATCH (m:Memory)-[:IN_CONVERSATION]->(c:Conversation) RETURN c.key, m.id ORDER BY c.key, m.id",
        )
        out: dict[str, list[str]] = {}
        for key, mid in rows:
            out.setdefault(key, []).append(mid)
        return list(out.items())

    def all_digests(self, conn: Session) -> dict[str, str]:
        rows = _rows(conn, "MATCH (c:Conversation) WHERE c.digest IS NOT NULL RETURN c.digest, c.key")
        return {d: k for d, k in rows}
