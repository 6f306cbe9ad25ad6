"""What the public HTTP front does before a request reaches any handler: a cap on open connections and a
deadline for each request's headers (``GuardedH11``), and, for ``--no-auth``, a check that a loopback client
runs as this OS user (``same_user``), made once per connection (``connection_peer_ok``).

Why here: uvicorn accepts any number of connections, and gives a client that sends its headers slowly (or
never) as long as it likes, so idle or stalled sockets could hold the front's memory and file descriptors
without ever authenticating. The body's deadline and the token check are the app's (``server.http_front``).

Standard library, h11, uvicorn and starlette's type names only (the front imports neither the SDK nor the store).
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import socket
import struct
from pathlib import Path
from typing import Any, ClassVar

from starlette.types import Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

_PROC_NET = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))
_ESTABLISHED = "01"
_Address = ipaddress.IPv4Address | ipaddress.IPv6Address
# The scope key under which GuardedH11 hands each request its connection's memo (a dict, one per TCP connection).
CONNECTION_KEY = "mnemograph.connection"


def _raw_response(status: int, reason: str, message: str, *extra: tuple[str, str]) -> bytes:
    body = json.dumps({"error": reason.lower().replace(" ", "_"), "message": message}).encode()
    head = [f"HTTP/1.1 {status} {reason}", "content-type: application/json", f"content-length: {len(body)}"]
    head += [f"{k}: {v}" for k, v in extra] + ["connection: close", "", ""]
    return "\r\n".join(head).encode() + body


class GuardedH11(H11Protocol):
    """uvicorn's h11 protocol with a connection cap and a header deadline (set on a subclass by ``guarded``).

    - Past ``max_connections`` open connections, a new one is answered 503 (Retry-After) and closed at once,
      before anything of it is read.
    - A connection must deliver a request's complete headers within ``header_timeout`` seconds of opening,
      and of the previous response ending (keep-alive), or it is answered 408 and closed.
    """

    max_connections: ClassVar[int] = 64
    header_timeout: ClassVar[float] = 10.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timer: asyncio.TimerHandle | None = None
        # What the app learned about this connection (``connection_peer_ok``): this protocol object lives
        # exactly as long as its TCP connection, so nothing in it can outlive the peer it describes.
        memo: dict[str, Any] = {}
        self._memo = memo
        app = self.app

        async def tagged(scope: Scope, receive: Receive, send: Send) -> None:
            scope[CONNECTION_KEY] = memo
            await app(scope, receive, send)

        self.app = tagged

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        # asyncio turns Nagle's algorithm off only for sockets made with proto IPPROTO_TCP, and a listening
        # socket bound with proto 0 (``http_front.bind``, uvicorn's own) hands that 0 on to what it accepts.
        # With Nagle on, a response's body waits behind its headers for the client's delayed ACK (40 ms) on
        # every request after a connection's first.
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # The socket's own ends, as the kernel reports them: never the scope's "client", which a proxy-headers
        # middleware rewrites from a request's X-Forwarded-For (a header any local user may send).
        self._memo["peer"] = (self.client, self.server)
        if len(self.connections) > self.max_connections:
            self.logger.warning("connection cap (%d) reached: refusing a connection", self.max_connections)
            message = f"the server has {self.max_connections} connections open, its limit; retry shortly"
            transport.write(_raw_response(503, "Service Unavailable", message, ("retry-after", "1")))
            transport.close()
            return
        self._arm(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        finished = self.cycle
        # uvicorn reads a pipelined request's headers here, if the client sent them already: they came in time.
        super().on_response_complete()
        if not self.transport.is_closing() and self.cycle is finished:
            self._arm(finished)  # the next request's headers get the same deadline

    def _arm(self, cycle: object) -> None:
        self._disarm()
        self._header_timer = self.loop.call_later(self.header_timeout, self._headers_late, cycle)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_late(self, cycle: object) -> None:
        self._header_timer = None
        if self.cycle is not cycle or self.transport.is_closing():
            return  # a new request's headers arrived in time
        message = f"the request's headers did not arrive within {self.header_timeout:g}s"
        self.transport.write(_raw_response(408, "Request Timeout", message))
        self.transport.close()


def guarded(max_connections: int, header_timeout: float) -> type[GuardedH11]:
    """A ``GuardedH11`` with these limits, to pass as uvicorn's ``http`` protocol class."""
    return type(
        "GuardedH11Protocol",
        (GuardedH11,),
        {"max_connections": max_connections, "header_timeout": header_timeout},
    )


def peer_check_available() -> bool:
    """Whether this system lets us see which user owns a loopback TCP connection (Linux's /proc/net/tcp)."""
    return _PROC_NET[0].is_file()


def same_user(client: tuple[str, int] | None, server: tuple[str, int] | None) -> bool:
    """True when the loopback TCP connection from ``client`` to ``server`` belongs to a process of this OS
    user. The kernel knows every TCP socket's owner uid; the client's socket is the one whose local end is
    ``client`` and remote end ``server``. False when it cannot be found (fail closed).

    The kernel is asked for that one socket (``sock_diag`` over netlink, microseconds); where that is not
    available it reads the whole table (/proc/net/tcp, milliseconds on a machine with many sockets)."""
    if client is None or server is None:
        return False
    try:
        want = (_addr(client[0]), client[1], _addr(server[0]), server[1])
    except ValueError:
        return False
    # (An IPv6 client socket connected to an IPv4 address is found by its IPv4 four-tuple too: the kernel's
    # lookup matches IPv4-mapped sockets; tests/server/test_front_guard.py checks it.)
    uid = _socket_uid(*want)
    if uid == _UNKNOWN:
        uid = _table_uid(want)
    return uid == os.getuid()


def _table_uid(want: tuple[_Address, int, _Address, int]) -> int | None:
    """The uid of the established socket ``want`` (local, remote) found in /proc/net/tcp{,6}, or None."""
    for table in _PROC_NET:
        try:
            lines = table.read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 8 or fields[3] != _ESTABLISHED:
                continue
            try:
                if (*_endpoint(fields[1]), *_endpoint(fields[2])) == want:
                    return int(fields[7])
            except ValueError:
                continue
    return None


# sock_diag (linux/sock_diag.h, linux/inet_diag.h): one request for one socket, looked up by its four-tuple.
_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST = 1
_NLMSG_ERROR = 2
_TCP_ESTABLISHED = 1
_NO_COOKIE = 0xFFFFFFFF
_REQUEST = struct.Struct("=IHHII BBBxI HH16s16sIII")  # nlmsghdr + inet_diag_req_v2 (ports big-endian below)
_UNKNOWN = -1  # netlink could not answer: fall back to the table


def _socket_uid(local: _Address, lport: int, remote: _Address, rport: int) -> int | None:
    """The owner uid of the established TCP socket local:lport -> remote:rport, None when there is none,
    ``_UNKNOWN`` when the kernel cannot be asked this way."""
    family = socket.AF_INET if local.version == 4 else socket.AF_INET6
    if remote.version != local.version:
        return _UNKNOWN
    request = _REQUEST.pack(
        _REQUEST.size, _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, 1, 0,
        family, socket.IPPROTO_TCP, 0, 1 << _TCP_ESTABLISHED,
        socket.htons(lport), socket.htons(rport), local.packed.ljust(16, b"\0"), remote.packed.ljust(16, b"\0"),
        0, _NO_COOKIE, _NO_COOKIE,
    )  # fmt: skip
    try:
        with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as diag:
            diag.settimeout(1.0)
            diag.sendto(request, (0, 0))
            reply = diag.recv(8192)
    except (OSError, AttributeError):  # no netlink (not Linux), sock_diag not built, or refused
        return _UNKNOWN
    if len(reply) < 16:
        return _UNKNOWN
    kind = struct.unpack_from("=H", reply, 4)[0]
    if kind == _NLMSG_ERROR:
        errno_ = -struct.unpack_from("=i", reply, 16)[0]
        return None if errno_ == 2 else _UNKNOWN  # ENOENT: no such socket
    if kind != _SOCK_DIAG_BY_FAMILY or len(reply) < 16 + 72:
        return _UNKNOWN
    # inet_diag_msg: family, state, timer, retrans, the socket id (48 bytes), expires, rqueue, wqueue, uid.
    state = reply[17]
    sport, dport = struct.unpack_from("!HH", reply, 20)
    if state != _TCP_ESTABLISHED or (sport, dport) != (lport, rport):
        return None
    uid: int = struct.unpack_from("=I", reply, 16 + 4 + 48 + 12)[0]
    return uid


def connection_peer_ok(scope: Scope) -> bool:
    """``same_user`` for the connection that carries this request, looked up once per connection: the owner
    of a TCP socket never changes while it is open, and reading the kernel's socket tables costs milliseconds
    (they list every socket on the machine). Without GuardedH11's memo (another server) it checks each time."""
    memo = scope.get(CONNECTION_KEY)
    if memo is None:
        return same_user(scope.get("client"), scope.get("server"))
    ok = memo.get("same_user")
    if ok is None:
        client, server = memo.get("peer", (None, None))
        ok = memo["same_user"] = same_user(client, server)
    return bool(ok)


def _addr(text: str) -> _Address:
    address = ipaddress.ip_address(text)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _endpoint(field: str) -> tuple[_Address, int]:
    """``0100007F:1F90`` (the kernel's words in host byte order) -> (127.0.0.1, 8080)."""
    host, port = field.split(":")
    words = [int(host[i : i + 8], 16) for i in range(0, len(host), 8)]
    packed = struct.pack(f"={len(words)}I", *words)
    address = ipaddress.ip_address(packed)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped, int(port, 16)
    return address, int(port, 16)
