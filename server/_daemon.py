"""The owner's start-up steps that must run before anything heavy is imported: detaching from the front-end
that started it, taking the owner lock, and reporting back on the ready pipe.

Standard library only.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import fcntl
import os
import time

from server._owner import BUSY, READY, owner_accepting
from server._runtime import RuntimePaths

_POLL = 0.05

# glibc's ``mallopt`` parameter for how many malloc arenas the threads share (M_ARENA_MAX in malloc.h).
_M_ARENA_MAX = -8
MALLOC_ARENAS = 2


def limit_malloc_arenas(arenas: int = MALLOC_ARENAS) -> bool:
    """Let all of this process's threads share ``arenas`` glibc malloc arenas (``mallopt(M_ARENA_MAX)``).

    glibc gives each thread that allocates while the others hold theirs a new arena, up to 8 per core, and an
    arena keeps the memory its thread freed. The owner runs 30-40 threads (LanceDB's Tokio workers and blocking
    pool, Lance, Tantivy's merges, the engine and model threads), so about ten arenas each held a few MiB of
    free space: idle owner 387-394 MiB, with two arenas 363-369 MiB (docs/benchmarks/coldstart.md). Call it
    before any thread starts; a no-op (False) where the C library is not glibc.
    """
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return False  # musl, macOS: no arenas to limit
    return bool(mallopt(_M_ARENA_MAX, arenas))


def detach() -> None:
    """Fork into the background: the parent exits at once, the child leads a new session.

    The front-end that started the owner reaps the parent immediately; the owner itself is then nobody's child,
    so it leaves no zombie behind when it exits, and outlives the front-end.
    """
    if os.fork() > 0:
        os._exit(0)
    os.setsid()
    os.chdir("/")  # hold no directory busy (all paths are absolute by now)


def take_owner_lock(paths: RuntimePaths, *, timeout: float) -> int | None:
    """Hold the owner lock and return its descriptor (close it to release), or None if another owner keeps it.

    Waits up to ``timeout`` seconds for an owner that is shutting down to let go, but gives up at once when
    another owner is serving: then there is nothing for this process to do.
    """
    paths.ensure()
    fd = os.open(paths.owner_lock, os.O_RDWR | os.O_CREAT, 0o600)
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() > deadline or owner_accepting(paths):
                os.close(fd)
                return None
            time.sleep(_POLL)


class ReadyPipe:
    """The pipe on which a starting owner tells the front-end that started it how start-up went (one line)."""

    def __init__(self, fd: int | None) -> None:
        self._fd = fd

    def ready(self) -> None:
        self._say(READY)

    def busy(self) -> None:
        self._say(BUSY)

    def failed(self, reason: str) -> None:
        self._say(f"error: {' '.join(reason.split())[:500]}\n".encode())

    def _say(self, line: bytes) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        with contextlib.suppress(OSError):  # the front-end gave up waiting: nobody to tell
            os.write(fd, line)
        with contextlib.suppress(OSError):
            os.close(fd)
