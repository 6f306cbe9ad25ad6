"""A planned change (issue #14, "time that means what people mean"): a new value written with a `valid_from` in
the future leaves the value it replaces current until then.

Each test fails on daf30a0: the reconciler superseded the current value at the write, closing its validity
at the time of the call, so recall today answered nothing about Ana's employer (Initech not valid yet, Acme
superseded) until the planned date.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.types import Implementation

from server.app import build_server
from storage import CachedEmbedder, Engine
from tests.tools.conftest import CLIENT_NAME, DEFAULT_SCOPE, fails, ok

pytestmark = pytest.mark.anyio

ANA = ["user:ana"]
QUESTION = "where does Ana work"


@asynccontextmanager
async def _serving(data_dir: Path, embedder: CachedEmbedder) -> AsyncIterator[tuple[Engine, Client]]:
    """An engine on ``data_dir`` and an in-memory MCP client on it; closing it closes the store (a restart
    opens it again)."""
    engine = Engine.open(data_dir, embedder=embedder, warm=False)
    try:

        async def source() -> Engine:
            return engine

        server = build_server(source, default_scopes=(DEFAULT_SCOPE,))
        info = Implementation(name=CLIENT_NAME, version="1")
        async with Client(server, mode="legacy", client_info=info) as client:
            yield engine, client
    finally:
        engine.close()


async def _employers(client: Client, **view: Any) -> list[str]:
    out = await ok(client, "recall", {"query": QUESTION, "scopes": ANA, **view})
    return [r["content"] for r in out["results"] if "works at" in r["content"]]


async def _plan(client: Client, starts: datetime) -> tuple[dict[str, Any], dict[str, Any]]:
    acme = await ok(client, "memory_write", {"content": "Ana works at Acme.", "scopes": ANA, "kind": "fact"})
    initech = await ok(
        client,
        "memory_write",
        {
            "content": "Ana works at Initech.",
            "scopes": ANA,
            "kind": "fact",
            "valid_from": starts.isoformat(),
        },
    )
    return acme, initech


async def test_a_planned_change_leaves_the_current_value_current_until_its_date(
    data_dir: Path, embedder: CachedEmbedder
) -> None:
    starts = (datetime.now(UTC) + timedelta(days=400)).replace(hour=0, minute=0, second=0, microsecond=0)
    async with _serving(data_dir, embedder) as (engine, client):
        acme, initech = await _plan(client, starts)
        # Today Acme is the answer, and the plan is not (it is not true yet).
        assert await _employers(client) == ["Ana works at Acme."]
        assert await _employers(client, as_of=datetime.now(UTC).isoformat()) == ["Ana works at Acme."]
        # The receipt says the change is planned: Acme is replaced from the start date, not now.
        assert initech["supersedes"] == []
        assert initech["supersedes_later"] == [acme["id"]]
        assert initech["relations"] == ["Ana —works_at→ Initech"]
        # After the start date, Initech; history shows both.
        later = (starts + timedelta(days=30)).isoformat()
        assert await _employers(client, as_of=later) == ["Ana works at Initech."]
        both = await _employers(client, include_history=True)
        assert sorted(both) == ["Ana works at Acme.", "Ana works at Initech."]

        # memory_read tells how they relate: Acme current, valid until the start date, its employer ended by
        # the planned memory; Initech current and valid from then.
        read = await ok(client, "memory_read", {"id": acme["id"]})
        assert read["memory"]["status"] == "current"
        assert read["memory"]["valid_to"] == starts.isoformat().replace("+00:00", "Z")
        full_initech = (await ok(client, "memory_read", {"id": initech["id"]}))["memory"]
        assert full_initech["status"] == "current"
        assert full_initech["valid_from"] == starts.isoformat().replace("+00:00", "Z")
        assert read["relations"] == [
            f"Ana —works_at→ Acme [? → {starts.date().isoformat()}, ended by {full_initech['id']}]"
        ]
        # Every store agrees on which memories are live.
        assert engine.verify().ok

    # After a restart, the same answers.
    async with _serving(data_dir, embedder) as (engine, client):
        assert await _employers(client) == ["Ana works at Acme."]
        assert await _employers(client, as_of=later) == ["Ana works at Initech."]
        assert engine.verify().ok


async def test_when_the_planned_date_passes_the_new_value_is_current_without_any_write(
    data_dir: Path, embedder: CachedEmbedder
) -> None:
    """Nothing has to flip a flag when the date comes: every view compares validity with its own instant.
    The date here is a moment ahead; the test waits for the wall clock itself to pass it (nothing else is
    awaited), with the process running and across a restart."""
    async with _serving(data_dir, embedder) as (engine, client):
        starts = datetime.now(UTC) + timedelta(seconds=2)
        acme, initech = await _plan(client, starts)
        assert datetime.now(UTC) < starts, "the write took too long for this test's date"
        assert await _employers(client) == ["Ana works at Acme."]
        assert initech["supersedes_later"] == [acme["id"]]
        await anyio.sleep((starts - datetime.now(UTC)).total_seconds() + 0.05)
        assert await _employers(client) == ["Ana works at Initech."]
        assert engine.verify().ok
    async with _serving(data_dir, embedder) as (engine, client):
        assert await _employers(client) == ["Ana works at Initech."]
        assert await _employers(client, as_of=(starts - timedelta(seconds=1)).isoformat()) == [
            "Ana works at Acme."
        ]
        assert engine.verify().ok


async def test_a_value_stated_for_now_still_replaces_at_once(client: Client) -> None:
    """Unchanged by the fix: a new value that holds from now (or from a past date) supersedes at once."""
    acme = await ok(client, "memory_write", {"content": "Ana works at Acme.", "scopes": ANA, "kind": "fact"})
    globex = await ok(
        client, "memory_write", {"content": "Ana works at Globex.", "scopes": ANA, "kind": "fact"}
    )
    assert globex["supersedes"] == [acme["id"]]
    assert globex["supersedes_later"] == []
    assert await _employers(client) == ["Ana works at Globex."]
    read = await ok(client, "memory_read", {"id": acme["id"]})
    assert read["memory"]["status"] == "superseded"


async def test_news_of_now_after_a_plan_replaces_the_current_value_now(client: Client) -> None:
    """After a planned change, a new value told without a date is news of now, and the later telling wins
    (docs/extraction.md): it replaces the value the plan was to end (still current) at once, and the plan too.
    Had the plan's end hidden Acme's relation from reconciliation, Acme and Globex would both answer today."""
    starts = (datetime.now(UTC) + timedelta(days=400)).replace(microsecond=0)
    acme, initech = await _plan(client, starts)
    globex = await ok(
        client, "memory_write", {"content": "Ana works at Globex.", "scopes": ANA, "kind": "fact"}
    )
    assert sorted(globex["supersedes"]) == sorted([acme["id"], initech["id"]])
    assert await _employers(client) == ["Ana works at Globex."]
    assert await _employers(client, as_of=(starts + timedelta(days=30)).isoformat()) == [
        "Ana works at Globex."
    ]
    read = await ok(client, "memory_read", {"id": acme["id"]})
    assert read["memory"]["status"] == "superseded"
    full_globex = (await ok(client, "memory_read", {"id": globex["id"]}))["memory"]["id"]
    assert read["relations"][0].endswith(f", ended by {full_globex}]")


async def test_a_cancelled_plan_leaves_the_current_value_true_for_good(client: Client) -> None:
    """retire's own example is a cancelled plan: retired before its date, it never held, and the value it was
    to replace is no longer ended at that date (as_of after it still answers Acme)."""
    starts = (datetime.now(UTC) + timedelta(days=400)).replace(microsecond=0)
    acme, initech = await _plan(client, starts)
    later = (starts + timedelta(days=30)).isoformat()
    assert await _employers(client, as_of=later) == ["Ana works at Initech."]
    out = await ok(client, "retire", {"id": initech["id"], "reason": "the offer fell through"})
    assert out["valid_to"].startswith(starts.date().isoformat())
    assert await _employers(client) == ["Ana works at Acme."]
    assert await _employers(client, as_of=later) == ["Ana works at Acme."]
    read = await ok(client, "memory_read", {"id": acme["id"]})
    assert read["memory"]["status"] == "current"
    assert read["memory"]["valid_to"] is None
    assert read["relations"] == ["Ana —works_at→ Acme [? → open]"]


async def test_what_we_knew_before_the_plan_was_written_ends_nothing(client: Client) -> None:
    """known_at is transaction time: before the plan was recorded, nothing said Acme would end, so what we
    believed then about a time after the planned date is still Acme; what we know now is Initech."""
    starts = (datetime.now(UTC) + timedelta(days=400)).replace(microsecond=0)
    acme, initech = await _plan(client, starts)
    written = [
        datetime.fromisoformat((await ok(client, "memory_read", {"id": m["id"]}))["memory"]["recorded_at"])
        for m in (acme, initech)
    ]
    between = (written[0] + (written[1] - written[0]) / 2).isoformat()
    later = (starts + timedelta(days=30)).isoformat()
    assert await _employers(client, as_of=later, known_at=between) == ["Ana works at Acme."]
    assert await _employers(client, as_of=later, known_at=datetime.now(UTC).isoformat()) == [
        "Ana works at Initech."
    ]
    assert await _employers(client, known_at=between) == ["Ana works at Acme."]


async def test_an_erased_plan_ends_nothing(client: Client) -> None:
    """Erasing the plan forgets the end it gave the value it was to replace, as it reopens the relations
    it ended: as_of after the date answers Acme again."""
    starts = (datetime.now(UTC) + timedelta(days=400)).replace(microsecond=0)
    acme, initech = await _plan(client, starts)
    full = (await ok(client, "memory_read", {"id": initech["id"]}))["memory"]["id"]
    await ok(client, "erase", {"id": initech["id"], "confirm": full})
    assert await _employers(client, as_of=(starts + timedelta(days=30)).isoformat()) == ["Ana works at Acme."]
    read = await ok(client, "memory_read", {"id": acme["id"]})
    assert (read["memory"]["status"], read["memory"]["valid_to"]) == ("current", None)


async def _write(client: Client, content: str, starts: datetime | None = None) -> dict[str, Any]:
    args: dict[str, Any] = {"content": content, "scopes": ANA, "kind": "fact"}
    if starts is not None:
        args["valid_from"] = starts.isoformat()
    return await ok(client, "memory_write", args)


async def test_a_second_plan_earlier_than_the_first_ends_the_current_value_at_its_own_date(
    client: Client, engine: Engine
) -> None:
    """Acme now, Initech planned for day 400, then Globex planned for day 300 (told later, starting sooner).
    Globex ends Acme on day 300 and is itself ended by Initech on day 400. Before the fix, the stored later
    plan made the reconciler leave every other value alone: Acme still ran to day 400, so day 350 answered
    Acme and Globex."""
    now = datetime.now(UTC).replace(microsecond=0)
    acme = await _write(client, "Ana works at Acme.")
    await _write(client, "Ana works at Initech.", now + timedelta(days=400))
    globex = await _write(client, "Ana works at Globex.", now + timedelta(days=300))
    assert globex["supersedes_later"] == [acme["id"]]
    assert await _employers(client) == ["Ana works at Acme."]
    assert await _employers(client, as_of=(now + timedelta(days=350)).isoformat()) == ["Ana works at Globex."]
    assert await _employers(client, as_of=(now + timedelta(days=450)).isoformat()) == [
        "Ana works at Initech."
    ]
    read = await ok(client, "memory_read", {"id": acme["id"]})
    assert read["memory"]["valid_to"] == (now + timedelta(days=300)).isoformat().replace("+00:00", "Z")
    assert engine.verify().ok


async def test_cancelling_the_earlier_of_two_plans_leaves_the_later_plan_ending_the_current_value(
    client: Client, engine: Engine
) -> None:
    """Acme now, Globex planned for day 300, Initech for day 400 (which ends Globex). Globex cancelled: Acme
    holds until day 400, when Initech starts. Before the fix the cancel reopened Acme for good, so day 450
    answered Acme and Initech; erasing the plan did the same."""
    now = datetime.now(UTC).replace(microsecond=0)
    acme = await _write(client, "Ana works at Acme.")
    globex = await _write(client, "Ana works at Globex.", now + timedelta(days=300))
    initech = await _write(client, "Ana works at Initech.", now + timedelta(days=400))
    # Initech replaces Globex from day 400; Acme is over by then (Globex ends it on day 300).
    assert initech["supersedes_later"] == [globex["id"]]
    await ok(client, "retire", {"id": globex["id"], "reason": "the Globex offer fell through"})
    assert await _employers(client, as_of=(now + timedelta(days=350)).isoformat()) == ["Ana works at Acme."]
    assert await _employers(client, as_of=(now + timedelta(days=450)).isoformat()) == [
        "Ana works at Initech."
    ]
    read = await ok(client, "memory_read", {"id": acme["id"]})
    full_initech = (await ok(client, "memory_read", {"id": initech["id"]}))["memory"]["id"]
    day_400 = (now + timedelta(days=400)).date().isoformat()
    assert read["relations"] == [f"Ana —works_at→ Acme [? → {day_400}, ended by {full_initech}]"]
    assert read["memory"]["valid_to"] == (now + timedelta(days=400)).isoformat().replace("+00:00", "Z")
    assert engine.verify().ok
    # Initech cancelled too: Acme for good.
    await ok(client, "retire", {"id": initech["id"], "reason": "no move after all"})
    assert await _employers(client, as_of=(now + timedelta(days=450)).isoformat()) == ["Ana works at Acme."]
    assert engine.verify().ok


async def test_erasing_the_earlier_of_two_plans_leaves_the_later_plan_ending_the_current_value(
    client: Client, engine: Engine
) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    await _write(client, "Ana works at Acme.")
    globex = await _write(client, "Ana works at Globex.", now + timedelta(days=300))
    await _write(client, "Ana works at Initech.", now + timedelta(days=400))
    full = (await ok(client, "memory_read", {"id": globex["id"]}))["memory"]["id"]
    await ok(client, "erase", {"id": globex["id"], "confirm": full})
    assert await _employers(client, as_of=(now + timedelta(days=350)).isoformat()) == ["Ana works at Acme."]
    assert await _employers(client, as_of=(now + timedelta(days=450)).isoformat()) == [
        "Ana works at Initech."
    ]
    assert engine.verify().ok


async def test_a_plan_in_another_scope_never_ends_this_scope_s_value_when_an_earlier_plan_is_cancelled(
    client: Client, engine: Engine
) -> None:
    """Acme in user:ana; Globex planned for day 300 in user:ana and project:hr; Initech planned for day 400 in
    project:hr only (it ends Globex there, and never saw user:ana's Acme). Globex cancelled: Acme holds in
    user:ana for good, as Initech was never written there."""
    now = datetime.now(UTC).replace(microsecond=0)
    hr = "project:hr"
    await _write(client, "Ana works at Acme.")
    globex = await ok(
        client,
        "memory_write",
        {
            "content": "Ana works at Globex.",
            "scopes": [*ANA, hr],
            "kind": "fact",
            "valid_from": (now + timedelta(days=300)).isoformat(),
        },
    )
    await ok(
        client,
        "memory_write",
        {
            "content": "Ana works at Initech.",
            "scopes": [hr],
            "kind": "fact",
            "valid_from": (now + timedelta(days=400)).isoformat(),
        },
    )
    await ok(client, "retire", {"id": globex["id"], "reason": "the Globex offer fell through"})
    assert await _employers(client, as_of=(now + timedelta(days=450)).isoformat()) == ["Ana works at Acme."]
    assert engine.verify().ok


async def test_a_plan_purged_with_its_scope_ends_nothing_in_the_scope_that_stays(
    client: Client, engine: Engine
) -> None:
    """Acme is in user:ana and project:hr; Initech, planned in project:hr only, ends it (one memory, both
    scopes). project:hr purged: the plan is deleted, as by erase, so it ends nothing: user:ana answers Acme
    after the date. Before the fix the purge reopened Acme's relation but left its validity ending at the
    deleted plan's date, so user:ana had no employer from then on."""
    starts = (datetime.now(UTC) + timedelta(days=400)).replace(microsecond=0)
    hr = "project:hr"
    acme = await ok(
        client, "memory_write", {"content": "Ana works at Acme.", "scopes": [*ANA, hr], "kind": "fact"}
    )
    plan = await ok(
        client,
        "memory_write",
        {
            "content": "Ana works at Initech.",
            "scopes": [hr],
            "kind": "fact",
            "valid_from": starts.isoformat(),
        },
    )
    assert plan["supersedes_later"] == [acme["id"]]
    await ok(client, "purge", {"scope": hr, "confirm": hr})
    assert await _employers(client, as_of=(starts + timedelta(days=30)).isoformat()) == ["Ana works at Acme."]
    read = await ok(client, "memory_read", {"id": acme["id"]})
    assert (read["memory"]["valid_to"], read["relations"]) == (None, ["Ana —works_at→ Acme [? → open]"])
    assert engine.verify().ok


async def test_amending_a_plan_before_its_date_says_how_to_correct_it(client: Client) -> None:
    """amend of a plan before its date is refused (it would start the new version now). Before, the error
    blamed an effective_at the caller never passed and hinted at "a later effective_at", which amend refuses
    as in the future: the model was sent round in a circle. Now it says to retire and write again."""
    starts = (datetime.now(UTC) + timedelta(days=400)).replace(microsecond=0)
    acme, initech = await _plan(client, starts)
    code, text = await fails(
        client, "amend", {"id": initech["id"], "content": "Ana works at Initech GmbH.", "reason": "full name"}
    )
    assert code == "invalid_input"
    for words in ("planned change", "retire", "valid_from", "to move its date, write the same words again"):
        assert words in text
    assert "later effective_at" not in text
    # Following the hint gives the corrected plan, Acme still current until the date.
    await ok(client, "retire", {"id": initech["id"], "reason": "full name"})
    fixed = await _write(client, "Ana works at Initech GmbH.", starts)
    assert fixed["supersedes_later"] == [acme["id"]]
    assert await _employers(client) == ["Ana works at Acme."]
    assert await _employers(client, as_of=(starts + timedelta(days=1)).isoformat()) == [
        "Ana works at Initech GmbH."
    ]


async def test_a_plan_written_again_with_another_date_moves_the_plan(client: Client, engine: Engine) -> None:
    """ "Ana works at Initech" from day 400, then the same words from day 300 ("the start moved up"). Before,
    the second write was a `duplicate` (the id comes from the words) and the new date was silently dropped:
    day 350 still answered Acme. Now the plan moves: a new memory of the same words from day 300 replaces the
    old plan (which never held), Acme ends on day 300, and the receipt says both."""
    now = datetime.now(UTC).replace(microsecond=0)
    acme = await _write(client, "Ana works at Acme.")
    june = await _write(client, "Ana works at Initech.", now + timedelta(days=400))
    march = await _write(client, "Ana works at Initech.", now + timedelta(days=300))
    assert march["status"] == "added"
    assert march["id"] != june["id"]
    assert march["supersedes"] == [june["id"]]
    assert march["supersedes_later"] == [acme["id"]]
    assert await _employers(client) == ["Ana works at Acme."]
    assert await _employers(client, as_of=(now + timedelta(days=350)).isoformat()) == [
        "Ana works at Initech."
    ]
    read = await ok(client, "memory_read", {"id": acme["id"]})
    assert read["memory"]["valid_to"] == (now + timedelta(days=300)).isoformat().replace("+00:00", "Z")
    moved = (await ok(client, "memory_read", {"id": march["id"]}))["memory"]
    assert moved["valid_from"] == (now + timedelta(days=300)).isoformat().replace("+00:00", "Z")
    assert (await ok(client, "memory_read", {"id": june["id"]}))["memory"]["status"] == "superseded"
    # The same words and date again change nothing.
    again = await _write(client, "Ana works at Initech.", now + timedelta(days=300))
    assert (again["status"], again["id"]) == ("duplicate", march["id"])
    assert engine.verify().ok


async def test_a_plan_moved_later_ends_the_current_value_at_its_new_date(
    client: Client, engine: Engine
) -> None:
    """The start is pushed back from day 300 to day 400: Acme holds until day 400, not only day 300."""
    now = datetime.now(UTC).replace(microsecond=0)
    acme = await _write(client, "Ana works at Acme.")
    await _write(client, "Ana works at Initech.", now + timedelta(days=300))
    moved = await _write(client, "Ana works at Initech.", now + timedelta(days=400))
    assert (moved["status"], moved["supersedes_later"]) == ("added", [acme["id"]])
    assert await _employers(client, as_of=(now + timedelta(days=350)).isoformat()) == ["Ana works at Acme."]
    assert await _employers(client, as_of=(now + timedelta(days=450)).isoformat()) == [
        "Ana works at Initech."
    ]
    read = await ok(client, "memory_read", {"id": acme["id"]})
    assert read["memory"]["valid_to"] == (now + timedelta(days=400)).isoformat().replace("+00:00", "Z")
    assert read["relations"] == [
        f"Ana —works_at→ Acme [? → {(now + timedelta(days=400)).date().isoformat()}, ended by "
        f"{(await ok(client, 'memory_read', {'id': moved['id']}))['memory']['id']}]"
    ]
    assert engine.verify().ok


async def test_a_plan_whose_start_has_come_written_again_with_today_replaces_the_current_value_now(
    client: Client,
) -> None:
    """The plan was for day 300; the same words with today's date: she started already. Acme is replaced now."""
    now = datetime.now(UTC).replace(microsecond=0)
    acme = await _write(client, "Ana works at Acme.")
    plan = await _write(client, "Ana works at Initech.", now + timedelta(days=300))
    today = await _write(client, "Ana works at Initech.", datetime.now(UTC))
    assert (today["status"], today["supersedes"]) == ("added", [plan["id"], acme["id"]])
    assert await _employers(client) == ["Ana works at Initech."]
    assert (await ok(client, "memory_read", {"id": acme["id"]}))["memory"]["status"] == "superseded"


async def test_a_current_fact_written_again_with_another_date_is_a_duplicate(client: Client) -> None:
    """Only a plan not begun moves: a fact already true written again (with another valid_from, as with other
    metadata) is a duplicate that changes nothing, as before."""
    acme = await _write(client, "Ana works at Acme.")
    again = await _write(client, "Ana works at Acme.", datetime.now(UTC) - timedelta(days=30))
    assert (again["status"], again["id"]) == ("duplicate", acme["id"])


async def _recorded(client: Client, memory: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(
        (await ok(client, "memory_read", {"id": memory["id"]}))["memory"]["recorded_at"]
    )


async def test_what_we_knew_while_a_plan_stood_is_the_plan_after_its_cancellation(client: Client) -> None:
    """known_at between the plan's writing and its cancellation, as_of after its date: what we believed then
    was Initech alone (Acme was to end on the date). Before, the cancellation had undone Acme's end, so that
    view answered Acme and Initech; as known now, Acme alone."""
    starts = (datetime.now(UTC) + timedelta(days=400)).replace(microsecond=0)
    _, initech = await _plan(client, starts)
    await ok(client, "retire", {"id": initech["id"], "reason": "the offer fell through"})
    planned = await _recorded(client, initech)
    cancelled = datetime.fromisoformat(
        (await ok(client, "memory_read", {"id": initech["id"]}))["memory"]["retired_at"]
    )
    between = (planned + (cancelled - planned) / 2).isoformat()
    later = (starts + timedelta(days=30)).isoformat()
    assert await _employers(client, as_of=later, known_at=between) == ["Ana works at Initech."]
    assert await _employers(client, known_at=between) == ["Ana works at Acme."]  # as of then: before the date
    assert await _employers(client, as_of=later) == ["Ana works at Acme."]
    assert await _employers(client, as_of=later, known_at=datetime.now(UTC).isoformat()) == [
        "Ana works at Acme."
    ]


async def test_what_we_knew_while_a_plan_stood_is_the_plan_after_news_overtook_it(client: Client) -> None:
    """The plan overtaken by news of now ("Ana works at Globex"): between the two, as_of after the plan's
    date, what we believed was Initech alone (before: Acme and Initech)."""
    starts = (datetime.now(UTC) + timedelta(days=400)).replace(microsecond=0)
    _, initech = await _plan(client, starts)
    globex = await _write(client, "Ana works at Globex.")
    between = (
        await _recorded(client, initech)
        + (await _recorded(client, globex) - await _recorded(client, initech)) / 2
    )
    later = (starts + timedelta(days=30)).isoformat()
    assert await _employers(client, as_of=later, known_at=between.isoformat()) == ["Ana works at Initech."]
    assert await _employers(client, as_of=later) == ["Ana works at Globex."]


async def test_what_we_knew_before_a_plan_moved_is_its_old_date(client: Client) -> None:
    """Initech planned for day 300, then moved to day 400. Known between the two, as of day 350: Initech (the
    old date stood then; before: Acme and Initech); known now: Acme."""
    now = datetime.now(UTC).replace(microsecond=0)
    await _write(client, "Ana works at Acme.")
    first = await _write(client, "Ana works at Initech.", now + timedelta(days=300))
    moved = await _write(client, "Ana works at Initech.", now + timedelta(days=400))
    between = (
        await _recorded(client, first) + (await _recorded(client, moved) - await _recorded(client, first)) / 2
    )
    day350 = (now + timedelta(days=350)).isoformat()
    assert await _employers(client, as_of=day350, known_at=between.isoformat()) == ["Ana works at Initech."]
    assert await _employers(client, as_of=day350) == ["Ana works at Acme."]


@pytest.mark.parametrize("when", ["9999-12-31T23:59:59-12:00", "0001-01-01T00:00:00+14:00"])
async def test_a_date_that_leaves_the_calendar_in_utc_is_an_invalid_argument_and_moves_nothing(
    client: Client, when: str
) -> None:
    """The last day of year 9999 west of UTC is in year 10000 in UTC (and the first of year 1 east of it in
    year 0): converting it raised OverflowError, reported as an unexpected server error with no hint, for
    memory_write's valid_from and recall's as_of and known_at. Found by attack22a."""
    starts = (datetime.now(UTC) + timedelta(days=300)).replace(microsecond=0)
    acme, plan = await _plan(client, starts)
    args = {"content": "Ana works at Initech.", "scopes": ANA, "kind": "fact", "valid_from": when}
    code, text = await fails(client, "memory_write", args)
    assert code == "invalid_arguments", (code, text)
    assert "valid_from" in text
    assert "UTC" in text
    for view in ("as_of", "known_at"):
        code, text = await fails(client, "recall", {"query": QUESTION, "scopes": ANA, view: when})
        assert code == "invalid_arguments", (code, text)
        assert view in text
    read = await ok(client, "memory_read", {"id": acme["id"]})
    assert read["memory"]["valid_to"] == starts.isoformat().replace("+00:00", "Z")
    assert (await ok(client, "memory_read", {"id": plan["id"]}))["memory"]["status"] == "current"


async def test_a_plan_with_an_end_keeps_it_when_its_start_moves(client: Client) -> None:
    """Initech from day 300 to day 350 (a secondment), then the same words from day 200: the start moves, the
    end stays (before, the moved plan held for good: day 360 answered Initech, which the plan said was over).
    Moved past its end with no new end: refused, nothing changed. Found by attack22a."""
    now = datetime.now(UTC).replace(microsecond=0)
    acme = await _write(client, "Ana works at Acme.")
    args = {"content": "Ana works at Initech.", "scopes": ANA, "kind": "fact"}
    plan = await ok(
        client,
        "memory_write",
        {
            **args,
            "valid_from": (now + timedelta(days=300)).isoformat(),
            "valid_to": (now + timedelta(days=350)).isoformat(),
        },
    )
    code, text = await fails(
        client, "memory_write", {**args, "valid_from": (now + timedelta(days=360)).isoformat()}
    )
    assert code == "invalid_input", (code, text)
    assert "valid_to" in text
    assert (await ok(client, "memory_read", {"id": plan["id"]}))["memory"]["status"] == "current"
    read = await ok(client, "memory_read", {"id": acme["id"]})
    assert read["memory"]["valid_to"] == (now + timedelta(days=300)).isoformat().replace("+00:00", "Z")
    moved = await ok(client, "memory_write", {**args, "valid_from": (now + timedelta(days=200)).isoformat()})
    assert (moved["status"], moved["supersedes"]) == ("added", [plan["id"]])
    stored = (await ok(client, "memory_read", {"id": moved["id"]}))["memory"]
    assert stored["valid_to"] == (now + timedelta(days=350)).isoformat().replace("+00:00", "Z")
    assert await _employers(client, as_of=(now + timedelta(days=250)).isoformat()) == [
        "Ana works at Initech."
    ]
    assert await _employers(client, as_of=(now + timedelta(days=360)).isoformat()) == []


async def test_a_moved_plan_takes_no_end_a_later_plan_gave_it(client: Client) -> None:
    """Globex from day 300, Initech from day 400 (which ends Globex then). Globex moved to day 200, then
    Initech cancelled: Globex holds for good (the end was Initech's, not stated with Globex)."""
    now = datetime.now(UTC).replace(microsecond=0)
    await _write(client, "Ana works at Acme.")
    await _write(client, "Ana works at Globex.", now + timedelta(days=300))
    initech = await _write(client, "Ana works at Initech.", now + timedelta(days=400))
    moved = await _write(client, "Ana works at Globex.", now + timedelta(days=200))
    assert moved["status"] == "added"
    assert await _employers(client, as_of=(now + timedelta(days=450)).isoformat()) == [
        "Ana works at Initech."
    ]
    await ok(client, "retire", {"id": initech["id"], "reason": "the Initech offer fell through"})
    assert await _employers(client, as_of=(now + timedelta(days=450)).isoformat()) == ["Ana works at Globex."]


async def test_a_moved_plan_keeps_its_kind(client: Client) -> None:
    """A fact planned for day 300, moved to day 200 by the same words with only the new valid_from (memory_write's
    kind defaults to note): the moved plan was a note, so recall asking for facts no longer found Ana's
    employer on day 250. A move changes the date only. Found by attack22a."""
    now = datetime.now(UTC).replace(microsecond=0)
    await _write(client, "Ana works at Acme.")
    await _write(client, "Ana works at Initech.", now + timedelta(days=300))
    moved = await ok(
        client,
        "memory_write",
        {
            "content": "Ana works at Initech.",
            "scopes": ANA,
            "valid_from": (now + timedelta(days=200)).isoformat(),
        },
    )
    assert moved["status"] == "added"
    assert (await ok(client, "memory_read", {"id": moved["id"]}))["memory"]["kind"] == "fact"
    day250 = (now + timedelta(days=250)).isoformat()
    assert await _employers(client, as_of=day250, kinds=["fact"]) == ["Ana works at Initech."]


async def test_a_moved_plan_keeps_the_relations_its_writer_gave(client: Client) -> None:
    """A plan whose words do not say what it changes ("The new job for Ana begins with the team at
    Initech.") written with relations=[Ana works_at Initech]; the same words again with only an earlier
    valid_from. Before, the moved plan had no relation: Acme was reopened and never ended again (day 250 and
    day 500 answered Acme only). The relations the plan recorded come with it. Found by attack22a."""
    now = datetime.now(UTC).replace(microsecond=0)
    acme = await _write(client, "Ana works at Acme.")
    words = "The new job for Ana begins with the team at Initech."
    args = {"content": words, "scopes": ANA, "kind": "fact"}
    relation = {"subject": "Ana", "predicate": "works_at", "object": "Initech"}
    plan = await ok(
        client,
        "memory_write",
        {**args, "valid_from": (now + timedelta(days=300)).isoformat(), "relations": [relation]},
    )
    assert plan["supersedes_later"] == [acme["id"]]
    moved = await ok(client, "memory_write", {**args, "valid_from": (now + timedelta(days=200)).isoformat()})
    assert (moved["status"], moved["supersedes"], moved["supersedes_later"]) == (
        "added",
        [plan["id"]],
        [acme["id"]],
    )
    assert moved["relations"] == ["Ana —works_at→ Initech"]
    read = await ok(client, "memory_read", {"id": acme["id"]})
    assert read["memory"]["valid_to"] == (now + timedelta(days=200)).isoformat().replace("+00:00", "Z")
