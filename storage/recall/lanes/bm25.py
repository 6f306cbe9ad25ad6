"""The ``bm25`` lane: exact names, numbers and rare words, from the text projection."""

from __future__ import annotations

from dataclasses import dataclass

from storage.ports.projection import TextSearch
from storage.recall.query import Found, Query, lane_live_only
from storage.recall.recipes import Recipe


@dataclass
class Bm25Lane:
    index: TextSearch
    name: str = "bm25"

    def prepare(self, q: Query) -> Query:
        return q

    def search(self, q: Query, depth: int, recipe: Recipe) -> Found:
        kinds = [k.value for k in q.kinds] if q.kinds else None
        live = lane_live_only(q, recipe)
        hits = self.index.search(q.words, scopes=q.scopes, k=depth, live_only=live, kinds=kinds)
        return Found([i for i, _ in hits])
