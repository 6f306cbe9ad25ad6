"""The stores one engine is built from: the canonical store and its projections (wired by ``storage.compose``)."""

from __future__ import annotations

from dataclasses import dataclass

from storage.ports.canonical import CanonicalStore
from storage.ports.projection import Projection, TextSearch, VectorSearch


@dataclass(frozen=True, slots=True)
class Stores:
    """One data directory's stores. ``projections`` are what the reconciler feeds, in report order."""

    canonical: CanonicalStore
    vectors: VectorSearch  # the vector lane searches it
    text: TextSearch  # the bm25 lane searches it
    extra: tuple[Projection, ...] = ()  # any further projection, fed and verified like the two above

    @property
    def projections(self) -> list[Projection]:
        return [self.vectors, self.text, *self.extra]
