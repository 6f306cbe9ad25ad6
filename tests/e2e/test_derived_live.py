"""A running server builds the derived relation that two plain facts justify, with no model and no command.

Found attacking session 19's offline containment: "The Grand Palm is located in Udaipur" and "Udaipur lies in
Rajasthan" written through a client were chained at write time, but the worker that builds the derived memory
was never woken by a plain write: the derivation waited for a conversation, a restart or `mnemograph digests`,
so a user who only writes facts never met it (the engine tests call ``consolidate`` themselves).
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp import Client

from tests.e2e.conftest import Store, call

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def test_a_running_server_derives_a_chain_written_as_plain_facts(store: Store) -> None:
    params = store.stdio()
    params.env = {**(params.env or {}), "MNEMOGRAPH_DIGEST_QUIET": "0"}
    async with Client(params, mode="legacy") as client:
        hotel = await call(
            client, "memory_write", {"content": "The Grand Palm is located in Udaipur.", "kind": "fact"}
        )
        city = await call(client, "memory_write", {"content": "Udaipur lies in Rajasthan.", "kind": "fact"})
        assert hotel["relations"] == ["Grand Palm —located_in→ Udaipur"]
        assert city["relations"] == ["Udaipur —located_in→ Rajasthan"]
        query = {"query": "Is the Grand Palm in Rajasthan?", "kinds": ["summary"]}
        found: list[dict[str, Any]] = []
        with anyio.move_on_after(20):
            while not found:  # built in the background: poll what a user would see
                found = (await call(client, "recall", query))["results"]
                await anyio.sleep(0.1)
        assert [r["content"] for r in found] == [
            "Grand Palm located in Rajasthan (derived: Grand Palm located in Udaipur; Udaipur located in Rajasthan)"
        ]
