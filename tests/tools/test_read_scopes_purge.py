"""memory_read, list_scopes and purge over MCP."""

from __future__ import annotations

import pytest
from mcp import Client

from tests.tools.conftest import CLIENT_NAME, DEFAULT_SCOPE, fails, ok
from tools._wire import short_id

pytestmark = pytest.mark.anyio


async def test_memory_read_shows_provenance_and_the_version_chain(client: Client) -> None:
    first = await ok(client, "memory_write", {"content": "Cleo's birthday is 3 May.", "kind": "fact"})
    second = await ok(client, "amend", {"id": first["id"], "content": "Cleo's birthday is 4 May."})
    record = await ok(client, "memory_read", {"id": first["id"]})
    # memory_read shows full ids (32 hex characters); other tools show their first 12.
    assert len(record["memory"]["id"]) == 32
    assert short_id(record["memory"]["id"]) == first["id"]
    assert record["memory"]["status"] == "superseded"
    assert short_id(record["memory"]["superseded_by"]) == second["id"]
    assert record["memory"]["provenance"] == {"principal": "local", "client": CLIENT_NAME, "source": ""}
    assert [(short_id(v["id"]), v["status"]) for v in record["versions"]] == [
        (first["id"], "superseded"),
        (second["id"], "current"),
    ]


async def test_list_scopes_counts_memories_and_shows_the_default(client: Client) -> None:
    await ok(client, "memory_write", {"content": "One.", "scopes": ["project:site"]})
    await ok(client, "memory_write", {"content": "Two.", "scopes": ["project:site", "user:ana"]})
    out = await ok(client, "list_scopes", {})
    assert out["default_scopes"] == [DEFAULT_SCOPE]
    counts = {s["id"]: s["memories"] for s in out["scopes"]}
    assert counts == {"project:site": 2, "user:ana": 1}
    assert all(s["parent"] is None for s in out["scopes"])


async def test_purge_needs_the_scope_repeated_then_erases_it(client: Client) -> None:
    only = await ok(client, "memory_write", {"content": "Trial run note.", "scopes": ["run:trial"]})
    shared = await ok(
        client, "memory_write", {"content": "Shared note.", "scopes": ["run:trial", "user:ana"]}
    )
    code, text = await fails(client, "purge", {"scope": "run:trial", "confirm": "yes"})
    assert code == "invalid_input"
    assert "confirm must equal the scope id 'run:trial'" in text
    assert "nothing was deleted" in text
    out = await ok(client, "purge", {"scope": "run:trial", "confirm": "run:trial"})
    assert (out["scope"], out["memories_deleted"], out["memories_unlinked"]) == ("run:trial", 1, 1)
    code, _ = await fails(client, "memory_read", {"id": only["id"]})
    assert code == "not_found"
    kept = await ok(client, "memory_read", {"id": shared["id"]})
    assert kept["memory"]["scopes"] == ["user:ana"]


async def test_purging_an_unknown_scope_is_an_error_result(client: Client) -> None:
    code, text = await fails(client, "purge", {"scope": "run:never", "confirm": "run:never"})
    assert code == "not_found"
    assert "call list_scopes" in text


async def test_create_scope_link_and_unlink_over_mcp(client: Client) -> None:
    placed = await ok(client, "create_scope", {"scope": "project:site", "parent": "user:ana"})
    assert placed == {"id": "project:site", "parent": "user:ana", "memories": 0}
    mem = await ok(client, "memory_write", {"content": "Ana owns the site.", "scopes": ["user:ana"]})
    linked = await ok(client, "link_memory", {"id": mem["id"], "scope": "team:web"})
    assert linked == {"id": mem["id"], "scopes": ["team:web", "user:ana"], "changed": True}
    found = await ok(
        client, "recall", {"query": "who owns the site", "scopes": ["team:web"], "explain": True}
    )
    provenance = found["results"][0]["explain"]["provenance"]
    assert provenance == {"principal": "local", "client": CLIENT_NAME, "source": ""}
    below = await ok(
        client, "recall", {"query": "who owns the site", "scopes": ["user:ana"], "descendants": True}
    )
    assert [r["id"] for r in below["results"]] == [mem["id"]]
    unlinked = await ok(client, "unlink_memory", {"id": mem["id"], "scope": "user:ana"})
    assert unlinked["scopes"] == ["team:web"]
    code, text = await fails(client, "unlink_memory", {"id": mem["id"], "scope": "team:web"})
    assert code == "conflict"
    assert "retire" in text
    code, text = await fails(client, "create_scope", {"scope": "user:ana", "parent": "project:site"})
    assert code == "conflict"  # user:ana exists: creating never moves it
    assert "call move_scope" in text
    code, text = await fails(client, "move_scope", {"scope": "user:ana", "parent": "project:site"})
    assert code == "invalid_input"
    assert "its own ancestor" in text


async def test_purging_a_newer_version_leaves_no_dangling_link(client: Client) -> None:
    """Issue 12, finding 8: the older version stays, no longer pointing at a memory that is gone, and still out
    of current recall (retired when it was superseded)."""
    old = await ok(client, "memory_write", {"content": "The gate code is 1234.", "scopes": ["team:x"]})
    new = await ok(client, "amend", {"id": old["id"], "content": "The gate code is 5678."})
    await ok(client, "link_memory", {"id": new["id"], "scope": "team:y"})
    await ok(client, "unlink_memory", {"id": new["id"], "scope": "team:x"})
    superseded_at = (await ok(client, "memory_read", {"id": new["id"]}))["memory"]["recorded_at"]
    await ok(client, "purge", {"scope": "team:y", "confirm": "team:y"})
    code, _ = await fails(client, "memory_read", {"id": new["id"]})
    assert code == "not_found"
    left = (await ok(client, "memory_read", {"id": old["id"]}))["memory"]
    assert left["superseded_by"] is None
    assert left["status"] == "retired"
    assert left["retired_at"] == superseded_at
    assert left["retire_reason"] == "its newer version was erased"
    current = await ok(client, "recall", {"query": "gate code", "scopes": ["team:x"]})
    assert current["results"] == []
    history = await ok(
        client, "recall", {"query": "gate code", "scopes": ["team:x"], "include_history": True}
    )
    assert [r["id"] for r in history["results"]] == [old["id"]]
    code, text = await fails(client, "amend", {"id": old["id"], "content": "The gate code is 0000."})
    assert code == "conflict"
    assert new["id"] not in text
