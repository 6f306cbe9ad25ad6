"""Keeping a data directory private to the user who runs Mnemograph.

Every memory, vector, index segment, log line and token hash lives under the data directory, so its
permissions are the boundary against other local accounts. The entry points set a process umask of 0o077
(``server.cli``), so what the stores create is born 0600/0700; ``make_private`` also takes group and
other access away from what is already there (data directories made by older versions, files copied in, an
export written over an existing file).

Standard library only.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

PRIVATE_UMASK = 0o077


def make_private(path: Path) -> None:
    """Create ``path`` as a 0700 directory if it is missing, then remove group and other permissions from it
    and from every file and directory under it that this user owns (symbolic links are not followed).
    A single file ``path`` is made 0600-like the same way."""
    if not path.exists() and not path.is_symlink():
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    _restrict(path)
    if not path.is_dir() or path.is_symlink():
        return
    uid = os.getuid()
    for root, dirs, files in os.walk(path, followlinks=False):
        for name in (*dirs, *files):
            _restrict(Path(root, name), uid)


def _restrict(path: Path, uid: int | None = None) -> None:
    try:
        info = path.lstat()
    except FileNotFoundError:  # a store removed a file while we walked (compaction): nothing to protect
        return
    if stat.S_ISLNK(info.st_mode) or info.st_uid != (os.getuid() if uid is None else uid):
        return
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077:
        try:
            os.chmod(path, mode & 0o700)
        except FileNotFoundError:
            return
