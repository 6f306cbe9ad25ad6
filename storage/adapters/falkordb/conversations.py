"""The FalkorDB adapter's conversations: not supported yet (docs/scale-out.md).

Handing over a conversation (``conversation_write``) is refused on a shared FalkorDB store, with a hint to
write each message with ``memory_write``; so there are never conversations or digests here, and the reads
the consolidator and erasure make answer "none". Why not yet: a transaction here is buffered and sent as one
query at commit, and the consolidator's steps read what the same transaction wrote.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from storage.adapters.falkordb._cypher import session
from storage.adapters.falkordb.exports import _Exports
from storage.domain.errors import InvalidInput
from storage.ports.canonical import Session


class _Conversations(_Exports):
    def id_secret(self, conn: Session) -> str:
        rows = session(conn).rows("MATCH (m:Meta {key: 'id_secret'}) RETURN m.value", {})
        return str(rows[0][0]) if rows else ""

    def set_id_secret(self, conn: Session, secret: str) -> None:
        session(conn).add("MATCH (m:Meta {key: 'id_secret'}) SET m.value = $v", {"v": secret})

    def drop_conversations(self, conn: Session, keys: Sequence[str]) -> None:
        return None  # a shared graph keeps no conversations or days (join_conversation)

    def scope_zones(self, conn: Session) -> dict[str, str]:
        return {}  # no day or week digests on a shared graph, so no time zones for them

    def set_scope_zone(self, conn: Session, scope: str, zone: str | None) -> None:
        if zone is not None:
            raise InvalidInput(
                "scope time zones are not available when the canonical store is a shared FalkorDB graph",
                hint="nothing was changed",
            )

    def join_conversation(self, conn: Session, key: str, memory_ids: Sequence[str], at: datetime) -> None:
        raise InvalidInput(
            "conversation_write is not available when the canonical store is a shared FalkorDB graph",
            hint="write each message with memory_write (kind message, event_time = its time)",
        )

    def conversation_members(self, conn: Session, key: str) -> list[str]:
        return []

    def conversations_of(self, conn: Session, memory_ids: Sequence[str]) -> dict[str, str | None]:
        return {}

    def pending_conversations(self, conn: Session) -> list[tuple[str, datetime]]:
        return []

    def export_conversations(self, conn: Session) -> list[tuple[str, list[str]]]:
        return []

    def conversation_keys_ending(self, conn: Session, suffix: str) -> list[str]:
        return []

    def conversation_state(self, conn: Session, key: str) -> tuple[datetime | None, str | None] | None:
        return None

    def set_digest(self, conn: Session, key: str, digest_id: str | None, at: datetime) -> None:
        return None

    def touch_conversations(self, conn: Session, keys: Sequence[str], at: datetime) -> None:
        return None

    def all_digests(self, conn: Session) -> dict[str, str]:
        return {}
