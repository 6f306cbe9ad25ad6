"""What the Kùzu adapter keeps of the store between reads, valid until the next transaction ends.

One process owns an embedded Kùzu store and every change goes through its ``transaction()``, so the adapter
knows each moment the data can change: it counts them (``GraphStore._data_version``), and what it keeps was read
at one count and is used only while the count has not moved. Nothing here is a second source of truth; a kept
answer is the answer the store gave, reused until a commit could have changed it.

Kept, per entity the graph lane walks from (``PerEntity``): every mention, and every relation. The lane reads
them at each recall for each entity the query names or reaches, with a scope (and validity) filter and a sort
that Kùzu evaluates for every mention or edge of the entity, in every scope: 4-9 ms an entity at 10,000
memories (about 280 mentions and 100 relations each), eight times a recall, and more at 100,000. Kept once per
entity with what the filter needs, a recall filters them in Python in well under a millisecond, for any
reader's scopes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Generic, Literal, NamedTuple, TypeVar

# Rows of one entity read in one statement at most to be kept; an entity with more mentions (relations) is read
# with the reader's filter in the store, as before (its rows would cost more to read whole than filtered).
MENTIONS_PER_ENTITY = 4096
RELATIONS_PER_ENTITY = 2048
# Rows kept in all, the least recently used entity's dropped first: mentions about 220 bytes each (29 MB at most;
# 100,000 memories mention about 40 names 2,800 times each), relations 180-400 bytes each (26 MB at most).
MENTIONS_KEPT = 131_072
RELATIONS_KEPT = 65_536
T = TypeVar("T")


class Mention(NamedTuple):
    """A memory mentioning an entity, with what ``mentioning``'s filter reads of it."""

    id: str
    scopes: frozenset[str]
    live: bool  # neither retired nor superseded
    valid_from: datetime | None  # naive UTC, as Kùzu returns timestamps
    valid_to: datetime | None


class PerEntity(Generic[T]):
    """Each entity's rows (mentions or relations), in the order of the statement they stand for, as read at a
    data version."""

    def __init__(self, *, after: int, rows: int) -> None:
        self._kept: OrderedDict[str, tuple[int, list[T] | None]] = OrderedDict()
        self._total = 0
        self._after, self._rows = after, rows
        self._asked: dict[str, tuple[int, int]] = {}  # entity -> (data version, times asked at it)
        self._lock = threading.Lock()

    def get(self, entity: str, version: int) -> list[T] | Literal[False] | None:
        """The entity's rows kept at ``version``; None if it has too many to keep; False if not kept."""
        with self._lock:
            got = self._kept.get(entity)
            if got is None or got[0] != version:
                return False
            self._kept.move_to_end(entity)
            return got[1]

    def asked_again(self, entity: str, version: int) -> bool:
        """Whether the entity was asked for ``after`` times before at ``version`` (and note that it is asked now).
        Its rows are read whole only then: read whole, they cost more than the reader's filtered statement (all
        scopes, all columns), which pays only if they are used again before the next commit. A store written
        between every two recalls so keeps reading only what each reader asks for."""
        with self._lock:
            at, n = self._asked.get(entity, (version, 0))
            n = n if at == version else 0
            if len(self._asked) > self._rows:
                self._asked.clear()
            self._asked[entity] = (version, n + 1)
            return n >= self._after

    def fetch(
        self, entity: str, version: int, read: Callable[[], list[T] | None]
    ) -> list[T] | Literal[False] | None:
        """The entity's rows at ``version`` (taken before ``read`` runs: a commit during it leaves what it read
        kept at the older version, never used again): kept ones, else ``read()`` when asked for often enough
        (``asked_again``), else False (the caller reads with its own filter)."""
        kept = self.get(entity, version)
        if kept is False and self.asked_again(entity, version):
            kept = read()
            self.put(entity, version, kept)
        return kept

    def put(self, entity: str, version: int, rows: list[T] | None) -> None:
        """Keep ``rows`` read at ``version`` (None: the entity has too many to keep)."""
        with self._lock:
            old = self._kept.get(entity)
            if old is not None and old[0] > version:
                return  # a newer read is kept already
            if old is not None:
                del self._kept[entity]
                self._total -= len(old[1] or ()) + 1
            self._kept[entity] = (version, rows)
            self._total += len(rows or ()) + 1
            while (self._total > self._rows or len(self._kept) > self._rows) and len(self._kept) > 1:
                _, (_, dropped) = self._kept.popitem(last=False)
                self._total -= len(dropped or ()) + 1


def select(
    rows: Sequence[Mention],
    scopes: Sequence[str],
    *,
    live_only: bool,
    limit: int,
    valid_at: datetime | None,
) -> list[str]:
    """``mentioning``'s answer from an entity's kept mentions: the same filter, order and cut as its statement
    (a shared scope; with ``live_only`` neither retired nor superseded, and with ``valid_at`` valid then)."""
    wanted = set(scopes)
    at = None
    if live_only and valid_at is not None:
        # Kùzu compares naive UTC timestamps; the engine's ``now`` is UTC.
        at = valid_at.astimezone(UTC).replace(tzinfo=None) if valid_at.tzinfo else valid_at
    out: list[str] = []
    if limit <= 0:
        return out
    for m in rows:
        if wanted.isdisjoint(m.scopes):
            continue
        if live_only:
            if not m.live:
                continue
            if at is not None and (
                m.valid_from is None or m.valid_from > at or (m.valid_to is not None and m.valid_to <= at)
            ):
                continue
        out.append(m.id)
        if len(out) >= limit:
            break
    return out
