"""Day and week digests: which memories a scope's day or week digest summarises, its key, when it is due (pure).

A long-running scope (``user:ana``, ``project:x``) collects plain memories (facts, events, preferences, notes
written with ``memory_write``) day after day. Each (scope, local day on which the memory was recorded) is a
group kept like a conversation (``storage.engine.conversations``): the memories join it in their write's
transaction, so the store is the consolidator's queue. Its digest is built once the day is over, or earlier once
the scope has gone ``day_quiet`` seconds without a new memory that day (and rebuilt after the next burst), and
only when the day holds at least ``MIN_DAY_MEMORIES`` of them. Messages (a conversation has its own digest) and
digests never join a day.

A week (scope, ISO week) costs the write path nothing: when the consolidator has dealt with a day, that day's
memories join its week, and the week's digest is built once the week is over (or the scope has been quiet), from
the memories themselves, when they span ``MIN_WEEK_DAYS`` days and number ``MIN_WEEK_MEMORIES``.

Days and weeks are local to the scope's time zone (UTC unless set): a key names the local date.
"""

from __future__ import annotations

import functools
import hashlib
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from storage.domain.models import MemoryKind

DAY_PREFIX = "day:"
WEEK_PREFIX = "week:"
MIN_DAY_MEMORIES = 3  # fewer plain memories in a day: no digest (it would only repeat them)
MIN_WEEK_MEMORIES = 5  # fewer in a week: no week digest
MIN_WEEK_DAYS = 2  # a week of one day would only repeat that day's digest
DEFAULT_DAY_QUIET_S = 3600.0  # a day not over yet is digested once the scope has been this quiet
DAY_KINDS = frozenset({MemoryKind.FACT, MemoryKind.EVENT, MemoryKind.PREFERENCE, MemoryKind.NOTE})


@functools.lru_cache(maxsize=4096)  # a consolidator round looks up each pending key's scope zone by it
def scope_tag(scope: str) -> str:
    """The scope as the key names it: a hash (a key says nothing a reader of the store could not read)."""
    return hashlib.sha256(b"day-scope\x00" + scope.encode("utf-8")).hexdigest()[:24]


def tag_of(key: str) -> str:
    return key.rsplit(":", 1)[1]


def day_key(scope: str, day: date) -> str:
    """The group of ``scope``'s plain memories recorded on ``day`` (local to the scope's time zone)."""
    return f"{DAY_PREFIX}{day.isoformat()}:{scope_tag(scope)}"


def week_key(scope: str, day: date) -> str:
    """The group of ``scope``'s plain memories recorded in the ISO week holding ``day``."""
    year, week, _ = day.isocalendar()
    return f"{WEEK_PREFIX}{year:04d}-W{week:02d}:{scope_tag(scope)}"


def is_day_key(key: str) -> bool:
    return key.startswith(DAY_PREFIX)


def is_week_key(key: str) -> bool:
    return key.startswith(WEEK_PREFIX)


def is_period_key(key: str) -> bool:
    """A scope's day or week (not a conversation): its digest lifts only what the query found itself."""
    return is_day_key(key) or is_week_key(key)


def day_of(key: str) -> date:
    return date.fromisoformat(key[len(DAY_PREFIX) : len(DAY_PREFIX) + 10])


def week_of(key: str) -> date:
    """The Monday of a week key's ISO week."""
    year, week = key[len(WEEK_PREFIX) : len(WEEK_PREFIX) + 8].split("-W")
    return date.fromisocalendar(int(year), int(week), 1)


# Names a zone folder holds that are no IANA zone: ``localtime`` follows this machine's /etc/localtime (a scope's
# days would move with the machine, and an export would mean another zone elsewhere), ``posixrules`` is a default.
_NOT_ZONES = frozenset({"localtime", "posixrules"})


@functools.lru_cache(maxsize=1)
def _zone_names() -> frozenset[str]:
    # available_timezones() walks the zone folders (tens of ms): once per process. It leaves out "right/..."
    # (leap-second zones, which zoneinfo misreads: right/Europe/Berlin is UTC+2 in November) and "posix/..."
    # (copies a machine may lack, so an export naming one would not import elsewhere).
    return frozenset(available_timezones()) - _NOT_ZONES


def known_zone(name: object) -> bool:
    """An IANA zone name this machine's zone database holds (zoneinfo refuses paths and other tricks; a name
    the database lists, so not ``localtime``, ``right/...`` or ``posix/...``)."""
    if not isinstance(name, str) or not name or len(name) > 64:
        return False
    if name != "UTC" and name not in _zone_names():
        return False
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return False
    return True


def zone_spelled(name: str) -> str | None:
    """The zone ``name`` means when only its case is wrong ("europe/berlin": "Europe/Berlin"), else None."""
    folded = name.strip().casefold()
    return next((z for z in sorted(_zone_names()) if z.casefold() == folded), None)


def local_day(at: datetime, zone: tzinfo) -> date:
    """The date ``at`` falls on in ``zone``."""
    return at.astimezone(zone).date()


def hold(key: str, changed: datetime, day_quiet: float, zone: tzinfo = UTC) -> datetime | None:
    """Not before this time is the group's digest built (None: as soon as it is quiet, like a conversation).
    A day or week still running waits for its end (midnight in ``zone``), or for ``day_quiet`` seconds without
    a change if that comes first; one already over (a source amended later, say) is rebuilt after the usual
    quiet time. Raises ValueError on a key whose date cannot be read (the consolidator retries it later)."""
    if is_day_key(key):
        first, days = day_of(key), 1
    elif is_week_key(key):
        first, days = week_of(key), 7
    else:
        return None
    try:
        end = datetime.combine(first + timedelta(days=days), time(0), tzinfo=zone)
    except OverflowError:  # the last day or week there is (9999-12-31) has no next: quiet time alone
        return changed + timedelta(seconds=day_quiet)
    if changed >= end:
        return None
    return min(end, changed + timedelta(seconds=day_quiet))
