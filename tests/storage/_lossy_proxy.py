"""A TCP proxy between a node and its FalkorDB server that loses messages on cue: a network fault in front of
the real server (as toxiproxy would be), so that a test can lose a commit's request or its reply for sure."""

from __future__ import annotations

import socket
import threading
import time
from contextlib import suppress


class LossyProxy:
    """Forwards 127.0.0.1:``port`` to the server at ``upstream``. ``lose_reply(marker)``: the first request
    holding ``marker`` reaches the server and the connection is cut before its reply comes back.
    ``lose_request(marker)``: the connection is cut before that request reaches the server. ``refuse``: new
    connections are closed at once (the server looks down). ``stall``: new connections are accepted and never
    answered (packets dropped by a partition, or a server that hangs). ``delay_reply(marker, seconds)``: the
    reply to that request comes back ``seconds`` late (a slow query, as the client sees it)."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.refuse = False
        self.stall = False
        self._stalled: list[socket.socket] = []
        self.cuts = 0
        self._marker: bytes | None = None
        self._mode = ""
        self._delay = 0.0
        self._lock = threading.Lock()
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, graph: str) -> str:
        return f"falkordb://127.0.0.1:{self.port}/{graph}"

    def lose_reply(self, marker: str) -> None:
        with self._lock:
            self._marker, self._mode = marker.encode(), "reply"

    def lose_request(self, marker: str) -> None:
        with self._lock:
            self._marker, self._mode = marker.encode(), "request"

    def delay_reply(self, marker: str, seconds: float) -> None:
        with self._lock:
            self._marker, self._mode, self._delay = marker.encode(), "delay", seconds

    def close(self) -> None:
        self._sock.close()
        for c in self._stalled:
            c.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._sock.accept()
            except OSError:
                return
            if self.refuse:
                client.close()
                continue
            if self.stall:  # accepted, never answered: a partition that drops packets, a hung server
                self._stalled.append(client)
                continue
            try:
                server = socket.create_connection(("127.0.0.1", self.upstream))
            except OSError:  # the server is down: so is this connection, not the proxy
                client.close()
                continue
            cut = threading.Event()  # set: this connection's next reply is lost with the connection
            late: list[float] = []  # a delay for this connection's next reply
            threading.Thread(target=self._up, args=(client, server, cut, late), daemon=True).start()
            threading.Thread(target=self._down, args=(server, client, cut, late), daemon=True).start()

    def _hit(self, data: bytes) -> str:
        with self._lock:
            if self._marker is not None and self._marker in data:
                self._marker, mode = None, self._mode
                return mode
        return ""

    def _up(
        self, client: socket.socket, server: socket.socket, cut: threading.Event, late: list[float]
    ) -> None:
        with suppress(OSError):
            while data := client.recv(1 << 16):
                mode = self._hit(data)
                if mode == "request":
                    break
                if mode == "reply":
                    cut.set()
                if mode == "delay":
                    late.append(self._delay)
                server.sendall(data)
        self._cut(client, server)

    def _down(
        self, server: socket.socket, client: socket.socket, cut: threading.Event, late: list[float]
    ) -> None:
        with suppress(OSError):
            while data := server.recv(1 << 16):
                if cut.is_set():
                    break
                if late:
                    time.sleep(late.pop())  # the slow reply this test asked for
                client.sendall(data)
        self._cut(client, server)

    def _cut(self, *socks: socket.socket) -> None:
        with self._lock:
            self.cuts += 1
        for s in socks:
            with suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()
