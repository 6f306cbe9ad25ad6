"""Retrieval metrics over ranked session ids (LongMemEval's session-level ``recall_any``) and their means."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

METRICS = ("R@1", "R@5", "R@10", "NDCG@10", "MRR", "turn R@10")


def recall_any(ranked: Sequence[str], truth: frozenset[str], k: int) -> float:
    return float(any(s in truth for s in ranked[:k]))


def ndcg(ranked: Sequence[str], truth: frozenset[str], k: int = 10) -> float:
    """Binary-relevance NDCG@k with the usual 1/log2(rank + 1) discount; the ideal list puts every
    evidence session first (so a multi-session question needs all its sessions near the top)."""
    dcg = sum(1.0 / math.log2(i + 2) for i, s in enumerate(ranked[:k]) if s in truth)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(k, len(truth))))
    return dcg / ideal if ideal else 0.0


def mrr(ranked: Sequence[str], truth: frozenset[str]) -> float:
    return next((1.0 / i for i, s in enumerate(ranked, start=1) if s in truth), 0.0)


@dataclass(frozen=True, slots=True)
class Scores:
    values: dict[str, float]

    @classmethod
    def of(
        cls, sessions: Sequence[str], truth: frozenset[str], turns: Sequence[str], truth_turns: frozenset[str]
    ) -> Scores:
        v = {
            "R@1": recall_any(sessions, truth, 1),
            "R@5": recall_any(sessions, truth, 5),
            "R@10": recall_any(sessions, truth, 10),
            "NDCG@10": ndcg(sessions, truth),
            "MRR": mrr(sessions, truth),
        }
        if truth_turns:
            v["turn R@10"] = recall_any(turns, truth_turns, 10)
        return cls(v)


def mean(rows: Sequence[Scores]) -> dict[str, float]:
    """Per-metric means; a metric a question lacks (turn recall without marked turns) is left out of its mean."""
    out: dict[str, float] = {}
    for m in METRICS:
        vals = [r.values[m] for r in rows if m in r.values]
        if vals:
            out[m] = sum(vals) / len(vals)
    return out
