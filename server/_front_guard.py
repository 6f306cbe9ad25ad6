"""What the public HTTP front does before a request reaches any handler: a cap on open connections and a
deadline for each request's headers (``GuardedH11``), and, for ``--no-auth``, a check that a loopback client
runs as this OS user (``same_user``).

Why here: uvicorn accepts any number of connections, and gives a client that sends its headers slowly (or
never) as long as it likes, so idle or stalled sockets could hold the front's memory and file descriptors
without ever authenticating. The body's deadline and the token check are the app's (``server.http_front``).

Standard library, h11 and uvicorn only (the front imports neither the SDK nor the store).
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import struct
from pathlib import Path
from typing import Any, ClassVar

from uvicorn.protocols.http.h11_impl import H11Protocol

_PROC_NET = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))
_ESTABLISHED = "01"


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

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
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
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm(self.cycle)  # the next request's headers get the same deadline

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
    user. The kernel lists every TCP socket with its owner's uid; the client's socket is the one whose local
    end is ``client`` and remote end ``server``. False when it cannot be found (fail closed)."""
    if client is None or server is None:
        return False
    want = (_addr(client[0]), client[1], _addr(server[0]), server[1])
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
                    return int(fields[7]) == os.getuid()
            except ValueError:
                continue
    return False


def _addr(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    address = ipaddress.ip_address(text)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _endpoint(field: str) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]:
    """``0100007F:1F90`` (the kernel's words in host byte order) -> (127.0.0.1, 8080)."""
    host, port = field.split(":")
    words = [int(host[i : i + 8], 16) for i in range(0, len(host), 8)]
    packed = struct.pack(f"={len(words)}I", *words)
    address = ipaddress.ip_address(packed)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped, int(port, 16)
    return address, int(port, 16)
