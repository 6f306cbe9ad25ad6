"""The SDK client over streamable HTTP: the HTTP front in a subprocess (uvicorn), proxying to its owner."""

from __future__ import annotations

import os

import anyio
import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from tests.e2e.conftest import HEADERS, INITIALIZE, MNEMOGRAPH, Store, call, error_text, http_server
from tools import ALL_TOOLS
from tools._wire import short_id

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_every_tool_over_http(shared_store: Store, mode: str) -> None:
    scope = f"project:http-{mode}"
    async with (
        http_server(shared_store, "--default-scope", scope) as server,
        Client(server.url, mode=mode) as client,
    ):
        assert client.instructions
        assert "long-term memory" in client.instructions
        assert len((await client.list_tools()).tools) == len(ALL_TOOLS)
        written = await call(client, "memory_write", {"content": "Grace Hopper popularised the term bug."})
        assert written["scopes"] == [scope]
        found = await call(client, "recall", {"query": "who popularised bug"})
        assert found["results"][0]["id"] == written["id"]
        amended = await call(client, "amend", {"id": written["id"], "content": "Grace Hopper found a moth."})
        read = await call(client, "memory_read", {"id": amended["id"]})
        assert short_id(read["memory"]["supersedes"]) == written["id"]  # memory_read gives full ids
        await call(client, "retire", {"id": amended["id"]})
        assert scope in [s["id"] for s in (await call(client, "list_scopes", {}))["scopes"]]
        missing = await client.call_tool("memory_read", {"id": "feedfacefeedface"})
        assert error_text(missing) == "no memory with id feedfacefeedface; call recall to find it"
        with pytest.raises(MCPError, match="unknown tool"):
            await client.call_tool("nope", {})
        assert (await call(client, "purge", {"scope": scope, "confirm": scope}))["memories_deleted"] == 2


async def test_calls_are_answered_with_json_on_the_connection_the_client_keeps(shared_store: Store) -> None:
    # A JSON body is read to its end, so the client's connection goes back to its pool; an event stream that
    # the client closes once it holds its answer costs it a new TCP connection for every call.
    answers: list[tuple[str, object]] = []

    async def note(response: httpx2.Response) -> None:
        if response.request.method == "POST" and response.status_code == 200:
            stream = response.extensions["network_stream"]
            answers.append((response.headers["content-type"], stream.get_extra_info("client_addr")))

    async with (
        http_server(shared_store) as server,
        httpx2.AsyncClient(event_hooks={"response": [note]}, timeout=30) as http,
        Client(streamable_http_client(server.url, http_client=http), mode="legacy") as client,
    ):
        written = await call(
            client, "memory_write", {"content": "Ada keeps one socket.", "scopes": ["user:k"]}
        )
        for _ in range(3):
            found = await call(client, "recall", {"query": "who keeps one socket", "scopes": ["user:k"]})
            assert found["results"][0]["id"] == written["id"]
    assert len(answers) >= 5  # initialize, the write, three recalls (and the tools/list the client reads)
    assert {kind for kind, _ in answers} == {"application/json"}
    # The tool calls share one connection (the initialize's may have gone to the client's GET stream).
    assert len({address for _, address in answers[1:]}) == 1, answers


async def test_a_relayed_answer_carries_one_date_and_one_server_header(shared_store: Store) -> None:
    # Date is a single-valued field (RFC 9110): the front adds its own, so the owner's must not come through
    # as well, or a strict client or proxy may refuse the answer.
    async with http_server(shared_store) as server, httpx2.AsyncClient(base_url=server.base) as http:
        for response in (
            await http.post("/mcp", json=INITIALIZE, headers=HEADERS),
            await http.get("/healthz"),
        ):
            assert response.status_code == 200
            assert len(response.headers.get_list("date")) == 1, response.headers.raw
            assert len(response.headers.get_list("server")) == 1, response.headers.raw


async def test_a_json_rpc_batch_is_refused_with_what_to_do_instead(shared_store: Store) -> None:
    # The SDK takes one JSON-RPC message per POST (the 2025-06-18 protocol has no batches). A client that sends
    # an array must learn that in a sentence, not from a dump of the SDK's validation errors, and nothing runs.
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    async with (
        http_server(shared_store) as server,
        httpx2.AsyncClient(base_url=server.base, timeout=30) as http,
    ):
        for batch in ([INITIALIZE, listing], [{"jsonrpc": "2.0", "method": "notifications/initialized"}], []):
            refused = await http.post("/mcp", json=batch, headers=HEADERS)
            assert refused.status_code == 400
            error = refused.json()["error"]
            assert error["code"] == -32600
            assert "one JSON-RPC message per POST" in error["message"]
            assert "validation error" not in error["message"].lower()
        assert (await http.post("/mcp", json=INITIALIZE, headers=HEADERS)).status_code == 200


async def test_dns_rebinding_protection_and_healthz(shared_store: Store) -> None:
    async with http_server(shared_store) as server, httpx2.AsyncClient(base_url=server.base) as http:
        health = (await http.get("/healthz")).json()
        assert health["status"] in ("ok", "starting")
        # Anyone who reaches the port may ask /healthz: no process id, data directory or client count there.
        assert not {"pid", "data_dir", "clients"} & set(health)
        owner = httpx2.AsyncHTTPTransport(uds=str(shared_store.paths.http_socket))
        async with httpx2.AsyncClient(transport=owner, base_url="http://owner") as private:
            detail = (await private.get("/healthz")).json()
        assert detail["pid"] == shared_store.owner_pid()
        assert detail["data_dir"] == str(shared_store.data_dir)
        if detail["engine"] == "ready":
            assert detail["projections"]["error"] is None
            assert detail["projections"]["committed"] >= detail["projections"]["projected"] >= 0
        ok = await http.post("/mcp", json=INITIALIZE, headers=HEADERS)
        assert ok.status_code == 200
        evil_host = await http.post("/mcp", json=INITIALIZE, headers={**HEADERS, "Host": "evil.example:80"})
        assert evil_host.status_code == 421
        evil_origin = await http.post(
            "/mcp", json=INITIALIZE, headers={**HEADERS, "Origin": "http://evil.example"}
        )
        assert evil_origin.status_code == 403
        allowed_origin = await http.post(
            "/mcp", json=INITIALIZE, headers={**HEADERS, "Origin": "http://localhost:3000"}
        )
        assert allowed_origin.status_code == 200
        assert (await http.get("/healthz", headers={"Host": "evil.example"})).status_code == 421
        # The owner's admin routes are not reachable through the public front.
        assert (await http.post("/-/reindex")).status_code == 404


async def test_allowed_hosts_take_plain_names_and_keep_loopback(shared_store: Store) -> None:
    """README: "to serve other machines pass --host and list the names clients use in MNEMOGRAPH_ALLOWED_HOSTS".
    A name as clients write it (no port) must work on the server's port, loopback must keep working (the local
    clients `setup` configures use 127.0.0.1), and a refused name gets a message saying how to allow it."""
    env = {"MNEMOGRAPH_ALLOWED_HOSTS": "memory.internal, 192.0.2.2,mem.example.com:443"}
    async with (
        http_server(shared_store, "--host", "0.0.0.0", env=env, auth=True) as server,
        httpx2.AsyncClient(base_url=server.base) as http,
    ):
        port = server.base.rsplit(":", 1)[1]

        async def initialize(host: str) -> httpx2.Response:
            return await http.post("/mcp", json=INITIALIZE, headers={**HEADERS, "Host": host})

        # No token: an allowed name reaches the auth check (401), a refused one stops at the Host check (421).
        for host in (f"memory.internal:{port}", f"192.0.2.2:{port}", "memory.internal", "mem.example.com:443",
                     f"127.0.0.1:{port}", f"localhost:{port}"):  # fmt: skip
            assert (await initialize(host)).status_code == 401, host
        for host in (f"evil.example:{port}", f"mem.example.com:{port}", f"memory.internal.evil:{port}"):
            refused = await initialize(host)
            assert refused.status_code == 421, host
            message = refused.json()["message"]
            assert repr(host) in message
            assert "MNEMOGRAPH_ALLOWED_HOSTS" in message
        origin = await http.post(
            "/mcp", json=INITIALIZE, headers={**HEADERS, "Origin": "https://memory.internal"}
        )
        assert origin.status_code == 401
        foreign = await http.post(
            "/mcp", json=INITIALIZE, headers={**HEADERS, "Origin": "http://evil.example"}
        )
        assert foreign.status_code == 403
        assert "MNEMOGRAPH_ALLOWED_ORIGINS" in foreign.json()["message"]
        server.process.terminate()
        assert server.process.stderr is not None
        banner = server.process.stderr.read().decode()
    # Served on every address: the banner says which names it answers to, and how to add one.
    assert "answers to the host names 127.0.0.1, localhost, [::1], memory.internal, 192.0.2.2, " in banner
    assert "mem.example.com:443" in banner
    assert "MNEMOGRAPH_ALLOWED_HOSTS" in banner


async def test_a_malformed_allowed_host_is_refused_at_start(shared_store: Store) -> None:
    with anyio.fail_after(60):  # a server that started anyway would run until stopped
        done = await anyio.run_process(
            [
                MNEMOGRAPH,
                "serve",
                "--transport",
                "http",
                "--port",
                "0",
                "--data-dir",
                str(shared_store.data_dir),
            ],
            env={**os.environ, **shared_store.env(MNEMOGRAPH_ALLOWED_HOSTS="http://mem.example.com/mcp")},
            check=False,
        )
    assert done.returncode == 2
    assert "MNEMOGRAPH_ALLOWED_HOSTS takes comma-separated host names" in done.stderr.decode()
    assert b"MCP over streamable HTTP" not in done.stderr
