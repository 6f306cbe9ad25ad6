"""The SDK client over stdio: ``mnemograph serve`` as a subprocess, attached to its owner over a socket."""

from __future__ import annotations

import pytest
from mcp import Client, MCPError

from tests.e2e.conftest import Store, call, error_text
from tools import ALL_TOOLS
from tools._wire import short_id

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_every_tool_over_stdio(shared_store: Store, mode: str) -> None:
    scope = f"project:stdio-{mode}"
    async with Client(shared_store.stdio(default_scope=scope), mode=mode) as client:
        assert client.instructions
        assert "long-term memory" in client.instructions
        names = [t.name for t in (await client.list_tools()).tools]
        assert names == [spec.name for spec in ALL_TOOLS]

        written = await call(client, "memory_write", {"content": "Ada Lovelace wrote the first program."})
        assert written["scopes"] == [scope]  # the session's default scope, sent by the front-end
        other = await call(client, "memory_write", {"content": "The analytical engine was never built."})
        found = await call(client, "recall", {"query": "who wrote the first program"})
        assert found["results"][0]["id"] == written["id"]

        amended = await call(
            client,
            "amend",
            {"id": written["id"], "content": "Ada Lovelace published the first program in 1843."},
        )
        record = await call(client, "memory_read", {"id": amended["id"]})
        assert [short_id(v["id"]) for v in record["versions"]] == [written["id"], amended["id"]]
        assert record["memory"]["provenance"]["client"] == "mcp"  # the SDK client's clientInfo name
        retired = await call(client, "retire", {"id": other["id"]})
        assert retired["id"] == other["id"]
        scopes = await call(client, "list_scopes", {})
        assert {"id": scope, "parent": None, "memories": 1} in scopes["scopes"]

        failed = await client.call_tool("amend", {"id": written["id"], "content": "Again."})
        assert f"amend {record['memory']['id']} instead" in error_text(failed)  # errors name full ids
        bad = await client.call_tool("recall", {"query": "x", "k": "many"})
        assert "k: Input should be a valid integer" in error_text(bad)
        with pytest.raises(MCPError, match="unknown tool"):
            await client.call_tool("remember_everything", {})

        purged = await call(client, "purge", {"scope": scope, "confirm": scope})
        assert purged["memories_deleted"] == 3


async def test_a_second_client_attaches_to_the_running_owner(shared_store: Store) -> None:
    # How fast that is, is measured by bench/mcp.py (docs/benchmarks/mcp.md), not asserted here.
    async with Client(shared_store.stdio(), mode="legacy") as first:
        await call(first, "list_scopes", {})
        owner = shared_store.owner_pid()
        async with Client(shared_store.stdio(), mode="legacy") as second:
            await second.list_tools()
            assert shared_store.owner_pid() == owner  # no second owner
            await call(second, "list_scopes", {})
