"""A conversation handed over by a real MCP client over stdio, digested by the product, and the
``mnemograph digests`` command that rebuilds the digests through a running owner."""

from __future__ import annotations

import json
import signal

import anyio
import pytest
from mcp import Client

from tests.e2e.conftest import MNEMOGRAPH, Store, call
from tools._wire import short_ids

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

MESSAGES = [
    {
        "role": "user",
        "content": "I adopted a greyhound called Pixel last Saturday.",
        "time": "2024-03-09T10:00:00Z",
    },
    {"role": "assistant", "content": "Lovely! Greyhounds are calm at home.", "time": "2024-03-09T10:00:30Z"},
    {
        "role": "user",
        "content": "My vet, Dr Okafor in Leeds, says Pixel needs a special diet.",
        "time": "2024-03-09T10:02:00Z",
    },
]


async def test_a_conversation_over_stdio_is_recallable_at_once_and_digested_on_request(store: Store) -> None:
    async with Client(store.stdio(), mode="legacy") as client:
        out = await call(
            client,
            "conversation_write",
            {"conversation": "vet-chat", "messages": MESSAGES, "scopes": ["user:kim"]},
        )
        assert [m["status"] for m in out["messages"]] == ["added"] * 3
        found = await call(client, "recall", {"query": "greyhound Pixel", "scopes": ["user:kim"]})
        assert found["results"][0]["id"] in {m["id"] for m in out["messages"]}
        # The owner is running: the command goes through it and digests now, whatever the quiet time.
        done = await anyio.run_process(
            [MNEMOGRAPH, "digests", "--json", "--data-dir", str(store.data_dir)], check=False
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == {"digests_built": 1, "ok": True}
        shown = await call(
            client,
            "recall",
            {"query": "Pixel vet diet Leeds", "scopes": ["user:kim"], "kinds": ["summary"], "explain": True},
        )
        (digest,) = shown["results"]
        assert digest["kind"] == "summary"
        assert "digest built by Mnemograph from 3 messages" in digest["why"]
        read = await call(client, "memory_read", {"id": digest["id"]})
        # The digest's metadata names its sources by full id; the receipts showed their first 12 characters.
        assert sorted(short_ids(read["memory"]["metadata"]["sources"])) == sorted(
            m["id"] for m in out["messages"]
        )
    store.kill_owner(signal.SIGTERM)
    # Without an owner the command opens the store itself.
    again = await anyio.run_process([MNEMOGRAPH, "digests", "--data-dir", str(store.data_dir)], check=False)
    assert again.returncode == 0, again.stderr
    assert again.stdout.decode().strip() == "1 conversation digest(s) rebuilt"


async def test_an_amended_or_unlinked_message_leaves_its_digest_at_once_over_stdio(store: Store) -> None:
    """A real client corrects one message and takes another out of a shared scope: the digest recall shows in
    that scope no longer holds either's old words, before and after the consolidator rebuilds it."""
    digests = [MNEMOGRAPH, "digests", "--json", "--data-dir", str(store.data_dir)]
    async with Client(store.stdio(), mode="legacy") as client:
        out = await call(
            client,
            "conversation_write",
            {"conversation": "vet-chat", "messages": MESSAGES, "scopes": ["user:kim", "team:vets"]},
        )
        assert (await anyio.run_process(digests, check=False)).returncode == 0
        ask = {"query": "Pixel vet diet Leeds greyhound", "kinds": ["summary"]}

        async def said(scope: str) -> str:
            found = await call(client, "recall", {**ask, "scopes": [scope]})
            return "\n".join(r["content"] for r in found["results"])

        assert "Okafor" in await said("team:vets")
        assert "greyhound" in await said("team:vets")
        vet, adopted = out["messages"][2]["id"], out["messages"][0]["id"]
        await call(
            client, "amend", {"id": vet, "content": "My vet, Dr Mensah in York, says Pixel needs a diet."}
        )
        await call(client, "unlink_memory", {"id": adopted, "scope": "team:vets"})
        for scope in ("team:vets", "user:kim"):
            assert "Okafor" not in await said(scope)
        assert "greyhound" not in await said("team:vets")
        done = await anyio.run_process(digests, check=False)
        assert json.loads(done.stdout)["digests_built"] == 1
        assert "greyhound" not in await said("team:vets")  # rebuilt only where every message still is
        kim = await said("user:kim")
        assert "Mensah" in kim
        assert "Okafor" not in kim
        assert "greyhound" in kim
