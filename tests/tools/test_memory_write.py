"""memory_write over MCP: receipts, defaults, the caller's entities and times, and bad input."""

from __future__ import annotations

import json

import pytest
from mcp import Client

from storage import Engine, content_id
from tests.tools.conftest import CLIENT_NAME, DEFAULT_SCOPE, fails, ok

pytestmark = pytest.mark.anyio


async def test_write_reports_added_then_duplicate_then_linked(client: Client) -> None:
    first = await ok(client, "memory_write", {"content": "Ana prefers tea.", "scopes": ["user:ana"]})
    assert first["status"] == "added"
    assert first["id"] == content_id("Ana prefers tea.")[:12]  # tools show ids' first 12 hex characters
    assert first["scopes"] == ["user:ana"]
    again = await ok(client, "memory_write", {"content": "Ana prefers tea.", "scopes": ["user:ana"]})
    assert (again["status"], again["id"]) == ("duplicate", first["id"])
    linked = await ok(client, "memory_write", {"content": "Ana prefers tea.", "scopes": ["team:cafe"]})
    assert linked["status"] == "linked"
    assert linked["scopes"] == ["team:cafe", "user:ana"]


async def test_scopes_default_to_the_session_scope(client: Client, engine: Engine) -> None:
    receipt = await ok(client, "memory_write", {"content": "The build server is named Hopper."})
    assert receipt["scopes"] == [DEFAULT_SCOPE]
    memory = engine.read(receipt["id"]).memory
    assert memory.provenance.client == CLIENT_NAME  # the MCP client's name is recorded as provenance


async def test_entities_relations_times_and_metadata_reach_the_store(client: Client, engine: Engine) -> None:
    receipt = await ok(
        client,
        "memory_write",
        {
            "content": "Ana Lima joined Acme Corp as CTO.",
            "kind": "event",
            "event_time": "2024-03-01T09:30:00+01:00",
            "valid_from": "2024-03-01",
            "entities": [{"name": "Ana Lima", "type": "person", "aliases": ["Ana"]}],
            "relations": [{"subject": "Ana Lima", "predicate": "works_at", "object": "Acme Corp"}],
            "metadata": {"source_doc": "press-release"},
        },
    )
    assert {"Ana Lima", "Acme Corp"} <= set(receipt["entities"])
    assert receipt["event_time"] == "2024-03-01T08:30:00Z"  # offsets are normalised to UTC
    memory = engine.read(receipt["id"]).memory
    assert memory.kind == "event"
    assert memory.valid_from.isoformat() == "2024-03-01T00:00:00+00:00"  # date only: midnight UTC
    assert memory.metadata == {"source_doc": "press-release"}


async def test_list_arguments_sent_as_json_text_are_accepted(client: Client) -> None:
    # Some clients (Claude Desktop) send arrays as JSON strings.
    receipt = await ok(
        client, "memory_write", {"content": "Bo likes jazz.", "scopes": json.dumps(["user:bo"])}
    )
    assert receipt["scopes"] == ["user:bo"]


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({}, "content: Field required"),
        ({"content": ""}, "content: String should have at least 1 character"),
        ({"content": "x", "kind": "rumour"}, "kind: Input should be 'fact', 'event'"),
        ({"content": "x", "scopes": ["ana"]}, "scopes.0: scope id 'ana' has no ':'"),
        ({"content": "x", "scopes": []}, "scopes: List should have at least 1 item"),
        ({"content": "x", "event_time": 1714000000}, "event_time: send a time as an ISO 8601 string"),
        (
            {"content": "x", "event_time": "last tuesday"},
            "event_time: 'last tuesday' is not an ISO 8601 time",
        ),
        ({"content": "x", "scope": ["user:ana"]}, "scope: Extra inputs are not permitted"),
        ({"content": "x", "entities": [{"type": "person"}]}, "entities.0.name: Field required"),
    ],
)
async def test_arguments_outside_the_schema_are_refused_with_the_field_named(
    client: Client, arguments: dict[str, object], expected: str
) -> None:
    code, text = await fails(client, "memory_write", arguments)
    assert code == "invalid_arguments"
    assert text.startswith("invalid arguments for memory_write: ")
    assert expected in text
    assert text.endswith("Fix them and call again.")


async def test_domain_validation_errors_carry_the_engines_hint(client: Client) -> None:
    code, text = await fails(
        client,
        "memory_write",
        {"content": "Ana works at Acme.", "valid_from": "2024-05-01", "valid_to": "2024-01-01"},
    )
    assert code == "invalid_input"
    assert "valid_to must be after valid_from" in text
    code, text = await fails(
        client,
        "memory_write",
        {"content": "x", "relations": [{"subject": "A", "predicate": "works at!!", "object": "B"}]},
    )
    assert code == "invalid_input"
    assert "use a short verb phrase" in text
