"""A progress bar on stderr for long CLI operations, drawn only when stderr is a terminal.

Piped or redirected, nothing is written (no ``\\r``, no escape codes), so scripts and logs see only the result
line. No dependency: one line redrawn with a carriage return, at most every ``_MIN_INTERVAL`` seconds.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

_WIDTH = 30
_MIN_INTERVAL = 0.1
_SPIN = "|/-\\"


class Progress:
    """``update(phase, done, total)`` from any thread; ``close()`` ends the line. A no-op when not a terminal."""

    def __init__(self, label: str, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = _is_tty(self.stream)
        self.label = label
        self._lock = threading.Lock()
        self._last = 0.0
        self._started = time.monotonic()
        self._tick = 0
        self._drawn = False

    def update(self, phase: str, done: int, total: int | None = None, *, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        with self._lock:
            if not force and now - self._last < _MIN_INTERVAL and (total is None or done < total):
                return
            self._last = now
            self._tick += 1
            elapsed = int(now - self._started)
            if total:
                filled = min(_WIDTH, _WIDTH * done // total)
                bar = "#" * filled + "." * (_WIDTH - filled)
                text = f"{self.label}: {phase} [{bar}] {done}/{total} {100 * done // total:3d}%"
            else:
                count = f" {done}" if done else ""
                text = f"{self.label}: {phase} {_SPIN[self._tick % len(_SPIN)]}{count} ({elapsed}s)"
            self.stream.write("\r" + text + "\x1b[K")
            self.stream.flush()
            self._drawn = True

    def callback(self) -> Callable[[str, int, int], None]:
        return lambda phase, done, total: self.update(phase, done, total)

    def close(self) -> None:
        with self._lock:
            if self.enabled and self._drawn:
                self.stream.write("\r\x1b[K")  # the result line that follows replaces the bar
                self.stream.flush()
            self.enabled = False


def while_waiting(
    label: str, work: Callable[[], Any], poll: Callable[[], dict[str, Any] | None] | None = None
) -> Any:
    """Run ``work()`` showing activity on a terminal; ``poll()`` may give ``{"phase", "done", "total"}``."""
    bar = Progress(label)
    if not bar.enabled:
        return work()
    stop = threading.Event()

    def draw() -> None:
        bar.update("starting", 0, None, force=True)  # at once: a short operation still shows it ran
        while not stop.wait(0.2):  # the redraw interval, not a wait for the work
            state = None
            if poll is not None:
                try:
                    state = poll()
                except Exception:  # a progress poll never fails the operation
                    state = None
            if state:
                bar.update(str(state.get("phase", "working")), int(state.get("done", 0)), state.get("total"))
            else:
                bar.update("working", 0, None, force=True)

    thread = threading.Thread(target=draw, daemon=True)
    thread.start()
    try:
        return work()
    finally:
        stop.set()
        thread.join()
        bar.close()


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
