"""The stdio front-end: a byte pump between this process's stdin/stdout and the owner's MCP socket.

Each MCP client that launches ``mnemograph serve`` gets one of these. It imports only the standard library, so
the handshake costs the owner's answer and little else. Newline-delimited JSON-RPC passes through unchanged;
the pump only reads each message's ``id`` and ``method`` to do two things the byte stream cannot:

- when the owner goes away (idle exit, crash, kill), requests it was answering get a JSON-RPC error saying to
  retry, and the next message starts a new owner and replays the session's ``initialize`` handshake to it, so
  the client's session survives;
- before any MCP traffic it sends one ``hello`` line with this session's settings (its default scope), which
  the owner reads and strips.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import sys
import threading
from collections.abc import Iterable
from typing import Any, BinaryIO

from server._owner import OwnerUnavailable, connect_or_start
from server._protocol import HELLO_KEY
from server._runtime import RuntimePaths

log = logging.getLogger(__name__)

REPLAY_ID = "mnemograph-replay-initialize"
INTERNAL_ERROR = -32603
_DRAIN_SECONDS = 2.0


def hello_line(
    default_scopes: Iterable[str],
    transport: str = "stdio",
    principal: str = "local",
    sampling: float | None = None,
) -> bytes:
    """The first line a front-end sends on a new owner connection. ``sampling``: this front-end's
    ``MNEMOGRAPH_SAMPLING_TIMEOUT`` when its ``MNEMOGRAPH_SAMPLING`` is on, else None (off for this session,
    whatever the owner was started with)."""
    return _line(
        {
            HELLO_KEY: 1,
            "default_scopes": list(default_scopes),
            "transport": transport,
            "principal": principal,
            "sampling": sampling if sampling is not None else False,
        }
    )


class _Connection:
    """One connection to an owner, with the requests sent on it that are still unanswered."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.reader: BinaryIO = sock.makefile("rb")
        self.pending: set[str] = set()
        self.dead = False
        self.thread: threading.Thread | None = None


class StdioShim:
    """Pump one MCP session between ``stdin``/``stdout`` and the owner of ``paths.data_dir``."""

    def __init__(
        self,
        paths: RuntimePaths,
        default_scopes: tuple[str, ...],
        *,
        spawn_timeout: float,
        stdin: BinaryIO,
        stdout: BinaryIO,
        principal: str = "local",
        sampling: float | None = None,
    ) -> None:
        self._paths = paths
        self._hello = hello_line(default_scopes, principal=principal, sampling=sampling)
        self._timeout = spawn_timeout
        self._stdin = stdin
        self._stdout = stdout
        self._out_lock = threading.Lock()  # two threads write to stdout: the pump and error replies
        self._state = threading.Lock()
        self._conn: _Connection | None = None
        self._initialize: dict[str, Any] | None = None  # the client's initialize request, for replays
        self._initialized: bytes | None = None  # its notifications/initialized line

    def run(self) -> int:
        """Pump until stdin closes. Returns the process exit status."""
        try:
            self._connection()  # start (or reach) the owner while the client is still preparing its request
        except OwnerUnavailable as exc:
            log.error("%s", exc)  # the first request gets the error too; keep going, the next may succeed
        for line in iter(self._stdin.readline, b""):
            if line.strip():
                self._forward(line)
        with self._state:
            conn = self._conn
        if conn is not None:
            # EOF to the owner ends the session there; it closes its end, which ends the reader thread. Give
            # replies already on their way a moment to arrive.
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_WR)
            if conn.thread is not None:
                conn.thread.join(_DRAIN_SECONDS)
        return 0

    def _forward(self, line: bytes) -> None:
        message = _parse(line)
        request_ids = _request_ids(message)
        try:
            conn = self._connection()
        except OwnerUnavailable as exc:
            log.error("%s", exc)
            for rid in request_ids:
                self._reply_error(rid, f"Mnemograph is unavailable: {exc}")
            return
        method = message.get("method") if isinstance(message, dict) else None
        if method == "initialize" and isinstance(message, dict):
            self._initialize = message
        elif method == "notifications/initialized":
            self._initialized = line
        with self._state:
            conn.pending.update(request_ids)
        try:
            conn.sock.sendall(line)
        except OSError:
            # The owner died before taking the message: nothing of it was processed, so send it to a new owner.
            with self._state:
                conn.pending.difference_update(request_ids)
            self._drop(conn)
            self._forward(line)

    def _connection(self) -> _Connection:
        with self._state:
            if self._conn is not None and not self._conn.dead:
                return self._conn
        sock = connect_or_start(self._paths, timeout=self._timeout)
        conn = _Connection(sock)
        try:
            sock.sendall(self._hello)
            if self._initialize is not None:
                self._replay_handshake(conn)
        except OSError as exc:
            sock.close()
            raise OwnerUnavailable(f"lost the owner while connecting: {exc}") from exc
        with self._state:
            self._conn = conn
        conn.thread = threading.Thread(
            target=self._pump_replies, args=(conn,), name="mnemograph-replies", daemon=True
        )
        conn.thread.start()
        return conn

    def _replay_handshake(self, conn: _Connection) -> None:
        """Re-initialize a new owner with this client's own handshake, swallowing the owner's reply."""
        assert self._initialize is not None
        conn.sock.sendall(_line({**self._initialize, "id": REPLAY_ID}))
        while True:
            reply = conn.reader.readline()
            if not reply:
                raise OSError("the owner closed the connection during the handshake")
            message = _parse(reply)
            if isinstance(message, dict) and message.get("id") == REPLAY_ID:
                break
            self._write(reply)  # nothing else is expected before the reply, but never drop a message
        if self._initialized is not None:
            conn.sock.sendall(self._initialized)

    def _pump_replies(self, conn: _Connection) -> None:
        try:
            for line in iter(conn.reader.readline, b""):
                message = _parse(line)
                if isinstance(message, dict) and "method" not in message and "id" in message:
                    with self._state:
                        conn.pending.discard(_key(message["id"]))
                self._write(line)
        except OSError:
            pass  # the owner died mid-line: handled below like EOF
        self._drop(conn)

    def _drop(self, conn: _Connection) -> None:
        """Forget a dead connection; its unanswered requests get an error telling the client to retry."""
        with self._state:
            if conn.dead:
                return
            conn.dead = True
            lost, conn.pending = conn.pending, set()
            if self._conn is conn:
                self._conn = None
        conn.sock.close()
        for rid in sorted(lost):
            self._reply_error(
                rid,
                "Mnemograph's owner process stopped while handling this request, so it may or may not have been "
                "applied; the next request starts a new owner. Check with recall, then retry if needed.",
            )

    def _reply_error(self, rid: str, message: str) -> None:
        error = {
            "jsonrpc": "2.0",
            "id": json.loads(rid),
            "error": {"code": INTERNAL_ERROR, "message": message},
        }
        self._write(_line(error))

    def _write(self, line: bytes) -> None:
        with self._out_lock:
            try:
                self._stdout.write(line)
                self._stdout.flush()
            except (BrokenPipeError, ValueError):
                pass  # the client is gone; stdin will close too


def run_stdio(
    paths: RuntimePaths,
    default_scopes: tuple[str, ...],
    *,
    spawn_timeout: float,
    principal: str = "local",
    sampling: float | None = None,
) -> int:
    """Serve this process's stdin/stdout through the owner of ``paths.data_dir`` (started if needed), as the
    unrestricted local principal ``principal``. ``sampling``: the seconds this session's client gets to answer
    MCP sampling requests when this front-end has sampling on (the owner honours it per session), else None."""
    shim = StdioShim(
        paths,
        default_scopes,
        spawn_timeout=spawn_timeout,
        stdin=sys.stdin.buffer,
        stdout=sys.stdout.buffer,
        principal=principal,
        sampling=sampling,
    )
    try:
        return shim.run()
    except KeyboardInterrupt:
        return 130


def _parse(line: bytes) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        return None  # not JSON: forwarded anyway, the owner answers with a parse error


def _request_ids(message: Any) -> list[str]:
    items = message if isinstance(message, list) else [message]
    return [_key(m["id"]) for m in items if isinstance(m, dict) and "method" in m and m.get("id") is not None]


def _key(request_id: Any) -> str:
    return json.dumps(request_id)  # 1 and "1" are different ids


def _line(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"
