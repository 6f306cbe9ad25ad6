"""Rows the store adapters hand to ``storage.engine.backup``, shaped one way for every backend.

Each adapter reads its own rows and knows how its driver returns a time (``utc``: Kùzu gives naive UTC
datetimes, FalkorDB microseconds since the epoch); what a row then looks like is decided here once, so an
export from one backend reads the same as from another: every time aware UTC, an unset one (an open validity,
a relation never ended) None.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from storage.ports.canonical import ContradictionRow, EnrichmentRow, MentionGiven, RelationRow

Utc = Callable[[Any], datetime | None]

ENRICHMENT_KEYS = (
    "status",
    "detail",
    "model",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
)
"""The columns of a model pass's record, in the order the adapters read them (``at`` follows them)."""


def _time(utc: Utc, value: Any) -> datetime | None:
    return None if value is None else utc(value)


def relation_rows(rows: Iterable[Sequence[Any]], utc: Utc) -> list[RelationRow]:
    """RELATES rows read as (subject, object, predicate, memory id, recorded at, valid from, valid to,
    ended by, subject's name, object's name as the memory spelt them)."""
    return [
        (a, b, p, m, _time(utc, at), _time(utc, vf), _time(utc, vt), by, sn, on)
        for a, b, p, m, at, vf, vt, by, sn, on in rows
    ]


def contradiction_rows(rows: Iterable[Sequence[Any]], utc: Utc) -> list[ContradictionRow]:
    """CONTRADICTS rows read as (new memory id, old memory id, predicate, at), in a stable order."""
    return sorted((n, o, p or "", _time(utc, at)) for n, o, p, at in rows)


def enrichment_rows(rows: Iterable[Sequence[Any]], utc: Utc) -> list[EnrichmentRow]:
    """Enrichment rows read as (memory id, *ENRICHMENT_KEYS, at): a dict of those keys per memory id."""
    out: list[EnrichmentRow] = []
    for mid, *values, at in rows:
        record: dict[str, Any] = dict(zip(ENRICHMENT_KEYS, values, strict=True))
        record["at"] = _time(utc, at)
        out.append((mid, record))
    return sorted(out, key=lambda r: r[0])


def mention_rows(
    mentions: Sequence[str], given: Mapping[str, MentionGiven] | None
) -> tuple[list[dict[str, Any]], list[str]]:
    """A restored memory's mentions split in two: those whose name, type and aliases the backup says this memory
    gave (as rows to write on the edge), and those it does not say (an older backup: they get the entity's own)."""
    said = [
        {"e": e, "name": given[e][0], "type": given[e][1], "aliases": list(given[e][2])}
        for e in mentions
        if given and e in given
    ]
    return said, [e for e in mentions if not given or e not in given]


def planned_ends_by_memory(rows: Iterable[Sequence[Any]], utc: Utc) -> dict[str, list[tuple[str, datetime]]]:
    """``(memory id, plan id, end)`` rows grouped by memory, in the rows' order: a planned end always has a date."""
    out: dict[str, list[tuple[str, datetime]]] = {}
    for mid, by, vt in rows:
        end = utc(vt)
        assert end is not None
        out.setdefault(mid, []).append((by, end))
    return out
