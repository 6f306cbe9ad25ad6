"""How the local stores keep a vector on disk: half precision (IEEE float16) scaled by a power of two.

A 384-d float32 vector is 1,536 bytes, and a local store held it twice (the canonical copy in Kùzu, the search
copy in LanceDB): 3.2 KB of the 5.7 KB a memory took at 10,000 memories after maintenance
(docs/benchmarks/scale.md). Half precision halves both, and the two copies are the same bytes, so a vector
table rebuilt from the canonical store is bit for bit the one the writes projected, and recall ranks the same
before and after a rebuild.

What it costs: each number keeps 11 significant bits (a relative error of at most 2**-12, about 2.4e-4); the
cosine between a vector and what is kept of it is above 0.9999999, a hundred times closer than the two
runtimes of the bundled model agree (1e-5, docs/mcp.md). Only the direction counts for recall (every
comparison is a cosine), but the length is kept too: the vector is scaled by ``2**-exp`` so that its largest
number lies in (0.5, 1] before rounding, which makes the encoding independent of the vector's length (a
supplied vector of large or tiny numbers neither overflows nor falls into float16's subnormals) and exact to
undo (a power of two). ``encode(decode(encode(v)))`` is ``encode(v)``, byte for byte: a vector read back and
written again (an export imported, a rebuild) is stored exactly as it was.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

HALF = np.dtype("<f2")


def encode(vector: Sequence[float] | np.ndarray) -> tuple[int, np.ndarray]:
    """``(exp, halves)``: little-endian float16 numbers whose value times ``2**exp`` is the vector, to half
    precision. The largest magnitude among ``halves`` is in (0.5, 1] (all zeros for a zero vector)."""
    v = np.asarray(vector, dtype=np.float64)
    top = float(np.max(np.abs(v))) if v.size else 0.0
    if top == 0.0 or not math.isfinite(top):
        return 0, v.astype(HALF)
    exp = math.ceil(math.log2(top))
    if math.ldexp(top, -exp) > 1.0:  # log2 rounded down at an exact power of two
        exp += 1
    halves = np.ldexp(v, -exp).astype(HALF)
    if float(np.max(np.abs(halves))) == 0.5:
        # The largest rounded down to 0.5: scale by one more so that it lands in (0.5, 1] again, as it will
        # when the decoded vector is encoded (the fixed point that makes the encoding idempotent).
        exp -= 1
        halves = np.ldexp(v, -exp).astype(HALF)
    return exp, halves


def decode(exp: int, halves: np.ndarray) -> np.ndarray:
    """The float32 vector ``encode`` kept."""
    return np.ldexp(halves.astype(np.float32), exp).astype(np.float32)


def stored_bytes(vector: Sequence[float] | np.ndarray) -> bytes:
    """The bytes a local store writes for ``vector`` (what an erasure must leave nowhere)."""
    return encode(vector)[1].tobytes()


def as_int16(halves: np.ndarray) -> list[int]:
    """The float16 numbers as the UINT16 list Kùzu stores (same bits: Kùzu has no float16 type). Unsigned: Kùzu
    0.11 dropped the sign bit of negative INT16 list values written by ``SET`` into a bit-packed column."""
    return list(halves.view("<u2").tolist())


def from_int16(values: Sequence[int]) -> np.ndarray:
    return np.asarray(values, dtype="<u2").view(HALF)
