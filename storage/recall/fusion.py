"""Weighted reciprocal rank fusion of the lanes' rankings, and the graph rule's bonus for statements on a path."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from storage.recall.query import Found
from storage.recall.recipes import Recipe


def fuse(ranked: Mapping[str, Sequence[str]], recipe: Recipe) -> list[tuple[str, float, dict[str, int]]]:
    """Weighted reciprocal rank fusion: score = sum over lanes of weight / (rrf_k + rank)."""
    scores: dict[str, float] = {}
    ranks: dict[str, dict[str, int]] = {}
    for lane, ids in ranked.items():
        weight = recipe.weights.get(lane, 0.0)
        if weight <= 0:
            continue
        for rank, mid in enumerate(ids, start=1):
            scores[mid] = scores.get(mid, 0.0) + weight / (recipe.rrf_k + rank)
            ranks.setdefault(mid, {})[lane] = rank
    order = sorted(scores, key=lambda m: (-scores[m], m))
    return [(m, scores[m], ranks[m]) for m in order]


def _with_paths(
    fused: list[tuple[str, float, dict[str, int]]], found: Mapping[str, Found], recipe: Recipe
) -> list[tuple[str, float, dict[str, int]]]:
    """``GraphRule.path_weight``: a memory that states a relation on a path from an entity the query names
    (the hotel is in Udaipur, Udaipur is in Rajasthan) gains ``path_weight / (rrf_k + hops)``. Such a statement
    is the answer to a multi-hop question, yet it shares no words with it. Only statements two or more hops
    out count: one hop out, the statement names the query's own entity, so the word and vector lanes rank it
    already, and now that the offline extractor records relations for ordinary facts ("Sam works at
    Initech"), a bonus there would lift every fact about a person named in the query above what was asked."""
    weight = recipe.graph.path_weight * (recipe.weights.get("graph", 0.0) > 0)
    hops: dict[str, int] = {}
    for f in found.values():
        for mid, h in f.statements.items():
            if h >= 2:
                hops[mid] = min(h, hops.get(mid, h))
    if not hops or weight <= 0:
        return fused
    scored = [(m, s + weight / (recipe.rrf_k + hops[m]) if m in hops else s, lanes) for m, s, lanes in fused]
    return sorted(scored, key=lambda e: (-e[1], e[0]))
