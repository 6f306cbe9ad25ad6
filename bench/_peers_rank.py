"""How bench/peers.py scores a server: its returned memories mapped back to sessions, and the figures it reports.

Every server is scored the same way. At write time the benchmark records, for each call, the key it will see
again in search results (the content itself, or a name or id the benchmark chose or the server returned for that
call) and the session the memory came from. A search result list becomes a session ranking by that record alone,
never by a field only one server has: a session ranks where its first memory appears. Results the benchmark did
not write (nothing should) are skipped. Metrics are LongMemEval's session-level ``recall_any@5`` and NDCG@10
(``_lme_metrics``).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from _lme_metrics import ndcg, recall_any


@dataclass
class Written:
    """key -> the sessions whose memories produced it (one text can recur in two sessions, and a server that
    de-duplicates by content then holds one memory for both)."""

    sessions_of: dict[str, list[str]] = field(default_factory=dict)

    def record(self, key: str, session: str) -> None:
        sessions = self.sessions_of.setdefault(key, [])
        if session not in sessions:
            sessions.append(session)

    def rank(self, keys: Iterable[str]) -> list[str]:
        """The sessions of ``keys`` (best first), each where its first memory appears."""
        out: dict[str, None] = {}
        for key in keys:
            for session in self.sessions_of.get(key, ()):
                out.setdefault(session, None)
        return list(out)


def scores(ranked_sessions: Sequence[str], truth: frozenset[str]) -> dict[str, float]:
    return {"R@5": recall_any(ranked_sessions, truth, 5), "NDCG@10": ndcg(ranked_sessions, truth, 10)}


def quantile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default); NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else float("nan")
