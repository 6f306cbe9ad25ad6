"""``verify`` and ``reindex`` from the CLI, whether or not an owner is serving the data directory.

With an owner running, the operation goes to it (over its private HTTP socket), since only it may open the
stores. Without one, the CLI opens the Engine itself for the duration. If an owner appears in between (a client
started one), the direct open fails on the directory lock and the operation goes to the new owner instead.
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import os
import socket
import time
from typing import TYPE_CHECKING, Any, Literal

from server._runtime import RuntimePaths
from storage.errors import StorageUnavailable

if TYPE_CHECKING:
    from storage import VerifyReport

Operation = Literal["verify", "reindex"]


class AdminError(RuntimeError):
    """The operation could not run; the message says why."""


def run_admin(op: Operation, paths: RuntimePaths, *, timeout: float) -> dict[str, Any]:
    """Run ``op`` on ``paths.data_dir`` and return the verify report as JSON (with its ``ok`` verdict)."""
    deadline = time.monotonic() + timeout
    while True:
        report = _via_owner(paths, op)
        if report is not None:
            return report
        try:
            return _direct(paths, op)
        except StorageUnavailable as exc:  # an owner is starting up, or another CLI holds the directory
            if time.monotonic() > deadline:
                raise AdminError(str(exc)) from exc
            time.sleep(0.2)


def report_json(report: VerifyReport) -> dict[str, Any]:
    """A verify report as JSON, with its ``ok`` verdict."""
    return {**dataclasses.asdict(report), "ok": report.ok}


def _direct(paths: RuntimePaths, op: Operation) -> dict[str, Any]:
    from storage import Engine  # the store libraries load only on this path

    with Engine.open(paths.data_dir, warm=False) as engine:
        return report_json(engine.verify() if op == "verify" else engine.reindex())


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("mnemograph-owner")  # no timeout: a reindex of a large store takes a while
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


def _via_owner(paths: RuntimePaths, op: Operation) -> dict[str, Any] | None:
    conn = _UnixHTTPConnection(os.fspath(paths.http_socket))
    try:
        conn.request("POST", f"/-/{op}")
        response = conn.getresponse()
        body = json.loads(response.read())
    except (FileNotFoundError, ConnectionRefusedError):
        return None  # no owner
    except (OSError, http.client.HTTPException, ValueError) as exc:
        raise AdminError(f"the owner failed during {op}: {exc}") from exc
    finally:
        conn.close()
    if response.status != 200:
        raise AdminError(body.get("message", f"the owner answered {response.status}"))
    result: dict[str, Any] = body
    return result
