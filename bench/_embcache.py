"""A persistent embedding cache for benchmarks: SHA-256 of the text -> vector, in append-only shards.

LongMemEval haystacks repeat many filler sessions across questions, and reruns repeat everything, so every
text is embedded once per machine. Shards are ``.npz`` files of (keys, vectors); a crash loses at most the
shard being written. The cache belongs to one embedder (its name is part of the directory).
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from storage import Embedder

SHARD = 4096


def key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:16]


class DiskCache:
    """Vectors by text, loaded from and appended to ``directory``. Not thread-safe; one writer at a time."""

    def __init__(self, directory: Path, embedder: Embedder) -> None:
        self.dir = directory / re.sub(r"[^A-Za-z0-9._-]+", "_", embedder.name)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.embedder = embedder
        self._vecs: dict[bytes, np.ndarray] = {}
        self._pending: dict[bytes, np.ndarray] = {}
        for shard in sorted(self.dir.glob("shard-*.npz")):
            with np.load(shard) as z:
                for k, v in zip(z["keys"], z["vectors"], strict=True):
                    self._vecs[bytes(k)] = v
        self.embedded = 0

    def __len__(self) -> int:
        return len(self._vecs)

    def missing(self, texts: Sequence[str]) -> list[str]:
        seen: set[bytes] = set()
        out = []
        for t in texts:
            k = key(t)
            if k not in self._vecs and k not in seen:
                seen.add(k)
                out.append(t)
        return out

    def fill(
        self, texts: Sequence[str], progress: Callable[[int], None] | None = None, batch: int = 512
    ) -> None:
        """Embed every text not cached yet, longest-similar together (less padding), saving as it goes."""
        todo = sorted(self.missing(texts), key=len)
        for lo in range(0, len(todo), batch):
            part = todo[lo : lo + batch]
            vecs = self.embedder.embed(part)
            for t, v in zip(part, vecs, strict=True):
                self._pending[key(t)] = v
                self._vecs[key(t)] = v
            self.embedded += len(part)
            if len(self._pending) >= SHARD:
                self.flush()
            if progress:
                progress(len(part))
        self.flush()

    def flush(self) -> None:
        if not self._pending:
            return
        n = f"{time.time_ns()}-{os.getpid()}"  # unique: two runs may share the directory
        keys = np.array([np.frombuffer(k, dtype=np.uint8) for k in self._pending], dtype=np.uint8)
        vecs = np.stack(list(self._pending.values())).astype(np.float32)
        tmp = self.dir / f"shard-{n}.tmp.npz"
        np.savez(tmp, keys=keys, vectors=vecs)
        tmp.rename(self.dir / f"shard-{n}.npz")
        self._pending.clear()

    # The Embedder protocol, so an engine can embed its queries from the cache (each question is recalled
    # several times; the question texts are cached with the haystack).

    @property
    def name(self) -> str:
        return self.embedder.name

    @property
    def dim(self) -> int:
        return self.embedder.dim

    def warm(self) -> None:
        self.embedder.warm()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.vectors(texts)

    def get(self, text: str) -> np.ndarray:
        return self._vecs[key(text)]

    def vectors(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for ``texts``, embedding (and caching) the ones not seen before."""
        self.fill(texts)
        return np.stack([self._vecs[key(t)] for t in texts]) if texts else np.zeros((0, self.embedder.dim))
