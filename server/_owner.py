"""Finding, and if need be starting, the one process that owns a data directory.

Front-ends (the stdio shim, the HTTP front) call ``ensure_owner`` or ``connect_mcp``. When no owner accepts
connections, one front-end (the holder of the spawn lock) starts ``python -m server daemon`` detached and waits
until it reports ready on a pipe; the others wait for the lock and then find it running. The owner itself
takes the owner lock before it binds its sockets, so even a manual start cannot produce two owners.

Standard library only: the stdio front-end imports this on its fast path.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import select
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

from server._runtime import RuntimePaths

READY = b"ready\n"  # the owner listens
BUSY = b"busy\n"  # another owner holds the lock (it may be shutting down): check again
MAX_LOG_BYTES = 5 * 1024 * 1024
_POLL = 0.05  # how often a waiting front-end re-checks the socket (seconds)


class OwnerUnavailable(RuntimeError):
    """No owner could be reached or started; the message says why and where its log is."""


CANONICAL_ENV = "MNEMOGRAPH_CANONICAL"  # what storage.compose opens (the CLI sets it from --canonical)


def _canonical_name(value: str) -> str:
    """One spelling per canonical store: ``kuzu`` for the embedded one, ``falkordb://host:port/graph`` with
    the defaults written out."""
    value = value.strip()
    if value in ("", "kuzu"):
        return "kuzu"
    parts = urlsplit(value)
    if parts.scheme != "falkordb":
        return value
    try:
        port = parts.port or 6379
    except ValueError:
        return value
    return f"falkordb://{parts.hostname}:{port}/{parts.path.strip('/') or 'mnemograph'}"


def canonical_in_use() -> str:
    """The canonical store this process would open (and an owner it starts serves)."""
    return _canonical_name(os.environ.get(CANONICAL_ENV, ""))


def canonical_conflict(paths: RuntimePaths) -> str | None:
    """Why the owner running on ``paths.data_dir`` must not serve this process: it was started on another
    canonical store (``serve --canonical`` given differently, or not at all), so requests relayed to it would
    read and write that store, not the one asked for. None when none runs, or it serves the same one."""
    try:
        info = json.loads(paths.info_file.read_text())
    except (OSError, ValueError):
        return None
    running = info.get("canonical") if isinstance(info, dict) else None
    if not isinstance(running, str):
        return None  # an owner of an earlier version, which did not say
    wanted = canonical_in_use()
    if _canonical_name(running) == wanted:
        return None
    return (
        f"a Mnemograph server already serves {paths.data_dir} on the canonical store {_canonical_name(running)}, "
        f"not {wanted}; stop it first (`mnemograph stop --data-dir {shlex.quote(str(paths.data_dir))}`), or give the same "
        "--canonical (MNEMOGRAPH_CANONICAL) as it was started with"
    )


def settings_differences(paths: RuntimePaths, wanted: dict[str, str]) -> list[tuple[str, str, str]]:
    """The owner settings (``server.settings.owner_settings``) that the owner running on ``paths.data_dir`` was
    started with differently from ``wanted``: ``(name, running value, wanted value)``. Empty when none runs or
    it is of an earlier version that did not record them."""
    try:
        info = json.loads(paths.info_file.read_text())
    except (OSError, ValueError):
        return []
    running = info.get("settings") if isinstance(info, dict) else None
    if not isinstance(running, dict):
        return []
    return [(k, str(running[k]), v) for k, v in wanted.items() if k in running and str(running[k]) != v]


def connect_mcp(paths: RuntimePaths) -> socket.socket | None:
    """A connection to the owner's MCP socket, or None when no owner is accepting."""
    return _connect(paths.mcp_socket)


def owner_accepting(paths: RuntimePaths) -> bool:
    """True when an owner accepts connections on its HTTP socket right now."""
    sock = _connect(paths.http_socket)
    if sock is None:
        return False
    sock.close()
    return True


def connect_or_start(paths: RuntimePaths, *, timeout: float) -> socket.socket:
    """A connection to the owner's MCP socket, starting the owner first if none is running."""
    sock = connect_mcp(paths)
    if sock is None:
        ensure_owner(paths, timeout=timeout)
        sock = connect_mcp(paths)
    if sock is None:  # it exited between reporting ready and our connect (idle exit, a kill): try once more
        ensure_owner(paths, timeout=timeout)
        sock = connect_mcp(paths)
    if sock is None:
        raise OwnerUnavailable(f"the owner of {paths.data_dir} keeps going away; see {paths.log_file}")
    conflict = canonical_conflict(paths)
    if conflict is not None:
        sock.close()
        raise OwnerUnavailable(conflict)
    return sock


def ensure_owner(paths: RuntimePaths, *, timeout: float) -> None:
    """Return once an owner accepts connections for ``paths.data_dir``, starting one if needed.

    Safe to call from many processes at once: one of them starts the owner, the others wait for it.
    Raises OwnerUnavailable after ``timeout`` seconds, naming the owner's log file.
    """
    paths.ensure()
    if not owner_accepting(paths):
        deadline = time.monotonic() + timeout
        with _locked(paths.spawn_lock, deadline):
            while not owner_accepting(paths):
                if time.monotonic() > deadline:
                    raise OwnerUnavailable(
                        f"no owner for {paths.data_dir} started within {timeout:g}s; see {paths.log_file}"
                    )
                _start_and_wait(paths, deadline)
    conflict = canonical_conflict(paths)
    if conflict is not None:
        raise OwnerUnavailable(conflict)


def owner_command(paths: RuntimePaths, ready_fd: int) -> list[str]:
    """The command line that starts a detached owner for ``paths.data_dir``."""
    return [
        sys.executable,
        "-P",  # never the working directory on sys.path: a project's own `server/` must not shadow ours
        "-m",
        "server",
        "daemon",
        "--data-dir",
        str(paths.data_dir),
        "--detach",
        "--ready-fd",
        str(ready_fd),
    ]


def _start_and_wait(paths: RuntimePaths, deadline: float) -> None:
    _rotate(paths.log_file)
    read_end, write_end = os.pipe()
    try:
        with open(paths.log_file, "ab") as log:
            # The owner forks away at once (--detach) so it is nobody's child; this process reaps the parent.
            child = subprocess.Popen(
                owner_command(paths, write_end),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                pass_fds=(write_end,),
                start_new_session=True,
                cwd=paths.root,
            )
        os.close(write_end)
        write_end = -1
        child.wait()
        report = _read_report(read_end, paths, deadline)
    finally:
        os.close(read_end)
        if write_end != -1:
            os.close(write_end)
    if report is None or report in (READY, BUSY):
        return  # ready, timed out, or another owner holds the lock: the caller re-checks the socket
    detail = report.decode("utf-8", "replace").strip() or "it exited without saying why"
    raise OwnerUnavailable(f"the owner of {paths.data_dir} could not start: {detail}\n{tail(paths.log_file)}")


def _read_report(fd: int, paths: RuntimePaths, deadline: float) -> bytes | None:
    """The owner's one-line report on the ready pipe (READY, BUSY or an error; b"" at EOF), or None when the
    socket started accepting first or the deadline passed."""
    buf = b""
    while time.monotonic() < deadline:
        readable, _, _ = select.select([fd], [], [], _POLL)
        if readable:
            chunk = os.read(fd, 4096)
            buf += chunk
            if not chunk or buf.endswith(b"\n"):
                return buf
        elif owner_accepting(paths):
            return None
    return None


@contextlib.contextmanager
def _locked(path: Path, deadline: float) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise OwnerUnavailable(
                        f"timed out waiting for another process to start the owner ({path})"
                    ) from None
                time.sleep(_POLL)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _connect(path: Path) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(os.fspath(path))
    except (FileNotFoundError, ConnectionRefusedError):
        sock.close()
        return None
    except OSError:
        sock.close()
        raise
    return sock


def _rotate(log: Path) -> None:
    # Owners append to one log across restarts; keep it (and its one predecessor) bounded.
    try:
        if log.stat().st_size > MAX_LOG_BYTES:
            log.replace(log.with_suffix(".log.1"))
    except FileNotFoundError:
        pass


def tail(path: Path, lines: int = 20) -> str:
    """The last lines of a log file, for error messages ("" when unreadable)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 8192))
            return b"\n".join(f.read().splitlines()[-lines:]).decode("utf-8", "replace")
    except OSError:
        return ""
