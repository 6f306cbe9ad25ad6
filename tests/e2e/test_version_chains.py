"""A memory amended a few times stays cheap to read, recall with history and erase (attack8 finding F3).

The version chain was read with an undirected variable-length pattern under Kùzu's default WALK semantic: the
walks going back and forth along the chain grow exponentially with its length, so reading a memory with six
versions took the owner past 4 GB. Measured from the attacker's side: a real client over stdio, and the peak
resident memory (``VmHWM``) of the real owner process.
"""

from __future__ import annotations

import pytest
from mcp import Client

from tests.e2e.conftest import Store, call, peak_mib
from tools._wire import short_id

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

SCOPE = "team:chain"
# What one read of a few short versions may add to the owner's peak memory: generous against allocator noise,
# far below the gigabytes the walk took (past 4 GB at six versions, on the starting commit).
BUDGET_MIB = 96


async def test_reading_recalling_and_erasing_an_amended_memory_costs_what_its_versions_hold(
    store: Store,
) -> None:
    async with Client(store.stdio(default_scope=SCOPE)) as client:
        first = await call(client, "memory_write", {"content": "The office plant is watered on Monday."})
        ids = [first["id"]]
        for day in ("Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"):
            amended = await call(
                client, "amend", {"id": ids[-1], "content": f"The office plant is watered on {day}."}
            )
            ids.append(amended["id"])
        pid = store.owner_pid()
        assert pid is not None
        before = peak_mib(pid)

        read = await call(client, "memory_read", {"id": ids[-1]})
        # memory_read gives full ids, the write and amend receipts short ones (docs/mcp.md, "Memory ids").
        assert [short_id(v["id"]) for v in read["versions"]] == ids  # oldest first, every version once
        older = await call(client, "memory_read", {"id": ids[2]})
        assert [short_id(v["id"]) for v in older["versions"]] == ids
        history = await call(
            client, "recall", {"query": "office plant watered", "include_history": True, "k": 20}
        )
        assert set(ids) <= {short_id(hit["id"]) for hit in history["results"]}
        assert peak_mib(pid) - before < BUDGET_MIB

        # An erasure rewrites the stores (a cost of its own, the same for one version); what matters here is
        # that it returns, having erased every version (the starting commit's owner died in it).
        full = read["versions"][-1]["id"]
        erased = await call(client, "erase", {"id": ids[-1], "confirm": full})
        assert sorted(short_id(e) for e in erased["erased"]) == sorted(ids)
        for mid in ids:
            result = await client.call_tool("memory_read", {"id": mid})
            assert result.is_error
