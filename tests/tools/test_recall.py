"""recall over MCP: results with lanes and status, history, time travel, filters, bounds."""

from __future__ import annotations

import pytest
from mcp import Client

from tests.tools.conftest import fails, ok
from tools._wire import short_id

pytestmark = pytest.mark.anyio


async def test_recall_returns_results_with_lanes_status_and_validity(client: Client) -> None:
    written = await ok(client, "memory_write", {"content": "Ana Lima lives in Lisbon.", "kind": "fact"})
    await ok(client, "memory_write", {"content": "The office plant needs water on Fridays."})
    out = await ok(client, "recall", {"query": "where does Ana Lima live", "k": 5, "explain": True})
    top = out["results"][0]
    assert short_id(top["id"]) == written["id"]  # explain=true gives full ids
    assert len(top["id"]) == 32
    assert top["content"] == "Ana Lima lives in Lisbon."
    assert top["kind"] == "fact"
    assert "status" not in top, "a current memory carries no status"
    explained = top["explain"]
    assert "superseded_by" not in explained
    assert "valid_to" not in explained
    assert set(explained["lanes"]) <= {"bm25", "vector", "graph"}
    assert explained["lanes"]["vector"] >= 1
    assert explained["score"] > 0


async def test_recall_hides_superseded_memories_unless_history_is_asked_for(client: Client) -> None:
    old = await ok(
        client, "memory_write", {"content": "Bo's phone number is 555-0100.", "scopes": ["user:bo"]}
    )
    new = await ok(client, "amend", {"id": old["id"], "content": "Bo's phone number is 555-0199."})
    current = await ok(client, "recall", {"query": "Bo phone number", "scopes": ["user:bo"]})
    assert [r["id"] for r in current["results"]] == [new["id"]]
    history = await ok(
        client,
        "recall",
        {"query": "Bo phone number", "scopes": ["user:bo"], "include_history": True, "explain": True},
    )
    by_id = {short_id(r["id"]): r for r in history["results"]}
    assert by_id[old["id"]]["status"] == "superseded"
    assert short_id(by_id[old["id"]]["explain"]["superseded_by"]) == new["id"]
    assert by_id[old["id"]]["explain"]["valid_to"] is not None


async def test_kinds_and_event_time_filters(client: Client) -> None:
    await ok(
        client,
        "memory_write",
        {"content": "Team offsite in Porto.", "kind": "event", "event_time": "2023-06-01"},
    )
    await ok(client, "memory_write", {"content": "Team prefers Porto for offsites.", "kind": "preference"})
    events = await ok(client, "recall", {"query": "Porto offsite", "kinds": ["event"]})
    assert [r["kind"] for r in events["results"]] == ["event"]
    recent = await ok(client, "recall", {"query": "Porto offsite", "kinds": ["event"], "since": "2024-01-01"})
    assert recent["results"] == []


async def test_now_resolves_relative_times_in_the_callers_offset(client: Client) -> None:
    lamp = await ok(
        client,
        "memory_write",
        {"content": "Bought a brass desk lamp.", "event_time": "2023-05-23T15:00:00Z"},
    )
    await ok(
        client,
        "memory_write",
        {"content": "Bought a steel desk lamp.", "event_time": "2023-04-11T15:00:00Z"},
    )
    out = await ok(
        client,
        "recall",
        {
            "query": "which desk lamp did I buy last Tuesday",
            "now": "2023-05-30T18:00:00+05:30",
            "explain": True,
        },
    )
    top = out["results"][0]
    assert short_id(top["id"]) == lamp["id"]
    assert top["when"] == "2023-05-23T15:00Z"
    assert "time in 'last Tuesday' x2" in top["why"]
    assert top["explain"]["time"] == {
        "rule": "in_interval",
        "expression": "last Tuesday",
        "interval": ["2023-05-23T00:00:00+05:30", "2023-05-24T00:00:00+05:30"],
        "factor": 2.0,  # 1 + the default recipe's boost for a narrow (one-day) window
    }
    assert out["results"][1]["explain"]["time"]["rule"] == "outside_interval"
    plain = await ok(client, "recall", {"query": "desk lamp", "explain": True})
    assert all("time" not in r["explain"] for r in plain["results"])


async def test_token_budget_cuts_results(client: Client) -> None:
    for text in ("Kiwi note: short.", "Kiwi note: a much longer memory about kiwis and where they grow."):
        await ok(client, "memory_write", {"content": text})
    both = await ok(client, "recall", {"query": "kiwi note"})
    assert len(both["results"]) == 2
    one = await ok(client, "recall", {"query": "kiwi note", "token_budget": 5})
    assert [r["content"] for r in one["results"]] == ["Kiwi note: short."]


async def test_results_show_graph_paths_and_collapsed_twins(client: Client) -> None:
    await ok(
        client,
        "memory_write",
        {
            "content": "Hotel Aria is in Lisbon.",
            "relations": [{"subject": "Hotel Aria", "predicate": "located_in", "object": "Lisbon"}],
        },
    )
    await ok(
        client,
        "memory_write",
        {
            "content": "Lisbon is the capital of Portugal.",
            "relations": [{"subject": "Lisbon", "predicate": "capital_of", "object": "Portugal"}],
        },
    )
    twin = await ok(client, "memory_write", {"content": "hotel aria is in lisbon!"})
    out = await ok(client, "recall", {"query": "Which country is Hotel Aria in?", "explain": True})
    by_content = {r["content"]: r for r in out["results"]}
    capital = by_content["Lisbon is the capital of Portugal."]
    assert "Hotel Aria —located_in→ Lisbon —capital_of→ Portugal" in capital["explain"]["paths"]
    assert "graph path Hotel Aria —located_in→ Lisbon —capital_of→ Portugal" in capital["why"]
    assert capital["explain"]["lanes"]["graph"] is not None
    assert by_content["Hotel Aria is in Lisbon."]["explain"]["collapsed"] == [
        (await ok(client, "memory_read", {"id": twin["id"]}))["memory"]["id"]
    ]
    assert "hotel aria is in lisbon!" not in by_content


async def test_recall_in_an_empty_scope_returns_no_results(client: Client) -> None:
    await ok(client, "create_scope", {"scope": "project:empty"})
    empty = await ok(client, "recall", {"query": "anything", "scopes": ["project:empty"]})
    assert empty == {"results": []}  # stale and warning only when the indexes lag (or the scope is not there)


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"query": "x", "k": 0}, "k: Input should be greater than or equal to 1"),
        ({"query": "x", "k": 101}, "k: Input should be less than or equal to 100"),
        ({"query": ""}, "query: String should have at least 1 character"),
        ({"query": "x", "as_of": "yesterday"}, "as_of: 'yesterday' is not an ISO 8601 time"),
        ({"query": "x", "scopes": ["planet:mars"]}, "scope kind 'planet' is not one of"),
        ({"query": "x", "now": "last Tuesday"}, "now: 'last Tuesday' is not an ISO 8601 time"),
        ({"query": "x", "token_budget": 0}, "token_budget: Input should be greater than or equal to 1"),
        (
            {"query": "x", "token_budget": 100_001},
            "token_budget: Input should be less than or equal to 100000",
        ),
    ],
)
async def test_bad_recall_arguments_are_refused(
    client: Client, arguments: dict[str, object], expected: str
) -> None:
    code, text = await fails(client, "recall", arguments)
    assert code == "invalid_arguments"
    assert expected in text


async def test_recall_publishes_every_field_of_its_compact_answer(client: Client) -> None:
    """The answer leaves empty fields out; its published output schema still names every field."""
    schema = {t.name: t for t in (await client.list_tools()).tools}["recall"].output_schema
    assert schema is not None
    item = schema["properties"]["results"]["items"]  # published inline (no $ref): server.app.inline_refs
    assert set(item["properties"]) == {
        "id", "content", "kind", "when", "status", "scopes", "why", "conflicts_with", "explain"
    }  # fmt: skip
    assert set(item["required"]) == {"id", "content", "kind", "when", "why"}
    assert "12 hex characters" in item["properties"]["id"]["description"]
    assert set(schema["properties"]) == {"results", "stale", "warning"}
    assert schema["required"] == ["results"]
