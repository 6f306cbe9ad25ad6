"""Where the owner of a data directory listens, and the locks that keep it unique.

Unix socket paths are limited to about 107 bytes, and data directories can be arbitrarily deep. So the
sockets live in a short per-user runtime directory, in a subdirectory named by a hash of the data
directory's resolved path: every process that resolves the same data directory finds the same owner.

Standard library only: the stdio front-end imports this on its fast path.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

MAX_SOCKET_PATH = 100  # sun_path is 108 bytes on Linux, 104 on macOS; keep a margin for the NUL


class RuntimeDirError(RuntimeError):
    """The runtime directory is unusable (not ours, too open, or its path too long for a socket)."""


@dataclass(frozen=True, slots=True)
class RuntimePaths:
    """The files of one data directory's owner. All live in ``root``, a private (0700) directory."""

    data_dir: Path
    root: Path

    @classmethod
    def of(cls, runtime_dir: Path, data_dir: Path) -> RuntimePaths:
        resolved = data_dir.expanduser().resolve()
        key = hashlib.sha256(str(resolved).encode("utf-8", "surrogateescape")).hexdigest()[:16]
        paths = cls(resolved, runtime_dir / key)
        longest = max(len(os.fsencode(p)) for p in (paths.mcp_socket, paths.http_socket))
        if longest > MAX_SOCKET_PATH:
            raise RuntimeDirError(
                f"runtime directory {runtime_dir} is too long for Unix sockets ({longest} > {MAX_SOCKET_PATH} "
                "bytes); set MNEMOGRAPH_RUNTIME_DIR to a shorter path"
            )
        return paths

    @property
    def mcp_socket(self) -> Path:
        """Newline-delimited JSON-RPC: one MCP session per connection (the stdio front-ends)."""
        return self.root / "mcp.sock"

    @property
    def http_socket(self) -> Path:
        """HTTP/1.1: streamable HTTP at /mcp, /healthz, and the owner's admin routes under /-/."""
        return self.root / "http.sock"

    @property
    def owner_lock(self) -> Path:
        """Held (flock) by the owner for its whole life: at most one owner per data directory."""
        return self.root / "owner.lock"

    @property
    def spawn_lock(self) -> Path:
        """Held by a front-end while it starts an owner, so concurrent front-ends start only one."""
        return self.root / "spawn.lock"

    @property
    def info_file(self) -> Path:
        """JSON about the running owner (pid, data directory, version), for diagnostics and tests."""
        return self.root / "owner.json"

    @property
    def log_file(self) -> Path:
        """The owner's stderr."""
        return self.root / "owner.log"

    def ensure(self) -> None:
        """Create the runtime directories (0700) and check that they are ours and private.

        Raises RuntimeDirError otherwise: another user who controls the directory could impersonate the owner.
        """
        for directory in (self.root.parent, self.root):
            try:
                directory.mkdir(mode=0o700, exist_ok=True)
                info = directory.lstat()
            except OSError as exc:
                raise RuntimeDirError(f"cannot create runtime directory {directory}: {exc.strerror}") from exc
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
                raise RuntimeDirError(f"runtime directory {directory} is not a directory owned by this user")
            if info.st_mode & 0o077:
                raise RuntimeDirError(
                    f"runtime directory {directory} is accessible to other users (mode {oct(info.st_mode & 0o777)});"
                    " run: chmod 700 " + str(directory)
                )
