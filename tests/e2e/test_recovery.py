"""If the owner dies, the next request brings a new one up; sessions survive and acknowledged writes persist."""

from __future__ import annotations

import signal

import pytest
from mcp import Client

from tests.e2e.conftest import Store, await_for, call, http_server

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.slow]


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
async def test_a_stdio_session_survives_its_owner_dying(store: Store, sig: int) -> None:
    async with Client(store.stdio(), mode="legacy") as client:
        written = await call(
            client, "memory_write", {"content": "Written before the crash.", "scopes": ["user:r"]}
        )
        old = store.kill_owner(sig)
        # Same session, no new handshake from the client: the front-end starts an owner and replays it.
        read = await call(client, "memory_read", {"id": written["id"]})
        assert read["memory"]["content"] == "Written before the crash."
        assert store.owner_pid() not in (None, old)
        after = await call(
            client, "memory_write", {"content": "Written after the crash.", "scopes": ["user:r"]}
        )
        assert after["status"] == "added"


async def test_an_http_client_survives_its_owner_dying(store: Store) -> None:
    async with http_server(store) as server, Client(server.url) as client:
        written = await call(
            client, "memory_write", {"content": "HTTP before the crash.", "scopes": ["user:r"]}
        )
        old = store.kill_owner()
        read = await call(client, "memory_read", {"id": written["id"]})
        assert read["memory"]["content"] == "HTTP before the crash."
        await await_for(lambda: store.owner_pid() not in (None, old), within=30, what="a new owner")
        scopes = await call(client, "list_scopes", {})
        assert {"id": "user:r", "parent": None, "memories": 1} in scopes["scopes"]
