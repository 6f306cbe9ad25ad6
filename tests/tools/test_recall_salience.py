"""recall's salience argument over MCP: validated, explained, and off unless asked for."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from mcp import Client

from storage import Engine
from tests.tools.conftest import fails, ok

pytestmark = pytest.mark.anyio

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


async def _seed(client: Client) -> tuple[str, str]:
    """Two locker codes that answer "which code opens my locker" equally well, written a year apart."""
    old = await ok(
        client,
        "memory_write",
        {
            "content": "Locker code 1893, old gym.",
            "kind": "event",
            "event_time": (NOW - timedelta(days=400)).isoformat(),
        },
    )
    new = await ok(
        client,
        "memory_write",
        {"content": "My pool locker opens with 4417.", "kind": "event", "event_time": NOW.isoformat()},
    )
    for text in ("Ana's bike lock code is 5521.", "The garage door code is 7731.", "Ana swims on Tuesdays."):
        await ok(client, "memory_write", {"content": text})
    return old["id"], new["id"]


async def test_salience_lifts_the_recent_one_and_says_so(client: Client) -> None:
    old, new = await _seed(client)
    query = {"query": "which code opens my locker", "now": NOW.isoformat()}
    plain = await ok(client, "recall", query)
    assert [r["id"] for r in plain["results"][:2]] == [old, new]
    assert all("salience" not in r["why"] for r in plain["results"])
    lifted = await ok(client, "recall", {**query, "salience": True})
    top = lifted["results"][0]
    assert top["id"] == new
    assert "salience moved it up (recency 1.00" in top["why"]
    explained = await ok(client, "recall", {**query, "salience": True, "explain": True})
    sal = explained["results"][0]["explain"]["salience"]
    assert sal["moved"] == "up"
    assert sal["recency"] == 1.0
    assert sal["bonus"] > 0
    off = await ok(client, "recall", {**query, "salience": False, "explain": True})
    assert all("salience" not in r["explain"] for r in off["results"])


@pytest.mark.parametrize("bad", ["sometimes", 1, "true", None])
async def test_a_bad_salience_value_is_refused_and_counts_nothing(
    client: Client, engine: Engine, bad: object
) -> None:
    await _seed(client)
    await ok(client, "recall", {"query": "locker code", "now": NOW.isoformat()})
    before = engine.accesses.total()
    args = {"query": "locker code", "now": NOW.isoformat(), "salience": bad}
    if bad is None:  # null is "not given": the server's default, a valid call
        await ok(client, "recall", args)
        assert engine.accesses.total() > before
        return
    code, text = await fails(client, "recall", args)
    assert code == "invalid_arguments"
    assert "salience" in text
    assert engine.accesses.total() == before
