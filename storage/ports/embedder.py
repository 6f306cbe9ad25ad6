"""The embedder port: texts in, L2-normalised float32 vectors of a fixed dimension out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

Vectors = npt.NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of a fixed dimension.

    ``name`` and ``dim`` are recorded in the data directory; a directory refuses an embedder whose
    name or dimension differs from the one that built its vectors.
    """

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> Vectors: ...

    def warm(self) -> None: ...
