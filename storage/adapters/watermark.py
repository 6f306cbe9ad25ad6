"""The last change sequence a projection has applied, kept in a small file beside it.

Written only after the projection's own commit, so it can lag (replay is idempotent) but never lead. Each write
is durable and atomic (``write_durably``): a crash or power loss at any moment leaves the old value or the new
one, never an empty or half-written file. A file that is there but cannot be read as a sequence number (a
truncated or scrambled file, a directory planted at its path) is ``damaged``: the projection is then not
trusted, and the engine rebuilds it from the canonical store at open.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from storage._durable import write_durably

log = logging.getLogger("mnemograph.projections")


class Watermark:
    def __init__(self, path: Path) -> None:
        self._path = path
        self.damaged: str | None = None  # why the file found at open could not be read, if it could not
        self._value = 0
        try:
            text = path.read_text(encoding="ascii").strip()
        except FileNotFoundError:
            return  # never written: the projection is new (or was deleted whole), replay or rebuild decides
        except (OSError, ValueError) as exc:
            self.damaged = f"its watermark {path} cannot be read ({type(exc).__name__}: {exc})"
        else:
            if text.isdigit():
                self._value = int(text)
            else:
                self.damaged = f"its watermark {path} is not a change number ({text[:40]!r})"
        if self.damaged:
            log.warning("%s; the projection will be rebuilt from the canonical store", self.damaged)

    @property
    def value(self) -> int:
        return self._value

    def set(self, value: int) -> None:
        if self._path.is_dir():  # a directory planted at its path (found damaged at open): out of the way
            shutil.rmtree(self._path)
        write_durably(self._path, str(value))
        self._value = value
        self.damaged = None
