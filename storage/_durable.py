"""Small state files (watermarks, the record of which canonical store the projections mirror, pointers to the
current index), written so that a crash or power loss at any moment leaves the old content or the new, never an
empty or partial file. Standard library only: outside the storage layers, so the engine and the adapters share it
(neither may import the other)."""

from __future__ import annotations

import os
from pathlib import Path


def write_durably(path: Path, text: str) -> None:
    """Temporary file beside ``path``, fsync, rename over ``path``, fsync of the directory."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, text.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_directory(path.parent)


def fsync_directory(directory: Path) -> None:
    """Make the entries of ``directory`` (a rename, a new file) durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
