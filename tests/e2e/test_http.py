"""The SDK client over streamable HTTP: the HTTP front in a subprocess (uvicorn), proxying to its owner."""

from __future__ import annotations

import httpx2
import pytest
from mcp import Client, MCPError

from tests.e2e.conftest import HEADERS, INITIALIZE, Store, call, error_text, http_server
from tools import ALL_TOOLS

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
        assert (await call(client, "memory_read", {"id": amended["id"]}))["memory"]["supersedes"] == written[
            "id"
        ]
        await call(client, "retire", {"id": amended["id"]})
        assert scope in [s["id"] for s in (await call(client, "list_scopes", {}))["scopes"]]
        missing = await client.call_tool("memory_read", {"id": "feedfacefeedface"})
        assert error_text(missing) == "no memory with id feedfacefeedface; call recall to find it"
        with pytest.raises(MCPError, match="unknown tool"):
            await client.call_tool("nope", {})
        assert (await call(client, "purge", {"scope": scope, "confirm": scope}))["memories_deleted"] == 2


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


async def test_allowed_hosts_are_configurable(shared_store: Store) -> None:
    env = {"MNEMOGRAPH_ALLOWED_HOSTS": "memory.internal:*,127.0.0.1:*"}
    async with http_server(shared_store, env=env) as server, httpx2.AsyncClient(base_url=server.base) as http:
        named = await http.post("/mcp", json=INITIALIZE, headers={**HEADERS, "Host": "memory.internal:8765"})
        assert named.status_code == 200
        other = await http.post("/mcp", json=INITIALIZE, headers={**HEADERS, "Host": "localhost:8765"})
        assert other.status_code == 421
