"""Session-level ranking over unit-level recall lists: collapse, fuse, time windows, recency.

A conversation is stored as many small units (turns, rounds, a session digest), because small units retrieve
well; but the caller usually wants the *conversation* (the session) back, ranked. These are pure functions
over ranked id lists, so a recipe can apply them after the lanes have run; no I/O, no LLM.

Measured on LongMemEval_S (bench/longmemeval.py, docs/benchmarks/longmemeval.md): collapsing each lane's unit
list to sessions before fusing ranks the right session first far more often than fusing units and taking
each session's best unit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from storage.timeparse import find_times

Aggregate = Literal["max", "sum"]


@dataclass(frozen=True, slots=True)
class SessionRecipe:
    """How unit lists become one session ranking.

    ``weights`` name the unit lists (e.g. ``"bm25:turn"``, ``"vector:session"``); a missing or zero weight
    drops that list. Each list is collapsed to sessions (a session scores the best ``top_n`` of its units,
    each ``1 / (unit_k + rank)``; ``aggregate="max"`` keeps only the best), the collapsed lists are fused by
    weighted RRF with ``rrf_k``, and then two rules may adjust the fused score:

    * ``time_boost``: sessions whose time falls in a window the query names ("last Saturday", "in May",
      "two weeks ago", resolved against the query's ``now``) gain this fraction of the top score;
    * ``recency``: when the query asks for the current state ("now", "currently", "latest", ...), the newest
      sessions gain up to this fraction of the top score, scaled by their age rank among the candidates.
    """

    weights: Mapping[str, float]
    rrf_k: float = 60.0
    unit_k: float = 60.0
    aggregate: Aggregate = "sum"
    top_n: int = 3
    time_boost: float = 0.0
    time_slack: timedelta = timedelta(days=1)
    recency: float = 0.0
    notes: dict[str, str] = field(default_factory=dict)


def collapse(
    ranked: Sequence[str],
    sessions_of: Callable[[str], Iterable[str]],
    *,
    unit_k: float = 60.0,
    aggregate: Aggregate = "max",
    top_n: int = 1,
) -> list[str]:
    """Sessions in the order their units rank them: ``max`` = first appearance; ``sum`` = the sum of the
    best ``top_n`` unit contributions ``1 / (unit_k + rank)``. Ties keep first-appearance order."""
    contrib: dict[str, list[float]] = {}
    for rank, unit in enumerate(ranked, start=1):
        for s in sessions_of(unit):
            contrib.setdefault(s, []).append(1.0 / (unit_k + rank))
    first = {s: i for i, s in enumerate(contrib)}
    if aggregate == "max" or top_n <= 1:
        return list(contrib)
    score = {s: sum(sorted(v, reverse=True)[:top_n]) for s, v in contrib.items()}
    return sorted(contrib, key=lambda s: (-score[s], first[s]))


def fuse(lists: Mapping[str, Sequence[str]], weights: Mapping[str, float], rrf_k: float) -> dict[str, float]:
    """Weighted reciprocal rank fusion of session lists: sum of ``weight / (rrf_k + rank)``."""
    out: dict[str, float] = {}
    for name, ids in lists.items():
        w = weights.get(name, 0.0)
        if w <= 0:
            continue
        for rank, s in enumerate(ids, start=1):
            out[s] = out.get(s, 0.0) + w / (rrf_k + rank)
    return out


def query_windows(query: str, now: datetime) -> list[tuple[datetime, datetime]]:
    """The time windows a query names, resolved against ``now``; "before"/"after" mentions are open-ended
    on one side."""
    out = []
    for m in find_times(query, now):
        if m.direction == "before":
            out.append((datetime.min.replace(tzinfo=m.lo.tzinfo), m.lo))
        elif m.direction == "after":
            out.append((m.hi, now))
        else:
            out.append((m.lo, m.hi))
    return out


_CURRENT = (
    " now",
    "current",
    "currently",
    "latest",
    "most recent",
    "these days",
    "at the moment",
    "still",
    "anymore",
    "so far",
)


def asks_current(query: str) -> bool:
    """True when the query asks for the present state of something (the newest mention should win)."""
    q = f" {query.lower()}"
    return any(c in q for c in _CURRENT)


def rank_sessions(
    lists: Mapping[str, Sequence[str]],
    recipe: SessionRecipe,
    *,
    sessions_of: Callable[[str], Iterable[str]],
    session_time: Mapping[str, datetime],
    query: str,
    now: datetime,
) -> list[tuple[str, float]]:
    """Sessions, best first, with their scores. ``lists`` maps a list name to unit ids, best first;
    ``session_time`` gives each session's time (its date)."""
    collapsed = {
        name: collapse(
            units, sessions_of, unit_k=recipe.unit_k, aggregate=recipe.aggregate, top_n=recipe.top_n
        )
        for name, units in lists.items()
        if recipe.weights.get(name, 0.0) > 0
    }
    score = fuse(collapsed, recipe.weights, recipe.rrf_k)
    if not score:
        return []
    top = max(score.values())
    if recipe.time_boost > 0:
        windows = query_windows(query, now)
        if windows:
            slack = recipe.time_slack
            for s in score:
                t = session_time.get(s)
                if t is not None and any(lo - slack <= t < hi + slack for lo, hi in windows):
                    score[s] += recipe.time_boost * top
    if recipe.recency > 0 and asks_current(query):
        dated = sorted((s for s in score if s in session_time), key=lambda s: session_time[s], reverse=True)
        n = len(dated)
        for i, s in enumerate(dated):
            score[s] += recipe.recency * top * (1 - i / n) * (score[s] / top)
    return sorted(score.items(), key=lambda kv: (-kv[1], kv[0]))
