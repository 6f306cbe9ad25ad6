"""The read path: lanes find candidates, reciprocal rank fusion orders them, the canonical store decides.

Each lane returns ranked ids within the allowed scopes. Lanes only narrow; the final word on what is
returned (current vs. superseded, validity at ``as_of``, event-time window, scope membership) comes from the
canonical records, so a lagging or damaged projection can cost recall quality but never leak or resurrect.
No LLM on this path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from storage._kuzu import GraphStore
from storage._lance import VectorIndex
from storage._tantivy import TextIndex
from storage.embedding import Embedder
from storage.models import Hit, Memory, MemoryKind, Status


@dataclass(frozen=True, slots=True)
class Recipe:
    """How lanes are weighted and fused. Named recipes live in RECIPES; callers pick one by name."""

    name: str
    weights: Mapping[str, float]
    rrf_k: int = 60
    depth: int = 50  # candidates each lane contributes, at least; scaled up with k and filters
    description: str = ""


RECIPES: dict[str, Recipe] = {
    r.name: r
    for r in (
        Recipe("default", {"bm25": 1.0, "vector": 1.0, "graph": 1.0}, description="all lanes, equal weight"),
        Recipe("bm25", {"bm25": 1.0}, description="BM25 lane only (baseline)"),
        Recipe("vector", {"vector": 1.0}, description="vector lane only (baseline)"),
        Recipe("hybrid", {"bm25": 1.0, "vector": 1.0}, description="plain BM25 + vector RRF (baseline)"),
    )
}


@dataclass(frozen=True, slots=True)
class Query:
    text: str
    scopes: tuple[str, ...]
    k: int
    now: datetime
    as_of: datetime | None = None
    include_history: bool = False
    kinds: tuple[MemoryKind, ...] | None = None
    since: datetime | None = None
    until: datetime | None = None

    @property
    def live_only(self) -> bool:
        return not self.include_history and self.as_of is None


class Lane(Protocol):
    name: str

    def search(self, q: Query, depth: int) -> list[str]: ...


@dataclass
class Bm25Lane:
    index: TextIndex
    name: str = "bm25"

    def search(self, q: Query, depth: int) -> list[str]:
        kinds = [k.value for k in q.kinds] if q.kinds else None
        hits = self.index.search(q.text, scopes=q.scopes, k=depth, live_only=q.live_only, kinds=kinds)
        return [i for i, _ in hits]


@dataclass
class VectorLane:
    index: VectorIndex
    embedder: Embedder
    name: str = "vector"
    _cache: dict[str, list[float]] = field(default_factory=dict)

    def search(self, q: Query, depth: int) -> list[str]:
        vec = self.embedder.embed([q.text])[0]
        kinds = [k.value for k in q.kinds] if q.kinds else None
        hits = self.index.search(vec, scopes=q.scopes, k=depth, live_only=q.live_only, kinds=kinds)
        return [i for i, _ in hits]


@dataclass
class GraphLane:
    """Entities named in the query -> memories mentioning them. The seam for the entity-graph work."""

    graph: GraphStore
    name: str = "graph"

    def search(self, q: Query, depth: int) -> list[str]:
        return []


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


def admissible(m: Memory, q: Query) -> bool:
    """The canonical filter: scope, kind, time view and event-time window."""
    if not set(m.scopes) & set(q.scopes):
        return False
    if q.kinds and m.kind not in q.kinds:
        return False
    if q.as_of is not None:
        if not m.valid_at(q.as_of):
            return False
    elif not q.include_history and (m.status is not Status.CURRENT or not m.valid_at(q.now)):
        return False
    if q.since is not None and m.event_time < q.since:
        return False
    return not (q.until is not None and m.event_time >= q.until)


def run(q: Query, lanes: Sequence[Lane], graph: GraphStore, recipe: Recipe) -> list[Hit]:
    """Run every weighted lane, fuse, and keep the first ``k`` candidates the canonical records admit."""
    depth = max(recipe.depth, q.k * 5)
    if not q.live_only or q.since or q.until:
        depth *= 3  # filters applied after fusion drop candidates
    ranked = {lane.name: lane.search(q, depth) for lane in lanes if recipe.weights.get(lane.name, 0.0) > 0}
    fused = fuse(ranked, recipe)
    hits: list[Hit] = []
    with graph.read() as conn:
        step = max(20, 2 * q.k)  # records are fetched one key at a time: fetch only what may be needed
        for start in range(0, len(fused), step):
            chunk = fused[start : start + step]
            records = graph.fetch(conn, [m for m, _, _ in chunk])
            for mid, score, lanes_found in chunk:
                mem = records.get(mid)
                if mem is not None and admissible(mem, q):
                    hits.append(Hit(memory=mem, score=score, lanes=lanes_found))
                    if len(hits) == q.k:
                        return hits
    return hits
