"""conversation_write over MCP: a conversation handed over whole or message by message, recallable at once,
idempotent, all-or-nothing, with the access rules of memory_write; and the digest the product builds from it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from scopes import Grant, Level, Principal, ScopeId
from storage import Engine
from storage.domain.errors import NotFound, ScopeDenied
from storage.domain.models import MessageIn
from tests.storage.test_week_digests import a_week, import_recorded, week_digests
from tests.tools.conftest import fails, ok
from tools._wire import short_id

pytestmark = pytest.mark.anyio

CHAT = [
    {
        "role": "user",
        "content": "I just moved to Lisbon for a job at Acme Corp.",
        "time": "2024-05-01T09:00:00Z",
    },
    {"role": "assistant", "content": "Congratulations! How is the new flat?", "time": "2024-05-01T09:00:20Z"},
    {
        "role": "user",
        "content": "Small but sunny. My sister Ines visits on June 3.",
        "time": "2024-05-01T09:01:00Z",
    },
]


def _ids(out: dict[str, Any]) -> list[str]:
    return [m["id"] for m in out["messages"]]


async def test_a_whole_conversation_is_stored_as_messages_and_recallable_at_once(
    client: Client, engine: Engine
) -> None:
    out = await ok(
        client, "conversation_write", {"conversation": "chat-1", "messages": CHAT, "scopes": ["user:ana"]}
    )
    assert [m["status"] for m in out["messages"]] == ["added"] * 3
    assert out["added"] == 3
    assert out["digest"] == "scheduled"
    first = engine.read(out["messages"][0]["id"]).memory
    assert first.kind == "message"
    assert first.scopes == ("user:ana",)
    assert first.event_time.isoformat() == "2024-05-01T09:00:00+00:00"
    assert first.metadata == {"conversation": "chat-1", "role": "user"}
    assert engine.read(out["messages"][1]["id"]).memory.metadata["speaker"] == "assistant"
    # Recallable as soon as the call returned, before any digest exists.
    found = await ok(client, "recall", {"query": "Where did I move?", "scopes": ["user:ana"]})
    assert found["results"][0]["id"] == out["messages"][0]["id"]
    assert found["results"][0]["kind"] == "message"


async def test_one_message_at_a_time_and_resends_do_not_duplicate(client: Client, engine: Engine) -> None:
    ids = []
    for m in CHAT:
        out = await ok(
            client, "conversation_write", {"conversation": "chat-2", "messages": [m], "scopes": ["user:ana"]}
        )
        ids += _ids(out)
    again = await ok(
        client, "conversation_write", {"conversation": "chat-2", "messages": CHAT, "scopes": ["user:ana"]}
    )
    assert _ids(again) == ids
    assert [m["status"] for m in again["messages"]] == ["duplicate"] * 3
    assert again["added"] == 0
    # The same words in another conversation are a message of their own; so are repeated words with their time.
    other = await ok(
        client, "conversation_write", {"conversation": "chat-3", "messages": CHAT[:1], "scopes": ["user:ana"]}
    )
    assert other["messages"][0]["status"] == "added"
    assert _ids(other)[0] not in ids
    twice = [
        {"role": "user", "content": "ok", "time": "2024-05-02T10:00:00Z"},
        {"role": "user", "content": "ok", "time": "2024-05-02T10:05:00Z"},
    ]
    out = await ok(
        client, "conversation_write", {"conversation": "chat-2", "messages": twice, "scopes": ["user:ana"]}
    )
    assert len(set(_ids(out))) == 2
    # A client's own message id identifies a message sent without a time.
    tagged = {"role": "user", "content": "ok", "id": "m-77"}
    a = await ok(
        client, "conversation_write", {"conversation": "chat-2", "messages": [tagged], "scopes": ["user:ana"]}
    )
    b = await ok(
        client, "conversation_write", {"conversation": "chat-2", "messages": [tagged], "scopes": ["user:ana"]}
    )
    assert _ids(a) == _ids(b)
    assert b["messages"][0]["status"] == "duplicate"
    assert engine.read(_ids(a)[0]).memory.metadata["message_id"] == "m-77"


@pytest.mark.parametrize(
    ("bad", "said"),
    [
        ({"role": "robot", "content": "hi"}, "role"),
        ({"role": "user", "content": ""}, "content"),
        ({"role": "user", "content": "hi", "time": "yesterday"}, "ISO 8601"),
        ({"role": "user", "content": "hi", "colour": "red"}, "colour"),
    ],
)
async def test_one_bad_message_rejects_the_call_and_stores_nothing(
    client: Client, engine: Engine, bad: dict[str, Any], said: str
) -> None:
    _code, text = await fails(
        client,
        "conversation_write",
        {"conversation": "chat-4", "messages": [*CHAT, bad], "scopes": ["user:bo"]},
    )
    assert said in text
    with pytest.raises(NotFound):  # not even the scope was created
        engine.list("user:bo")
    found = await ok(client, "recall", {"query": "Lisbon Acme", "scopes": ["user:bo"]})
    assert found["results"] == []


async def test_a_message_whose_text_is_empty_after_cleaning_names_its_place(
    client: Client, engine: Engine
) -> None:
    _code, text = await fails(
        client,
        "conversation_write",
        {
            "conversation": "chat-5",
            "messages": [*CHAT, {"role": "user", "content": "   "}],
            "scopes": ["user:bo"],
        },
    )
    assert "message 3" in text
    assert "nothing was written" in text
    with pytest.raises(NotFound):
        engine.list("user:bo")
    found = await ok(client, "recall", {"query": "Lisbon Acme", "scopes": ["user:bo"]})
    assert found["results"] == []


async def test_a_principal_may_hand_over_only_where_it_may_write(engine: Engine) -> None:
    reader = Principal("bot", grants=(Grant(ScopeId.parse("user:ana"), Level.READ),))
    with pytest.raises(ScopeDenied):
        engine.write_conversation("c", [MessageIn("user", "I like tea.")], ["user:ana"], principal=reader)
    assert engine.recall("tea", ["user:ana"]) == []


async def test_recall_answers_with_messages_a_digest_led_to_never_the_digest(
    client: Client, engine: Engine
) -> None:
    out = await ok(
        client, "conversation_write", {"conversation": "chat-6", "messages": CHAT, "scopes": ["user:ana"]}
    )
    assert engine.consolidate() == 1
    found = await ok(
        client, "recall", {"query": "Lisbon Acme sister Ines June", "scopes": ["user:ana"], "explain": True}
    )
    results = found["results"]
    assert {r["kind"] for r in results} == {"message"}
    lifted = [r for r in results if "digest" in r["explain"]]
    assert lifted
    assert all(short_id(r["id"]) in _ids(out) for r in lifted)  # explain=true gives full ids
    assert all("its conversation's digest" in r["why"] for r in lifted)


async def test_recall_answers_with_a_days_memories_its_digest_led_to_never_the_digest(
    client: Client, engine: Engine
) -> None:
    """Plain memory_write memories of one scope and day: the day's digest leads recall to them, and says so."""
    lines = [
        "Ana moved to Lisbon in March for a job at Acme Corp.",
        "Ana's sister Ines visits her on June 3.",
        "Ana is allergic to peanuts.",
    ]
    ids = [(await ok(client, "memory_write", {"content": c, "scopes": ["user:ana"]}))["id"] for c in lines]
    assert engine.consolidate() == 1
    query = {"query": "Lisbon Acme sister Ines June peanuts", "scopes": ["user:ana"], "explain": True}
    results = (await ok(client, "recall", query))["results"]
    assert {r["kind"] for r in results} == {"note"}
    assert {short_id(r["id"]) for r in results} <= set(ids)
    lifted = [r for r in results if "digest" in r["explain"]]
    assert all("its day's or week's digest" in r["why"] for r in lifted)
    shown = (await ok(client, "recall", {**query, "kinds": ["summary"]}))["results"]
    (digest,) = shown
    assert "built by Mnemograph from 3 memories" in digest["why"]


async def test_a_scopes_week_digest_leads_recall_over_mcp_only_to_memories_the_query_found(
    client: Client, engine: Engine, tmp_path: Path
) -> None:
    """Memories of one scope over two days of a past week: its week digest's match lifts only memories the
    lanes found, says so in ``why``, and is shown itself only when summaries are asked for."""
    ids = import_recorded(engine, tmp_path, a_week())
    query = {"query": "Lisbon Acme cat Miso", "scopes": ["user:ana"], "explain": True, "k": 5}
    before = {r["id"] for r in (await ok(client, "recall", query))["results"]}
    engine.consolidate()
    (week,) = week_digests(engine)
    results = (await ok(client, "recall", query))["results"]
    assert {r["kind"] for r in results} <= {"note"}
    assert {r["id"] for r in results} <= before
    assert {r["id"] for r in results} <= set(ids.values())
    lifted = [r for r in results if "digest" in r["explain"]]
    assert lifted
    assert all("its day's or week's digest" in r["why"] for r in lifted)
    shown = (await ok(client, "recall", {**query, "kinds": ["summary"]}))["results"]
    weekly = [r for r in shown if r["id"] == week]
    assert weekly
    assert "built by Mnemograph from 6 memories" in weekly[0]["why"]
