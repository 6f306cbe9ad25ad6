"""The last change sequence a projection has applied, kept in a small file beside it.

Written only after the projection's own commit, so it can lag (replay is idempotent) but never lead.
"""

from __future__ import annotations

import os
from pathlib import Path


class Watermark:
    def __init__(self, path: Path) -> None:
        self._path = path
        try:
            self._value = int(path.read_text().strip() or 0)
        except (FileNotFoundError, ValueError):
            self._value = 0

    @property
    def value(self) -> int:
        return self._value

    def set(self, value: int) -> None:
        tmp = self._path.with_suffix(".tmp")
        tmp.write_text(str(value))
        os.replace(tmp, self._path)
        self._value = value
