"""Giving freed heap memory back to the operating system after a burst of native allocations.

LanceDB's compaction, Tantivy's merges and Kùzu's commits allocate through glibc's malloc in worker threads;
when they free it, glibc keeps the pages in its per-thread arenas for reuse, so a process that compacted once
holds that memory for good. In the owner after 20 small writes and the compaction that followed them:
anonymous memory 276 MiB, 223 MiB after ``malloc_trim(0)`` (docs/benchmarks/coldstart.md, "Footprint").
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)


def _find_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim: Callable[[int], int] = ctypes.CDLL(name).malloc_trim  # glibc only
    except (OSError, AttributeError):
        return None  # musl, macOS: their allocators return memory on their own terms
    return trim


_TRIM = _find_trim()


def release_free_memory() -> None:
    """Return the C heap's free pages to the OS (glibc ``malloc_trim``); a no-op elsewhere. Takes a few ms."""
    if _TRIM is not None:
        try:
            _TRIM(0)
        except OSError:  # pragma: no cover - defensive: a failed trim costs memory, never correctness
            log.debug("malloc_trim failed", exc_info=True)
