"""``mnemograph status`` and ``stop``: the owners running for this user, and stopping one cleanly.

Each owner leaves ``owner.json`` in its runtime subdirectory while it serves; its private HTTP socket answers
``/healthz`` with its pid, data directory and how many clients (stdio sessions, HTTP fronts, requests) it has,
and which HTTP fronts hold it up (a front starts a new owner when its owner stops, so ``stop`` stops them too).
Stopping sends SIGTERM, on which the owner stops listening, lets requests in flight finish, drains queued
writes and closes the stores; ``stop`` returns once the process has exited.

Standard library only.
"""

from __future__ import annotations

import contextlib
import fcntl
import http.client
import json
import os
import signal
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from server._runtime import RuntimePaths


@dataclass(frozen=True, slots=True)
class OwnerStatus:
    pid: int
    data_dir: str
    version: str
    started_at: float
    clients: int | None  # None when the owner did not answer
    sessions: int | None
    fronts: tuple[dict[str, Any], ...]  # the HTTP fronts (serve --transport http, ui) holding it up
    engine: str
    log_file: str
    paths: RuntimePaths
    problem: str | None = None  # why the store is not ready (still opening, unreachable, failed)
    settings: dict[str, str] | None = None  # what it applies to every client (server.settings.owner_settings)


def running_owners(runtime_dir: Path) -> list[OwnerStatus]:
    """Every owner that serves a data directory for this user now, oldest first."""
    out = []
    for info_file in sorted(runtime_dir.glob("*/owner.json")):
        try:
            info = json.loads(info_file.read_text())
            pid = int(info["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if not _alive(pid):
            continue
        paths = RuntimePaths(Path(info["data_dir"]), info_file.parent)
        health = _health(paths)
        if health is None:
            if not _holds_store(paths):
                continue  # a stale file from a killed owner, or one that has released the store
            # Alive, holding the store, and silent: hung (or in the last moments of a stop). It is listed, so
            # that `status` shows it and `stop` can end it (an HTTP client told "outcome unknown" is sent here).
            health = {"engine": "not answering", "problem": NOT_ANSWERING}
        out.append(
            OwnerStatus(
                pid=pid,
                data_dir=str(info["data_dir"]),
                version=str(info.get("version", "?")),
                started_at=float(info.get("started_at", 0.0)),
                clients=health.get("clients"),
                sessions=health.get("sessions"),
                fronts=tuple(f for f in health.get("fronts") or () if isinstance(f, dict)),
                engine=str(health.get("engine", "?")),
                log_file=str(paths.log_file),
                paths=paths,
                problem=str(health["problem"]) if health.get("problem") else None,
                settings={str(k): str(v) for k, v in info["settings"].items()}
                if isinstance(info.get("settings"), dict)
                else None,
            )
        )
    return sorted(out, key=lambda o: o.started_at)


def stop_owner(owner: OwnerStatus, *, timeout: float) -> bool:
    """SIGTERM the owner and wait until it has released its data directory; False if it did not in time."""
    return stop_process(owner.pid, timeout=timeout)


def stop_process(pid: int, *, timeout: float) -> bool:
    """SIGTERM a process of this user and wait for it to exit; False if it did not in time."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return True
    deadline = time.monotonic() + timeout
    exited_at = None
    while time.monotonic() < deadline:
        if not _exists(pid):  # an owner releases the store's locks as it exits
            return True
        if not _alive(pid):
            # Exited, not yet reaped: give its parent (init, for an owner) a moment, then take it as gone (a
            # front started by a script that never waits for it stays a zombie).
            exited_at = exited_at or time.monotonic()
            if time.monotonic() - exited_at > 2.0:
                return True
        time.sleep(0.05)
    return False


def describe_front(front: dict[str, Any]) -> str:
    command = "mnemograph ui" if front.get("command") == "ui" else "mnemograph serve --transport http"
    return f"{command} (pid {front.get('pid', '?')}, {front.get('url', '?')})"


def describe(owner: OwnerStatus, now: float | None = None) -> str:
    up = _duration((now or time.time()) - owner.started_at)
    clients = "?" if owner.clients is None else str(owner.clients)
    lines = [
        owner.data_dir,
        f"  pid {owner.pid}, up {up}, {clients} client(s) attached, store {owner.engine}, version {owner.version}",
    ]
    if owner.sessions:
        lines.append(f"  {owner.sessions} stdio session(s) (MCP clients that started `mnemograph serve`)")
    if owner.problem and owner.engine != "ready":
        lines.append(f"  not ready: {owner.problem}")
    # A front restarts the owner whenever it stops: name it, so a person knows what to stop.
    lines += [f"  kept up by {describe_front(f)}" for f in owner.fronts]
    if owner.settings:
        lines.append("  settings: " + ", ".join(f"{k}={v}" for k, v in owner.settings.items()))
    lines.append(f"  log: {owner.log_file}")
    return "\n".join(lines)


def as_json(owner: OwnerStatus) -> dict[str, Any]:
    return {
        "pid": owner.pid,
        "data_dir": owner.data_dir,
        "version": owner.version,
        "started_at": owner.started_at,
        "clients": owner.clients,
        "sessions": owner.sessions,
        "fronts": list(owner.fronts),
        "engine": owner.engine,
        "problem": owner.problem,
        "log_file": owner.log_file,
        "settings": owner.settings,
    }


def _duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


NOT_ANSWERING = "its socket did not answer within 5s (hung, or in the middle of stopping)"


def _holds_store(paths: RuntimePaths) -> bool:
    """Whether some process holds the owner lock of ``paths`` (an owner holds it for its whole life)."""
    try:
        fd = os.open(paths.owner_lock, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # closing releases a lock taken here
    return False


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _alive(pid: int) -> bool:
    if not _exists(pid):
        return False
    # An exited process its parent has not reaped yet (a front started by a script) is gone for our purposes.
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


class _Conn(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("mnemograph-owner", timeout=5)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(5)
        try:
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


def _health(paths: RuntimePaths) -> dict[str, Any] | None:
    conn = _Conn(os.fspath(paths.http_socket))
    try:
        conn.request("GET", "/healthz")
        body = json.loads(conn.getresponse().read())
    except (OSError, http.client.HTTPException, ValueError):
        return None
    finally:
        with contextlib.suppress(OSError):
            conn.close()
    return body if isinstance(body, dict) else None
