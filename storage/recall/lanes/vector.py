"""The ``vector`` lane: paraphrase, from the vector projection and the embedder."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from storage.ports.embedder import Embedder
from storage.ports.projection import VectorSearch
from storage.recall.query import Found, Query, lane_live_only
from storage.recall.recipes import Recipe


@dataclass
class VectorLane:
    index: VectorSearch
    embedder: Embedder
    name: str = "vector"

    def prepare(self, q: Query) -> Query:
        """Embed the query. Alone on the cores: torch splits one query over both, and a thread that has to
        wait for a core (another lane's search) stalls the whole step."""
        return q if q.vector is not None else replace(q, vector=self.embedder.embed([q.words])[0])

    def search(self, q: Query, depth: int, recipe: Recipe) -> Found:
        vec = self.prepare(q).vector
        assert vec is not None
        kinds = [k.value for k in q.kinds] if q.kinds else None
        want = (
            recipe.dedup_cosine is not None
        )  # the rows' vectors come with them: near-duplicates fold for free
        live = lane_live_only(q, recipe)
        hits, matrix = self.index.search_with_vectors(
            vec, scopes=q.scopes, k=depth, live_only=live, kinds=kinds, vectors=want
        )
        ids = [i for i, _ in hits]
        if matrix is None or not ids:
            return Found(ids)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        unit = matrix / np.where(norms == 0, 1.0, norms)
        return Found(ids, vectors=dict(zip(ids, unit, strict=True)))
