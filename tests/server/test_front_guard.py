"""The HTTP front's --no-auth peer check: which OS user a loopback client runs as, asked once per connection."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import anyio
import httpx2
import pytest
import uvicorn
from starlette.types import Receive, Scope, Send

from server._front_guard import (
    CONNECTION_KEY,
    _addr,
    _socket_uid,
    _table_uid,
    connection_peer_ok,
    guarded,
    same_user,
)
from server.http_front import bind

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the peer check is Linux's"),
]

NOBODY = 65534
_HOLD = "import socket, sys, time\ns = socket.create_connection(('127.0.0.1', int(sys.argv[1])))\ntime.sleep(30)\n"


def test_our_own_loopback_connection_is_this_user() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        with socket.create_connection(server.getsockname()) as client:
            accepted, peer = server.accept()
            with accepted:
                assert same_user(peer, accepted.getsockname())
                # The one-socket lookup (sock_diag) answers, and agrees with the kernel's whole table.
                want = (_addr(peer[0]), peer[1], _addr("127.0.0.1"), server.getsockname()[1])
                assert _socket_uid(*want) == _table_uid(want) == os.getuid()
            assert client.fileno() >= 0
        # A connection that does not exist (any more) is nobody's: refused.
        assert not same_user(peer, server.getsockname())
        assert not same_user(None, server.getsockname())


def test_a_dual_stack_client_socket_is_found_too() -> None:
    """An IPv6 client socket connected to the IPv4 listener (as ``::ffff:127.0.0.1``) is still this user's."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        with socket.socket(socket.AF_INET6) as client:
            client.connect(("::ffff:127.0.0.1", server.getsockname()[1]))
            accepted, peer = server.accept()
            with accepted:
                assert same_user(peer, accepted.getsockname())


@pytest.mark.skipif(os.getuid() != 0, reason="a connection from another OS user needs root to make")
def test_a_connection_from_another_user_is_not_ours() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        other = subprocess.Popen(
            ["/usr/bin/python3", "-I", "-c", _HOLD, str(server.getsockname()[1])],
            user=NOBODY,
            group=NOBODY,
            extra_groups=[],
            cwd="/",
            env={"PATH": "/usr/bin:/bin"},
        )
        try:
            server.settimeout(30)
            accepted, peer = server.accept()
            with accepted:
                assert not same_user(peer, accepted.getsockname())
                want = (_addr(peer[0]), peer[1], _addr("127.0.0.1"), server.getsockname()[1])
                assert _socket_uid(*want) == _table_uid(want) == NOBODY
        finally:
            other.kill()
            other.wait()


async def test_each_connection_is_checked_once_and_never_for_another_connection() -> None:
    """Requests on one keep-alive connection share one memo (the check is made once); another connection
    gets its own, so an answer can never carry over to a different peer."""
    seen: list[tuple[int, bool]] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        seen.append((id(scope[CONNECTION_KEY]), connection_peer_ok(scope)))
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, lifespan="off", log_level="warning", http=guarded(8, 5.0))
    server = uvicorn.Server(config)
    async with anyio.create_task_group() as tg:
        # Already listening: connections wait in the backlog until it serves.
        tg.start_soon(server.serve, [sock])
        url = f"http://127.0.0.1:{port}/"
        async with httpx2.AsyncClient() as first, httpx2.AsyncClient() as second:
            for _ in range(3):
                assert (await first.get(url)).status_code == 200
            assert (await second.get(url)).status_code == 200
        server.should_exit = True
    sock.close()
    memos = [memo for memo, _ in seen]
    assert memos[0] == memos[1] == memos[2] != memos[3]
    assert all(ok for _, ok in seen)


async def test_the_check_looks_at_the_socket_never_at_x_forwarded_for() -> None:
    """uvicorn rewrites a request's client from X-Forwarded-For (trusted from 127.0.0.1 by default): the peer
    check must not follow it, or any local user could name another user's open connection to the front."""
    seen: list[bool] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        seen.append(connection_peer_ok(scope))
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app, lifespan="off", log_level="warning", http=guarded(8, 5.0)
    )  # proxy headers on
    server = uvicorn.Server(config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [sock])
        async with httpx2.AsyncClient() as client:
            # Our own connection, claiming to come from a port nobody holds: still ours.
            response = await client.get(
                f"http://127.0.0.1:{port}/", headers={"x-forwarded-for": "127.0.0.1:1"}
            )
            assert response.status_code == 200
        server.should_exit = True
    sock.close()
    assert seen == [True]


async def test_the_front_sends_each_answer_at_once_with_nagle_off() -> None:
    """Every connection the front accepts has TCP_NODELAY: with Nagle on, an answer's body waits behind its
    headers for the client's delayed ACK (40 ms) on every request of a kept-alive connection after its first."""
    nodelay: list[int] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        for protocol in server.server_state.connections:
            accepted = protocol.transport.get_extra_info("socket")  # type: ignore[attr-defined]
            nodelay.append(accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})

    sock = bind("127.0.0.1", 0)  # as `mnemograph serve --transport http` binds its port
    sock.listen(8)
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, lifespan="off", log_level="warning", http=guarded(8, 5.0))
    server = uvicorn.Server(config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [sock])
        async with httpx2.AsyncClient() as client:
            for _ in range(2):
                assert (await client.get(f"http://127.0.0.1:{port}/")).status_code == 200
        server.should_exit = True
    sock.close()
    assert len(nodelay) == 2  # one request after another on one kept-alive connection
    assert all(nodelay), nodelay
