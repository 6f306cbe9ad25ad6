"""An in-memory MCP client on the real server over a real Engine in tmp_path (no transport, no subprocess)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp import Client
from mcp.types import Implementation

from server.app import build_server
from storage import Engine

DEFAULT_SCOPE = "user:tester"
CLIENT_NAME = "tests"


@pytest.fixture
async def client(engine: Engine) -> AsyncIterator[Client]:
    """A connected client (the initialize handshake included) named ``tests``, default scope ``user:tester``."""

    async def source() -> Engine:
        return engine

    server = build_server(source, default_scopes=(DEFAULT_SCOPE,))
    async with Client(server, mode="legacy", client_info=Implementation(name=CLIENT_NAME, version="1")) as c:
        yield c


async def ok(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Call a tool that must succeed; returns its structured content (already checked against its schema)."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def fails(client: Client, tool: str, arguments: dict[str, Any]) -> tuple[str, str]:
    """Call a tool that must fail with an error result; returns (error code, the text the model reads)."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    assert result.structured_content is None
    text = result.content[0].text  # type: ignore[union-attr]
    assert result.meta is not None
    return result.meta["mnemograph/error"]["code"], text
