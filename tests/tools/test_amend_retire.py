"""amend and retire over MCP: supersession, history, and the errors a model can act on."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from tests.tools.conftest import fails, ok
from tools._wire import short_id

pytestmark = pytest.mark.anyio


async def test_amend_supersedes_and_keeps_the_scopes(client: Client) -> None:
    old = await ok(client, "memory_write", {"content": "Ana works at Acme.", "scopes": ["user:ana"]})
    new = await ok(client, "amend", {"id": old["id"], "content": "Ana works at Globex.", "reason": "new job"})
    assert new["supersedes"] == old["id"]
    assert new["scopes"] == ["user:ana"]
    # A short prefix of the id is enough.
    read = await ok(client, "memory_read", {"id": new["id"][:10]})
    assert [short_id(v["id"]) for v in read["versions"]] == [old["id"], new["id"]]


async def test_amending_a_superseded_memory_points_to_its_successor(client: Client) -> None:
    old = await ok(client, "memory_write", {"content": "The launch is on Monday."})
    new = await ok(client, "amend", {"id": old["id"], "content": "The launch is on Tuesday."})
    code, text = await fails(client, "amend", {"id": old["id"], "content": "The launch is on Wednesday."})
    assert code == "conflict"
    full = (await ok(client, "memory_read", {"id": new["id"]}))["memory"]["id"]  # errors name full ids
    assert f"superseded by {full}" in text
    assert f"amend {full} instead" in text


async def test_unknown_and_malformed_ids_say_how_to_find_the_memory(client: Client) -> None:
    code, text = await fails(client, "amend", {"id": "0123456789abcdef", "content": "x"})
    assert (code, text) == ("not_found", "no memory with id 0123456789abcdef; call recall to find it")
    code, text = await fails(client, "retire", {"id": "not-an-id"})
    assert code == "invalid_input"
    assert "pass the id returned by memory_write or recall" in text


async def test_retire_removes_from_recall_but_not_from_history(client: Client) -> None:
    memory = await ok(
        client, "memory_write", {"content": "The Friday standup is at 10:00.", "scopes": ["team:core"]}
    )
    retired = await ok(client, "retire", {"id": memory["id"], "reason": "standups cancelled"})
    assert retired["id"] == memory["id"]
    assert retired["retired_at"].endswith("Z")
    found = await ok(client, "recall", {"query": "Friday standup", "scopes": ["team:core"]})
    assert found["results"] == []
    history = await ok(
        client, "recall", {"query": "Friday standup", "scopes": ["team:core"], "include_history": True}
    )
    assert [(r["id"], r["status"]) for r in history["results"]] == [(memory["id"], "retired")]
    code, text = await fails(client, "retire", {"id": memory["id"]})
    assert code == "conflict"
    assert "already retired" in text


def _inverted(record: dict[str, Any]) -> list[str]:
    """Versions and relations of a memory_read answer whose validity ends before it starts."""
    bad = [
        f"{v['content']} [{v['valid_from']} → {v['valid_to']}]"
        for v in record["versions"]
        if v["valid_to"] is not None and v["valid_to"] < v["valid_from"]
    ]
    for line in record["relations"]:
        start, _, end = line.split(" [")[1].rstrip("]").partition(" → ")
        if start != "?" and end != "open" and end < start:
            bad.append(line)
    return bad


async def test_validity_is_never_inverted_whatever_dates_the_content_gives(client: Client) -> None:
    # Told today that Ana works at Acme, then that she has worked at Globex since 1 October: the Acme memory
    # (valid from today) ends where it began, never on 1 October, before its own start.
    acme = await ok(client, "memory_write", {"content": "Ana works at Acme.", "scopes": ["user:ana"]})
    await ok(
        client, "memory_write", {"content": "Ana works at Globex since 1 October.", "scopes": ["user:ana"]}
    )
    record = await ok(client, "memory_read", {"id": acme["id"]})
    assert record["memory"]["status"] == "superseded"
    assert _inverted(record) == []
    # An amend whose new text names a start still to come, then news that overtakes the plan: the amended
    # version's relation ends at its start (it never held), not before it.
    bob = await ok(client, "memory_write", {"content": "Bob works at Initech.", "scopes": ["user:ana"]})
    plan = await ok(client, "amend", {"id": bob["id"], "content": "Bob works at Globex starting 1 December."})
    await ok(client, "memory_write", {"content": "Bob works at Umbrella.", "scopes": ["user:ana"]})
    record = await ok(client, "memory_read", {"id": plan["id"]})
    assert _inverted(record) == [], record


async def test_reading_a_long_version_chain_shows_the_versions_nearest_and_says_how_many_are_left_out(
    client: Client,
) -> None:
    """attack13b: memory_read returned a chain of any length whole (30 amends of long text: a 4.5 MB answer, tens
    of MB of server memory per read). Now at most 20 versions, the nearest the memory asked for, and the counts."""
    ids = [
        (await ok(client, "memory_write", {"content": "Version 0 of the plan.", "scopes": ["user:chain"]}))[
            "id"
        ]
    ]
    for n in range(1, 26):
        ids.append((await ok(client, "amend", {"id": ids[-1], "content": f"Version {n} of the plan."}))["id"])
    newest = await ok(client, "memory_read", {"id": ids[-1]})
    assert [short_id(v["id"]) for v in newest["versions"]] == ids[-20:]
    assert newest["versions_left_out"] == {"older": 6, "newer": 0}
    # Reading the oldest shown pages back: the window centres on it.
    back = await ok(client, "memory_read", {"id": ids[6]})
    assert [short_id(v["id"]) for v in back["versions"]] == ids[0:20]
    assert back["versions_left_out"] == {"older": 0, "newer": 6}
    middle = await ok(client, "memory_read", {"id": ids[13]})
    assert [short_id(v["id"]) for v in middle["versions"]] == ids[3:23]
    assert middle["versions_left_out"] == {"older": 3, "newer": 3}
    short = await ok(client, "memory_read", {"id": ids[0]})
    assert short["versions_left_out"] == {"older": 0, "newer": 6}
