"""Mnemograph's own bulk format: JSON Lines, one memory a line, with its vector when the caller has one.

Each line is ``{"content": ..., "scopes"?: [...], "kind"?, "event_time"?, "valid_from"?, "valid_to"?,
"entities"?: [name or {"name", "type"?, "aliases"?}], "relations"?: [{"subject", "predicate", "object"}],
"metadata"?: {...}, "source"?, "vector"?: [...]}``, the fields of ``memory_write``. A line without ``scopes``
goes into the import's scope. ``vector`` must come from the data directory's own model (the default
all-MiniLM-L6-v2, 384 numbers): given, the memory is not embedded again, which is most of an import's time.
Times are ISO 8601 (a time without a zone is UTC). A line that is not such an object is an error naming it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from storage.domain.errors import InvalidInput
from storage.domain.models import EntityIn, RelationIn, WriteItem

FIELDS = frozenset(
    {"content", "scopes", "kind", "event_time", "valid_from", "valid_to", "entities", "relations", "metadata",
     "source", "vector"}
)  # fmt: skip


def read_jsonl(path: Path, scope: str) -> Iterator[WriteItem]:
    with path.open(encoding="utf-8") as lines:
        for n, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            try:
                yield _item(json.loads(raw), scope)
            except ValueError as exc:  # JSON, a time, a number
                raise _bad(path, n, f"is not a memory ({str(exc)[:120]})") from None
            except (InvalidInput, TypeError, KeyError) as exc:
                why = exc.message if isinstance(exc, InvalidInput) else repr(exc)[:120]
                raise _bad(path, n, why) from None


def _bad(path: Path, n: int, why: str) -> InvalidInput:
    return InvalidInput(
        f"{path.name}:{n} {why}",
        hint='each line must be a JSON object such as {"content": "...", "scopes": ["user:ana"]}; '
        "fix the line and run the import again (nothing was imported)",
    )


def _item(rec: Any, scope: str) -> WriteItem:
    if not isinstance(rec, dict):
        raise InvalidInput("is not a JSON object")
    unknown = sorted(set(rec) - FIELDS)
    if unknown:
        raise InvalidInput(f"has unknown field {unknown[0][:40]!r} (known: {', '.join(sorted(FIELDS))})")
    if not isinstance(rec.get("content"), str):
        raise InvalidInput('has no "content" string')
    scopes = rec.get("scopes", [scope])
    if not isinstance(scopes, list):
        raise InvalidInput('"scopes" must be a list of scope ids')
    vector = rec.get("vector")
    if vector is not None and (
        not isinstance(vector, list)
        or not all(isinstance(x, int | float) and not isinstance(x, bool) for x in vector)
    ):
        raise InvalidInput('"vector" must be a list of numbers')
    return WriteItem(
        rec["content"],
        scopes,
        kind=str(rec.get("kind", "note")),
        event_time=_time(rec.get("event_time")),
        valid_from=_time(rec.get("valid_from")),
        valid_to=_time(rec.get("valid_to")),
        entities=[_entity(e) for e in rec.get("entities") or []],
        relations=[
            RelationIn(str(r["subject"]), str(r["predicate"]), str(r["object"]))
            for r in rec.get("relations") or []
        ],
        metadata=rec.get("metadata"),
        source=str(rec.get("source", "")),
        vector=vector,
    )


def _entity(value: Any) -> EntityIn:
    if isinstance(value, str):
        return EntityIn(value)
    if isinstance(value, dict):
        return EntityIn(
            str(value["name"]), str(value.get("type") or "thing"), tuple(map(str, value.get("aliases") or ()))
        )
    raise InvalidInput('an entity must be a name or {"name", "type", "aliases"}')


def _time(value: Any) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{str(value)[:40]!r} is not an ISO 8601 time")
    when = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    return when if when.tzinfo else when.replace(tzinfo=UTC)
