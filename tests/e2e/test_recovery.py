"""If the owner dies, the next request brings a new one up; sessions survive and acknowledged writes persist."""

from __future__ import annotations

import json
import signal

import anyio
import httpx2
import pytest
from mcp import Client

from tests.e2e.conftest import HEADERS, Store, await_for, call, http_server

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


async def test_an_owner_killed_during_a_purge_gives_the_http_client_an_error_not_an_empty_200(
    store: Store,
) -> None:
    async with http_server(store) as server:
        async with Client(server.url) as client:
            for n in range(20):
                await call(client, "memory_write", {"content": f"Doomed note {n}.", "scopes": ["team:gone"]})
        request = {
            "jsonrpc": "2.0",
            "id": 77,
            "method": "tools/call",
            "params": {"name": "purge", "arguments": {"scope": "team:gone", "confirm": "team:gone"}},
        }
        answer: list[httpx2.Response] = []
        async with (
            httpx2.AsyncClient(timeout=httpx2.Timeout(30.0, read=120.0)) as http,
            anyio.create_task_group() as tg,
        ):

            async def purge() -> None:
                answer.append(await http.post(server.url, json=request, headers=HEADERS))

            tg.start_soon(purge)
            # The owner has taken the purge on (the call is in flight there, with no answer yet): kill it.
            await await_for(lambda: _owner_busy(store) or bool(answer), within=30, what="the purge to start")
            assert not answer, "the purge finished before the owner could be killed"
            store.kill_owner()
        response = answer[0]
        if response.headers["content-type"].startswith("text/event-stream"):
            messages = [
                json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")
            ]
        else:
            messages = [response.json()]
        assert messages, "the answer came without a message"
        assert messages[-1]["id"] == 77
        assert "outcome is unknown" in messages[-1]["error"]["message"]
        assert "before you retry" in messages[-1]["error"]["message"]
        # The client can act on it: a new owner answers, and the store says whether the purge happened.
        async with Client(server.url) as client:
            scopes = {s["id"] for s in (await call(client, "list_scopes", {}))["scopes"]}
            if "team:gone" in scopes:
                await call(client, "purge", {"scope": "team:gone", "confirm": "team:gone"})
            assert "team:gone" not in {s["id"] for s in (await call(client, "list_scopes", {}))["scopes"]}


def _owner_busy(store: Store) -> bool:
    """Whether the owner is handling a request: its private /healthz counts requests and the fronts' leases
    (not itself)."""
    transport = httpx2.HTTPTransport(uds=str(store.paths.http_socket))
    with httpx2.Client(transport=transport, base_url="http://owner", timeout=5) as owner:
        health = owner.get("/healthz").json()
    return bool(health["clients"] > len(health["fronts"]))
