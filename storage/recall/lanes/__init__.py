"""Recall lanes, one module each, and the registry that builds them for an engine.

A lane returns ranked memory ids within the query's scopes (``storage.recall.query.Lane``). Adding one is
a module here with the lane class, its factory in ``LANES`` below, and its name in
``storage.recall.recipes.LANES`` (so recipes may weight it); docs/architecture.md walks through an example.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from storage.language.extraction import EntityLexicon
from storage.ports.canonical import CanonicalStore
from storage.ports.embedder import Embedder
from storage.ports.projection import TextSearch, VectorSearch
from storage.recall.lanes.bm25 import Bm25Lane
from storage.recall.lanes.graph import GraphLane
from storage.recall.lanes.vector import VectorLane
from storage.recall.query import Lane


@dataclass(frozen=True, slots=True)
class LaneContext:
    """What a lane may be built from: the ports, the engine's in-memory entity lexicon and ``head``, the number
    of the last committed change (it grows with every commit, so a lane may key what it keeps of the store on
    it)."""

    canonical: CanonicalStore
    text: TextSearch
    vectors: VectorSearch
    embedder: Embedder
    lexicon: EntityLexicon
    head: Callable[[], int]


LaneFactory = Callable[[LaneContext], Lane]

# The registry: name -> factory. Order is the order the lanes run and report in.
LANES: dict[str, LaneFactory] = {
    "bm25": lambda c: Bm25Lane(c.text),
    "vector": lambda c: VectorLane(c.vectors, c.embedder),
    "graph": lambda c: GraphLane(c.canonical, c.lexicon, head=c.head),
}


def build_lanes(context: LaneContext) -> list[Lane]:
    """One instance of every registered lane."""
    return [make(context) for make in LANES.values()]


__all__ = ["LANES", "Bm25Lane", "GraphLane", "LaneContext", "LaneFactory", "VectorLane", "build_lanes"]
