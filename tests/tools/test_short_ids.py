"""Short ids (issue 14): tools show a memory's first 12 hex characters, and every tool takes them back.

An id is 128 bits of SHA-256 over the content, so two contents whose ids share their first 12 hex characters
can be found by a birthday search (about 2**24 contents hashed; done once, offline, with
``hashlib.sha256(f"Parking note {i}: ...".encode()).hexdigest()[:12]`` over i). They stand for the rare case a
demanding user still asks about: a short id that, by the time it is sent back, matches two memories.
"""

from __future__ import annotations

import re

import pytest
from mcp import Client

from storage import Engine, content_id
from tests.tools.conftest import DEFAULT_SCOPE, fails, ok

pytestmark = pytest.mark.anyio

TWIN_A = "Parking note 18667272: the spare bike key is in the drawer by the door."
TWIN_B = "Parking note 29475334: the spare bike key is in the drawer by the door."
SHARED = "3706010ad92e"  # the first 12 hex characters of both ids


def test_the_twins_share_a_short_id() -> None:
    a, b = content_id(TWIN_A), content_id(TWIN_B)
    assert a[:12] == b[:12] == SHARED
    assert a != b


async def test_a_recalled_id_goes_back_into_every_tool(client: Client, engine: Engine) -> None:
    note = await ok(client, "memory_write", {"content": "Ana's locker code is 4471.", "scopes": ["user:ana"]})
    await ok(client, "memory_write", {"content": "The team lunch is on Thursdays.", "scopes": ["user:ana"]})
    found = await ok(client, "recall", {"query": "Ana locker code", "scopes": ["user:ana"]})
    top = found["results"][0]
    assert top["content"] == "Ana's locker code is 4471."
    assert top["id"] == note["id"]
    assert re.fullmatch(r"[0-9a-f]{12}", top["id"])

    # memory_read gives the full id; every other tool takes the short one as it came.
    record = await ok(client, "memory_read", {"id": top["id"]})
    full = record["memory"]["id"]
    assert re.fullmatch(r"[0-9a-f]{32}", full)
    assert full.startswith(top["id"])
    linked = await ok(client, "link_memory", {"id": top["id"], "scope": "team:lockers"})
    assert (linked["id"], sorted(linked["scopes"]), linked["changed"]) == (
        top["id"],
        ["team:lockers", "user:ana"],
        True,
    )
    unlinked = await ok(client, "unlink_memory", {"id": top["id"], "scope": "team:lockers"})
    assert (unlinked["scopes"], unlinked["changed"]) == (["user:ana"], True)
    amended = await ok(client, "amend", {"id": top["id"], "content": "Ana's locker code is 5582."})
    assert amended["supersedes"] == top["id"]
    assert re.fullmatch(r"[0-9a-f]{12}", amended["id"])

    # A reason that names an earlier version names it by a short id memory_read takes.
    again = await ok(client, "recall", {"query": "locker code 4471", "scopes": ["user:ana"]})
    assert again["results"][0]["id"] == amended["id"]
    named = re.search(r"matched earlier version ([0-9a-f]+) ", again["results"][0]["why"])
    assert named is not None, again["results"][0]["why"]
    assert named.group(1) == top["id"]
    earlier = await ok(client, "memory_read", {"id": named.group(1)})
    assert earlier["memory"]["content"] == "Ana's locker code is 4471."
    assert earlier["memory"]["status"] == "superseded"

    retired = await ok(client, "retire", {"id": again["results"][0]["id"]})
    assert retired["id"] == amended["id"]
    # The store agrees: the chain the short ids named was changed, nothing else.
    chain = engine.read(full).versions
    assert [(m.content, m.status.value) for m in chain] == [
        ("Ana's locker code is 4471.", "superseded"),
        ("Ana's locker code is 5582.", "retired"),
    ]
    assert engine.read(content_id("The team lunch is on Thursdays.")).memory.status.value == "current"

    # Full ids are still accepted, and explain=true gives them.
    assert (await ok(client, "memory_read", {"id": full}))["memory"]["id"] == full
    history = await ok(
        client,
        "recall",
        {"query": "locker code", "scopes": ["user:ana"], "include_history": True, "explain": True},
    )
    assert {r["id"] for r in history["results"]} >= {full, chain[1].id}


async def test_message_receipts_give_ids_memory_read_takes(client: Client) -> None:
    out = await ok(
        client,
        "conversation_write",
        {
            "conversation": "chat-1",
            "messages": [
                {"role": "user", "content": "I moved to Porto last spring."},
                {"role": "assistant", "content": "Noted: you live in Porto."},
            ],
        },
    )
    ids = [m["id"] for m in out["messages"]]
    assert all(re.fullmatch(r"[0-9a-f]{12}", i) for i in ids)
    contents = [(await ok(client, "memory_read", {"id": i}))["memory"]["content"] for i in ids]
    assert contents == ["I moved to Porto last spring.", "Noted: you live in Porto."]


async def test_a_short_id_matching_two_memories_is_refused_naming_both_and_changes_nothing(
    client: Client, engine: Engine
) -> None:
    a = await ok(client, "memory_write", {"content": TWIN_A})
    b = await ok(client, "memory_write", {"content": TWIN_B})
    assert a["id"] == b["id"] == SHARED  # the rare case: both shown with the same 12 characters
    full_a, full_b = content_id(TWIN_A), content_id(TWIN_B)
    for tool, extra in (
        ("memory_read", {}),
        ("amend", {"content": "Parking note: the spare bike key is in the blue box."}),
        ("retire", {}),
        ("link_memory", {"scope": "team:home"}),
        ("unlink_memory", {"scope": DEFAULT_SCOPE}),
    ):
        code, text = await fails(client, tool, {"id": SHARED, **extra})
        assert code == "ambiguous", (tool, text)
        # Both candidates by full id, with a glimpse of their content, and what to do next.
        assert full_a in text, text
        assert full_b in text, text
        assert "Parking note 18667272" in text
        assert "Parking note 29475334" in text
        assert "send the full 32-character id" in text
        assert "nothing was changed" in text
    # Nothing changed: both current, in their one scope, with no other version; no scope was made.
    for full in (full_a, full_b):
        record = engine.read(full)
        assert record.memory.status.value == "current"
        assert list(record.memory.scopes) == [DEFAULT_SCOPE]
        assert len(record.versions) == 1
    assert "team:home" not in {s["id"] for s in (await ok(client, "list_scopes", {}))["scopes"]}

    # The full id the error gave goes through.
    amended = await ok(
        client, "amend", {"id": full_b, "content": "Parking note: the key is in the blue box."}
    )
    assert amended["supersedes"] == SHARED
    assert engine.read(full_b).memory.status.value == "superseded"
    assert engine.read(full_a).memory.status.value == "current"
