"""Transitive relations the consolidator derives (issue 15), met through the MCP tools: issue 14's hotel, its state
found and the derivation explained from its two sources, never shown in their place."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from storage import Engine
from tests.tools.conftest import ok
from tools._wire import short_id

pytestmark = pytest.mark.anyio

HOTEL = "The Grand Palm, a heritage hotel on the lake shore, is located in Udaipur."
CITY = "Udaipur belongs to Rajasthan."
OTHERS = [
    "Which state has the best beaches? Goa, according to my brother.",
    "The hotel in Kochi had a great breakfast buffet.",
    "The state fair is in September.",
    "Palm oil is in a lot of snacks.",
    "The Grand Hyatt lobby was too cold.",
    "Kerala is a state in the south of India.",
    "I commute by bike.",
    "My sister lives in Porto.",
]


async def _write(client: Client, content: str, **more: Any) -> dict[str, Any]:
    return await ok(client, "memory_write", {"content": content, "kind": "fact", **more})


async def test_the_hotels_state_is_found_and_explained_as_derived_from_its_two_sources(
    client: Client, engine: Engine
) -> None:
    hotel = await _write(
        client, HOTEL, relations=[{"subject": "Grand Palm", "predicate": "located_in", "object": "Udaipur"}]
    )
    city = await _write(
        client, CITY, relations=[{"subject": "Udaipur", "predicate": "located_in", "object": "Rajasthan"}]
    )
    for text in OTHERS:
        await _write(client, text)
    engine.consolidate()
    out = await ok(client, "recall", {"query": "Which state is the Grand Palm hotel in?", "k": 10})
    top5 = out["results"][:5]
    ids = [r["id"] for r in top5]
    assert city["id"] in ids, [r["content"] for r in out["results"]]
    assert hotel["id"] in ids, [r["content"] for r in out["results"]]
    # the derived relation is never shown in place of its sources, which are the record
    assert all(r["kind"] != "summary" for r in out["results"])
    why = next(r["why"] for r in top5 if r["id"] == city["id"])
    assert "derived relation Grand Palm —located_in→ Rajasthan" in why, why
    assert hotel["id"] in why, why
    assert city["id"] in why, why
    # asked for summaries, the derivation itself is there, naming its sources
    summaries = await ok(
        client, "recall", {"query": "Grand Palm Rajasthan", "kinds": ["summary"], "explain": True}
    )
    (derived,) = [r for r in summaries["results"] if "derived" in r["content"]]
    assert derived["content"].startswith("Grand Palm located in Rajasthan (derived:")
    assert "from 2 memories" in derived["why"]
    assert short_id(derived["id"]) not in (hotel["id"], city["id"])


async def test_a_source_found_on_its_own_still_says_what_it_justifies(client: Client, engine: Engine) -> None:
    await _write(
        client, HOTEL, relations=[{"subject": "Grand Palm", "predicate": "located_in", "object": "Udaipur"}]
    )
    city = await _write(
        client, CITY, relations=[{"subject": "Udaipur", "predicate": "located_in", "object": "Rajasthan"}]
    )
    for text in OTHERS:
        await _write(client, text)
    engine.consolidate()
    # the words of the city's own statement: it ranks first on its own, above the derivation that also matches
    out = await ok(client, "recall", {"query": "Udaipur belongs to Rajasthan", "k": 5})
    first = out["results"][0]
    assert first["id"] == city["id"], [r["content"] for r in out["results"]]
    assert "derived relation Grand Palm —located_in→ Rajasthan" in first["why"], first["why"]
