"""The HTTP front when its owner misbehaves: hangs, or dies in the middle of an answer. The client must get a
bounded wait and an answer that says the outcome is unknown, or a broken connection, never a short answer that
looks complete. And the front holds no connection open for an event stream it would never use."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import anyio
import httpx2
import pytest
from mcp import Client

from server._protocol import HEALTH_PATH, LEASE_PATH, MCP_PATH
from tests.e2e.conftest import HEADERS, INITIALIZE, MNEMOGRAPH, Store, call, http_server

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

PATIENCE = 60.0  # far longer than the owner timeout under test: on the starting code, the wait never ends
LIST_SCOPES = {
    "jsonrpc": "2.0",
    "id": 41,
    "method": "tools/call",
    "params": {"name": "list_scopes", "arguments": {}},
}


async def test_a_hung_owner_gives_the_http_client_outcome_unknown_within_the_owner_timeout(
    store: Store,
) -> None:
    # The owner's first call waits for the store and the model (longer than the 2 s under test): made first,
    # over stdio, it leaves an owner that answers at once.
    async with Client(store.stdio(), mode="legacy") as client:
        await call(client, "memory_write", {"content": "Written before the hang.", "scopes": ["user:h"]})
    async with http_server(store, env={"MNEMOGRAPH_OWNER_TIMEOUT": "2"}) as server:
        pid = store.owner_pid()
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)  # hung: it accepts connections (the kernel does) and answers nothing
        try:
            async with httpx2.AsyncClient(timeout=PATIENCE) as http:
                response = await http.post(server.url, json=LIST_SCOPES, headers=HEADERS)
        finally:
            os.kill(pid, signal.SIGCONT)
        assert response.status_code == 504
        error = response.json()
        assert error["id"] == 41
        assert "did not answer this request within 2s" in error["error"]["message"]
        assert "outcome is unknown" in error["error"]["message"]
        # The owner is answering again: so is the front, and nothing was lost.
        async with Client(server.url) as client:
            scopes = await call(client, "list_scopes", {})
        assert {"id": "user:h", "parent": None, "memories": 1} in scopes["scopes"]


async def test_the_way_out_the_504_names_works_status_shows_the_hung_owner_and_stop_says_how_to_end_it(
    store: Store,
) -> None:
    async with Client(store.stdio(), mode="legacy") as client:
        await call(client, "memory_write", {"content": "Kept across the hang.", "scopes": ["user:h"]})
    async with http_server(store, env={"MNEMOGRAPH_OWNER_TIMEOUT": "2"}) as server:
        pid = store.owner_pid()
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
        try:
            async with httpx2.AsyncClient(timeout=PATIENCE) as http:
                response = await http.post(server.url, json=LIST_SCOPES, headers=HEADERS)
            assert response.status_code == 504
            assert "see `mnemograph status` and restart it with `mnemograph stop`" in response.text
            # Before: `status` said "no Mnemograph server is running" and `stop` "no server is running", so the
            # client's way out led nowhere while the hung owner kept the store and the front kept waiting on it.
            status, out, _ = await _cli(store, "status", "--data-dir", str(store.data_dir))
            assert status == 0
            assert f"pid {pid}" in out
            assert "did not answer" in out
            status, _, err = await _cli(store, "stop", "--data-dir", str(store.data_dir), "--timeout", "1")
            assert status == 1
            assert f"end it with `kill -9 {pid}`" in err
            os.kill(pid, signal.SIGKILL)  # as told
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        # A new owner serves the store, and the memory is there: its first call waits for the store and the model
        # (longer than the 2 s under test), so it is made over stdio, then the front's.
        async with Client(store.stdio(), mode="legacy") as client:
            await call(client, "list_scopes", {})
        async with Client(server.url) as client:
            scopes = await call(client, "list_scopes", {})
        assert {"id": "user:h", "parent": None, "memories": 1} in scopes["scopes"]
        assert store.owner_pid() != pid


async def test_a_hung_owner_that_takes_no_more_bytes_gets_a_large_request_a_504_too(store: Store) -> None:
    # A request larger than the owner socket's buffer cannot even be written to a hung owner. That is the same
    # hang, so the client gets the same 504 after the same timeout; before, the front gave up after its fixed
    # 60 s write timeout with a 502 saying the owner had stopped and a new one was starting (neither was true).
    async with Client(store.stdio(), mode="legacy") as client:
        await call(client, "memory_write", {"content": "Written before the hang.", "scopes": ["user:h"]})
    padded = json.dumps(
        {**LIST_SCOPES, "params": {**LIST_SCOPES["params"], "_meta": {"pad": " " * (3 << 20)}}}
    )
    async with http_server(store, env={"MNEMOGRAPH_OWNER_TIMEOUT": "2"}) as server:
        pid = store.owner_pid()
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
        try:
            async with httpx2.AsyncClient(timeout=PATIENCE * 2) as http:
                response = await http.post(server.url, content=padded, headers=HEADERS)
        finally:
            os.kill(pid, signal.SIGCONT)
        assert response.status_code == 504
        error = response.json()
        assert error["id"] == 41
        assert "did not answer this request within 2s" in error["error"]["message"]
        assert "outcome is unknown" in error["error"]["message"]


async def _cli(store: Store, *args: str) -> tuple[int, str, str]:
    done = await anyio.run_process([MNEMOGRAPH, *args], env={**os.environ, **store.env()}, check=False)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def test_an_owner_dying_in_the_middle_of_a_json_answer_gets_the_client_outcome_unknown(
    store: Store,
) -> None:
    # An owner killed at an exact byte of its answer cannot be had from a real one on demand, so a stand-in
    # takes the owner's socket: it answers the front's health checks and lease, and sends half of a JSON body.
    with _half_answering_owner(store, chunked=False):
        async with http_server(store) as server, httpx2.AsyncClient(timeout=PATIENCE) as http:
            response = await http.post(server.url, json=LIST_SCOPES, headers=HEADERS)
    # Before: a 200 whose body stopped at the owner's last byte, which the client took as complete.
    assert response.status_code == 502
    error = response.json()
    assert error["id"] == 41
    assert "outcome is unknown" in error["error"]["message"]


async def test_an_owner_dying_in_the_middle_of_a_streamed_answer_breaks_the_connection(store: Store) -> None:
    # An answer of undeclared size is relayed as it comes, so when the owner dies the client already has a 200:
    # the front must abort the connection, never end the body as if it were whole.
    with _half_answering_owner(store, chunked=True):
        async with http_server(store) as server, httpx2.AsyncClient(timeout=PATIENCE) as http:
            with pytest.raises(httpx2.RemoteProtocolError):
                await http.post(server.url, json=LIST_SCOPES, headers=HEADERS)


async def test_get_on_mcp_is_405_and_sdk_clients_still_work(store: Store) -> None:
    async with http_server(store) as server:
        async with httpx2.AsyncClient(timeout=PATIENCE) as http:
            init = await http.post(server.url, json=INITIALIZE, headers=HEADERS)
            assert init.status_code == 200
            # A client that opens the event stream for server-initiated messages is told there is none, at
            # once: the connection is not held open (each held one took a slot of the front's connection cap).
            async with http.stream("GET", server.url, headers={"Accept": "text/event-stream"}) as response:
                assert response.status_code == 405
                assert response.headers["allow"] == "POST"
                assert "no event stream" in json.loads(await response.aread())["message"]
        async with Client(server.url) as client:
            written = await call(
                client, "memory_write", {"content": "GET-less sessions work.", "scopes": ["user:g"]}
            )
            assert written["status"] == "added"


async def test_head_on_mcp_is_405_like_get_and_names_only_post(store: Store) -> None:
    # HEAD is GET without the body (RFC 9110), so it gets GET's answer: before, it went on to the owner, whose
    # 405 said `Allow: GET, POST, DELETE`, naming two methods that are themselves refused.
    async with http_server(store) as server, httpx2.AsyncClient(timeout=PATIENCE) as http:
        head = await http.head(server.url, headers={"Accept": "text/event-stream"})
        get = await http.get(server.url, headers={"Accept": "text/event-stream"})
        assert (head.status_code, get.status_code) == (405, 405)
        assert head.headers["allow"] == get.headers["allow"] == "POST"
        assert head.headers["content-length"] == get.headers["content-length"]
        assert head.content == b""
        # The connection that had the HEAD answer serves calls as before.
        answer = await http.post(server.url, json=LIST_SCOPES, headers=HEADERS)
        assert answer.json()["id"] == 41
        # A HEAD the owner answers says what GET would send (a monitor checking /healthz by HEAD); the front
        # read its (empty) body whole and said Content-Length: 0.
        head, get = (
            await http.head(f"{server.base}{HEALTH_PATH}"),
            await http.get(f"{server.base}{HEALTH_PATH}"),
        )
        assert head.status_code == get.status_code == 200
        assert head.headers["content-length"] == str(len(get.content)) != "0"


@contextmanager
def _half_answering_owner(store: Store, *, chunked: bool) -> Iterator[None]:
    store.paths.ensure()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(store.paths.http_socket))
    listener.listen(16)
    connections: list[socket.socket] = []
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            data = b""
            while True:
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                head, data = data.split(b"\r\n\r\n", 1)
                lines = head.decode().split("\r\n")
                method, path = lines[0].split()[:2]
                length = next(
                    (int(h.split(":")[1]) for h in lines if h.lower().startswith("content-length:")), 0
                )
                while len(data) < length:
                    data += conn.recv(65536)
                data = data[length:]
                if path == LEASE_PATH:
                    conn.sendall(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
                    stop.wait()
                    return
                if method == "POST" and path == MCP_PATH:
                    answer = json.dumps(
                        {"jsonrpc": "2.0", "id": 41, "result": {"content": [], "x": "y" * 400}}
                    )
                    framing = (
                        f"transfer-encoding: chunked\r\n\r\n{100:x}\r\n"
                        if chunked
                        else f"content-length: {len(answer)}\r\n\r\n"
                    )
                    conn.sendall(
                        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                        + framing.encode()
                        + answer[:100].encode()
                    )
                    conn.close()  # the owner dies here
                    return
                body = b"{}" if path == HEALTH_PATH else b""
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    + f"content-length: {len(body)}\r\n\r\n".encode()
                    + body
                )

    def accept() -> None:
        with contextlib.suppress(OSError):
            while not stop.is_set():
                conn, _ = listener.accept()
                connections.append(conn)
                threading.Thread(target=serve, args=(conn,), daemon=True).start()

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield
    finally:
        stop.set()
        listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.close()
        acceptor.join(timeout=5)
        store.paths.http_socket.unlink(missing_ok=True)
