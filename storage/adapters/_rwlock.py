"""A small readers-writer lock: many readers, or one exclusive holder (used to swap store files and to checkpoint)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class RWLock:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writer = False
        self._waiting_writers = 0
        self._held = threading.local()  # how many shared holds the calling thread has

    @contextmanager
    def shared(self) -> Iterator[None]:
        depth = getattr(self._held, "depth", 0)
        with self._cond:
            # Writers waiting take precedence so a stream of readers cannot starve a file swap, except over a
            # thread that already reads: the writer waits for that thread's first hold, so making its second
            # wait for the writer would stop both (and every reader after them) for good.
            while self._writer or (self._waiting_writers and not depth):
                self._cond.wait()
            self._readers += 1
        self._held.depth = depth + 1
        try:
            yield
        finally:
            self._held.depth = depth
            with self._cond:
                self._readers -= 1
                if self._readers == 0:
                    self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            self._waiting_writers += 1
            while self._writer or self._readers:
                self._cond.wait()
            self._waiting_writers -= 1
            self._writer = True
        try:
            yield
        finally:
            with self._cond:
                self._writer = False
                self._cond.notify_all()
