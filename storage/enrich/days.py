"""Day digests: which memories a scope's day digest summarises, its key, and when it is due (pure).

A long-running scope (``user:ana``, ``project:x``) collects plain memories (facts, events, preferences, notes
written with ``memory_write``) day after day. Each (scope, UTC day on which the memory was recorded) is a group
kept like a conversation (``storage.engine.conversations``): the memories join it in their write's transaction,
so the store is the consolidator's queue. Its digest is built once the day is over, or earlier once the scope
has gone ``day_quiet`` seconds without a new memory that day (and rebuilt after the next burst), and only when
the day holds at least ``MIN_DAY_MEMORIES`` of them. Messages (a conversation has its own digest) and digests
never join a day.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, date, datetime, time, timedelta

from storage.domain.models import MemoryKind

DAY_PREFIX = "day:"
MIN_DAY_MEMORIES = 3  # fewer plain memories in a day: no digest (it would only repeat them)
DEFAULT_DAY_QUIET_S = 3600.0  # a day not over yet is digested once the scope has been this quiet
DAY_KINDS = frozenset({MemoryKind.FACT, MemoryKind.EVENT, MemoryKind.PREFERENCE, MemoryKind.NOTE})


def scope_tag(scope: str) -> str:
    """The scope as the key names it: a hash (a key says nothing a reader of the store could not read)."""
    return hashlib.sha256(b"day-scope\x00" + scope.encode("utf-8")).hexdigest()[:24]


def day_key(scope: str, day: date) -> str:
    """The group of ``scope``'s plain memories recorded on ``day`` (UTC)."""
    return f"{DAY_PREFIX}{day.isoformat()}:{scope_tag(scope)}"


def is_day_key(key: str) -> bool:
    return key.startswith(DAY_PREFIX)


def day_of(key: str) -> date:
    return date.fromisoformat(key[len(DAY_PREFIX) : len(DAY_PREFIX) + 10])


def hold(key: str, changed: datetime, day_quiet: float) -> datetime | None:
    """Not before this time is the group's digest built (None: as soon as it is quiet, like a conversation).
    A day still running waits for its end, or for ``day_quiet`` seconds without a change if that comes first;
    a day already over (a source amended later, say) is rebuilt after the usual quiet time."""
    if not is_day_key(key):
        return None
    day = day_of(key)
    if day >= date.max:  # 9999-12-31 (an imported recorded_at) has no next day: it goes by quiet time alone
        return changed + timedelta(seconds=day_quiet)
    end = datetime.combine(day + timedelta(days=1), time(0), tzinfo=UTC)
    if changed >= end:
        return None
    return min(end, changed + timedelta(seconds=day_quiet))
