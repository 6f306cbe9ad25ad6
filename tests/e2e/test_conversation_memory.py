"""One conversation_write of long messages costs the owner a bounded amount of memory (attack8 finding F4).

The embedder ran up to 64 texts of 256 tokens through one forward pass; the attention scores of such a batch
took about a gigabyte at once, so a token holder sending a few conversations of long messages at a time could
exhaust the owner. Measured from the attacker's side: a real client over stdio and the peak resident memory
(``VmHWM``) of the real owner process.
"""

from __future__ import annotations

import random

import pytest
from mcp import Client

from tests.e2e.conftest import Store, call, peak_mib

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

MESSAGES = 40
# What the call may add to the owner's peak memory: its embedding batches (about 100 MB), the stores' own
# buffers and allocator slack. The starting commit took over 1 GB more for these 40 messages.
BUDGET_MIB = 450


def long_message(rnd: random.Random) -> str:
    words = ["the", "garden", "was", "quiet", "and", "we", "walked", "slowly", "home", "after", "dinner"]
    return " ".join(rnd.choice(words) for _ in range(6400))[:32000]


async def test_a_conversation_of_long_messages_costs_bounded_memory(store: Store) -> None:
    rnd = random.Random(4)
    async with Client(store.stdio(default_scope="team:talk")) as client:
        await call(
            client, "memory_write", {"content": "The garden gate squeaks."}
        )  # the owner is up and warm
        pid = store.owner_pid()
        assert pid is not None
        before = peak_mib(pid)
        messages = [
            {"role": "user", "content": long_message(rnd), "time": f"2024-05-01T10:{i:02d}:00Z"}
            for i in range(MESSAGES)
        ]
        receipt = await call(client, "conversation_write", {"conversation": "walk", "messages": messages})
        assert receipt["added"] == MESSAGES
        assert peak_mib(pid) - before < BUDGET_MIB
        found = await call(
            client, "recall", {"query": "walked slowly home after dinner", "kinds": ["message"]}
        )
        assert found["results"]
