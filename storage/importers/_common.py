"""Small helpers the importers share."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from storage.domain.models import MAX_CONTENT_CHARS

_NOT_PREDICATE = re.compile(r"[^\w .:/-]+", re.UNICODE)


def predicate_of(text: str) -> str:
    """A relation name the store accepts (letters, digits, space, ``_ . : / -``; at most 64 characters)."""
    return _NOT_PREDICATE.sub("_", text.strip()).strip("_ ")[:64] or "related_to"


def parse_time(value: object) -> datetime | None:
    """An ISO 8601 date or time from a source (naive values are taken as UTC); None when absent or unreadable."""
    if isinstance(value, datetime):
        when = value
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        return datetime.fromtimestamp(value, UTC)
    elif isinstance(value, str) and value.strip():
        try:
            when = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            return None
    else:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def chunks(text: str, limit: int = MAX_CONTENT_CHARS) -> list[str]:
    """``text`` in pieces of at most ``limit`` characters, split at paragraph breaks where it can."""
    if len(text) <= limit:
        return [text]
    out: list[str] = []
    current = ""
    for paragraph in text.split("\n\n"):
        while len(paragraph) > limit:  # one paragraph longer than a memory: cut it
            if current:
                out.append(current)
                current = ""
            out.append(paragraph[:limit])
            paragraph = paragraph[limit:]
        candidate = f"{current}\n\n{paragraph}" if current else paragraph
        if len(candidate) > limit:
            out.append(current)
            current = paragraph
        else:
            current = candidate
    if current:
        out.append(current)
    return [c for c in out if c.strip()]
