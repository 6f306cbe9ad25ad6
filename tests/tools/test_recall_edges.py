"""Issue 14's promises tried from outside, as a client meets them (try14 findings F1-F3).

Each test fails on de01952: retire took a time of effect in the future, since/until dated facts by their
write, and a token budget smaller than the best result answered without it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from mcp import Client

from tests.tools.conftest import fails, ok

pytestmark = pytest.mark.anyio


async def test_retire_refuses_a_time_of_effect_in_the_future_and_changes_nothing(client: Client) -> None:
    """docs/recall.md: retire's effective_at "may not be in the future, nor before the ... version became
    valid", as for amend. A future one used to be taken: the memory left recall now, valid until 2030."""
    m = await ok(
        client,
        "memory_write",
        {"content": "Sam drives a red Fiat.", "kind": "fact", "valid_from": "2024-01-01"},
    )
    future = (datetime.now(UTC) + timedelta(days=400)).date().isoformat()
    code, text = await fails(client, "retire", {"id": m["id"], "effective_at": future})
    assert code == "invalid_input"
    assert text.startswith("effective_at (")
    assert "is in the future" in text
    code, text = await fails(client, "retire", {"id": m["id"], "effective_at": "2010-01-01"})
    assert code == "invalid_input"
    assert text.startswith("effective_at (")
    assert "before the memory became valid" in text
    assert "pass a later effective_at" in text  # says what to do next
    # Nothing changed: still current, still recalled, and retiring it properly still works.
    read = await ok(client, "memory_read", {"id": m["id"]})
    assert read["memory"]["status"] == "current"
    assert read["memory"]["valid_to"] is None
    found = await ok(client, "recall", {"query": "what does Sam drive"})
    assert [r["id"] for r in found["results"]][:1] == [m["id"]]
    out = await ok(client, "retire", {"id": m["id"], "effective_at": "2025-06-30"})
    assert out["valid_to"].startswith("2025-06-30")


async def test_since_and_until_keep_only_memories_that_happened_in_the_window(client: Client) -> None:
    """since/until filter on event time; facts and preferences have none (docs/recall.md, "Time"), so
    they are not in a window because they were written in it, nor out of one because they were written
    after it."""
    now = datetime.now(UTC).replace(microsecond=0)
    facts = [
        await ok(client, "memory_write", {"content": "Sam lives in a flat in Leeds.", "kind": "fact"}),
        await ok(client, "memory_write", {"content": "Sam prefers tea over coffee.", "kind": "preference"}),
        await ok(
            client,
            "memory_write",
            {"content": "Sam has been vegetarian for years.", "kind": "fact", "valid_from": "2020-01-01"},
        ),
    ]
    hike = await ok(
        client,
        "memory_write",
        {
            "content": "Sam went hiking in the Peak District.",
            "kind": "event",
            "event_time": (now - timedelta(days=2)).isoformat(),
        },
    )
    pottery = await ok(
        client,
        "memory_write",
        {"content": "Sam did a pottery class.", "kind": "event", "event_time": "2023-03-02T10:00:00Z"},
    )
    every = await ok(client, "recall", {"query": "Sam", "k": 20})
    assert {r["id"] for r in every["results"]} >= {f["id"] for f in facts}  # all there without a window

    recent = await ok(
        client, "recall", {"query": "Sam", "k": 20, "since": (now - timedelta(days=7)).isoformat()}
    )
    assert [r["id"] for r in recent["results"]] == [hike["id"]], [r["content"] for r in recent["results"]]
    before = await ok(client, "recall", {"query": "Sam", "k": 20, "until": "2024-01-01"})
    assert [r["id"] for r in before["results"]] == [pottery["id"]], [r["content"] for r in before["results"]]


async def test_a_budget_smaller_than_the_best_result_shows_it_cut_to_fit(client: Client) -> None:
    """The best result is kept, cut to the budget with the memory_read pointer, rather than left out for
    being long while weaker short ones stay (or nothing at all comes back)."""
    items = " ".join(f"Item {i}: settle roadmap detail {i} with the platform team." for i in range(120))
    notes = await ok(
        client, "memory_write", {"content": f"Quarterly roadmap meeting notes. {items}", "kind": "note"}
    )
    for text in ("The roadmap review is on Thursday.", "I commute by bike.", "Ramen is my favourite food."):
        await ok(client, "memory_write", {"content": text, "kind": "note"})
    full = await ok(client, "recall", {"query": "quarterly roadmap meeting notes"})
    assert full["results"][0]["id"] == notes["id"]

    for budget in (100, 10, 1):
        out = await ok(client, "recall", {"query": "quarterly roadmap meeting notes", "token_budget": budget})
        assert out["results"], budget
        best = out["results"][0]
        assert best["id"] == notes["id"], (budget, [r["content"][:40] for r in out["results"]])
        shown, _, pointer = best["content"].partition("… [")
        assert len(shown) == min(1_000, budget * 4)
        assert pointer.endswith("more characters: memory_read this id for all]")
        assert sum(len(r["content"].partition("… [")[0]) for r in out["results"]) <= budget * 4
    # memory_read with the id shown gives it all.
    read = await ok(client, "memory_read", {"id": notes["id"]})
    assert read["memory"]["content"].startswith("Quarterly roadmap meeting notes. Item 0")


async def test_a_write_receipt_gives_an_event_time_only_to_what_happened_at_one(client: Client) -> None:
    """The receipt of a fact used to show its write time as "the event time stored for the memory", which
    a model reads as when it happened; facts and preferences have no event time (docs/recall.md)."""
    fact = await ok(client, "memory_write", {"content": "I work as an engineer at Initech.", "kind": "fact"})
    taste = await ok(client, "memory_write", {"content": "I prefer aisle seats.", "kind": "preference"})
    note = await ok(client, "memory_write", {"content": "The wifi password is on the fridge."})
    assert fact["event_time"] is None
    assert taste["event_time"] is None
    assert note["event_time"] is None
    event = await ok(
        client,
        "memory_write",
        {"content": "Ran the Leeds half marathon.", "kind": "event", "event_time": "2024-05-12T09:00:00Z"},
    )
    assert event["event_time"] == "2024-05-12T09:00:00Z"
    dated = await ok(client, "memory_write", {"content": "The boiler was serviced on 3 March 2024."})
    assert dated["event_time"].startswith("2024-03-03")
    again = await ok(client, "memory_write", {"content": "I work as an engineer at Initech.", "kind": "fact"})
    assert again["status"] == "duplicate"
    assert again["event_time"] is None


async def test_a_plan_not_yet_valid_can_be_retired_when_it_is_cancelled(client: Client) -> None:
    """retire's own example is "a cancelled plan"; a memory valid only from a later date used to be refused
    (its end, now, came before its start). Retired now, it never held: as_of its start finds nothing."""
    plan = await ok(
        client,
        "memory_write",
        {"content": "Sam will manage the Berlin office.", "kind": "fact", "valid_from": "2030-01-01"},
    )
    out = await ok(client, "retire", {"id": plan["id"], "reason": "the office was not opened"})
    assert out["valid_to"].startswith("2030-01-01")
    read = await ok(client, "memory_read", {"id": plan["id"]})
    assert read["memory"]["status"] == "retired"
    later = await ok(client, "recall", {"query": "who manages the Berlin office", "as_of": "2030-06-01"})
    assert later["results"] == []
