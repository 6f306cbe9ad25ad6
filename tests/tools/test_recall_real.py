"""Recall for memories written as a client writes them (issue 14), each symptom met through the MCP tools.

Every test here fails on 0a747b1: grouping switched on by a ``session`` metadata key, facts dated and
boosted by their write time, amend without a time of effect, version chains and two-hop relations that did
not help recall, and an answer of k bulky results whatever their strength.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from mcp import Client

from tests.tools.conftest import fails, ok
from tools._wire import short_id, short_ids

pytestmark = pytest.mark.anyio

FILLERS = [
    "I commute by bike.",
    "My favourite food is ramen.",
    "The office plant needs water on Fridays.",
    "I am learning to play the cello.",
    "My sister lives in Porto.",
    "The team standup is at 9:30 every morning.",
    "I prefer window seats on long flights.",
    "The car is due for a service in spring.",
    "I read mostly science fiction.",
    "We adopted a cat called Miso.",
    "My running shoes are worn out.",
    "The wifi password is on the fridge.",
]


async def _write(client: Client, content: str, **more: Any) -> dict[str, Any]:
    return await ok(client, "memory_write", {"content": content, **more})


async def _fillers(client: Client, scope: str = "user:tester") -> None:
    for text in FILLERS:
        await _write(client, text, kind="fact", scopes=[scope])


# -- 1. no behaviour keyed on one benchmark's metadata ----------------------------------------------------


async def test_a_session_metadata_key_does_not_switch_grouping_on(client: Client) -> None:
    """A client's own ``session`` metadata is stored as is: near-duplicates still fold into one result.
    Ranking conversations as a whole is asked for with ``group_by``."""
    a = await _write(
        client, "Our flight to Lisbon leaves at 9am on Friday.", kind="note", metadata={"session": "s1"}
    )
    b = await _write(
        client, "Our flight to Lisbon leaves at 9am Friday.", kind="note", metadata={"session": "s2"}
    )
    await _write(
        client, "Unrelated: the printer is out of toner.", scopes=["user:bob"], metadata={"session": "x"}
    )
    plain = await ok(client, "recall", {"query": "when does our flight to Lisbon leave"})
    ids = [r["id"] for r in plain["results"]]
    assert ids.count(a["id"]) + ids.count(b["id"]) == 1, "near-duplicates must fold without group_by"
    plain = await ok(client, "recall", {"query": "when does our flight to Lisbon leave", "explain": True})
    assert short_ids(plain["results"][0]["explain"]["collapsed"]) in ([a["id"]], [b["id"]])
    grouped = await ok(
        client, "recall", {"query": "when does our flight to Lisbon leave", "group_by": "session"}
    )
    assert {a["id"], b["id"]} <= {r["id"] for r in grouped["results"]}, "two conversations, two answers"
    code, text = await fails(client, "recall", {"query": "flight", "group_by": ""})
    assert code == "invalid_arguments"
    assert "group_by" in text


# -- 2. a compact answer a model can use ---------------------------------------------------------------------


async def test_default_answer_is_compact_and_explain_gives_the_rest(client: Client) -> None:
    written = await _write(client, "Ana Lima's passport number is P-4471.", kind="fact")
    await _fillers(client)
    out = await ok(client, "recall", {"query": "Ana Lima passport number"})
    top = out["results"][0]
    assert top["id"] == written["id"]
    # A current memory in the one scope searched: no status, no scopes (both would repeat what the call says).
    assert set(top) == {"id", "content", "kind", "when", "why"}
    assert top["when"].startswith("since ")
    assert "bm25 #1" in top["why"]
    assert len(out["results"]) < 10, "results far below the best are left out (relevance rule)"
    full = await ok(client, "recall", {"query": "Ana Lima passport number", "explain": True})
    explained = full["results"][0]["explain"]
    assert explained["lanes"]["bm25"] == 1
    assert explained["provenance"]["client"] == "tests"
    assert 0 < explained["score"] < 10
    assert len(repr(explained["score"])) <= 8


async def test_scopes_and_status_appear_when_they_say_something(client: Client) -> None:
    shared = await _write(
        client, "The Zephyr launch review is on Thursday.", scopes=["user:tester", "team:zephyr"]
    )
    only = await _write(client, "The Zephyr launch checklist lives in the wiki.", scopes=["user:tester"])
    one = await ok(client, "recall", {"query": "Zephyr launch", "scopes": ["user:tester"]})
    by_id = {r["id"]: r for r in one["results"]}
    assert sorted(by_id[shared["id"]]["scopes"]) == ["team:zephyr", "user:tester"], "shared: where else it is"
    assert "scopes" not in by_id[only["id"]], "only in the scope searched"
    both = await ok(client, "recall", {"query": "Zephyr launch", "scopes": ["user:tester", "team:zephyr"]})
    assert [r["scopes"] for r in both["results"] if r["id"] == only["id"]] == [["user:tester"]]
    await ok(client, "retire", {"id": only["id"]})
    history = await ok(
        client,
        "recall",
        {"query": "Zephyr launch checklist", "scopes": ["user:tester"], "include_history": True},
    )
    status = {r["id"]: r.get("status") for r in history["results"]}
    assert (status[only["id"]], status[shared["id"]]) == ("retired", None)


async def test_the_reason_names_lanes_that_ranked_it_high_and_validity_is_told_to_the_day(
    client: Client,
) -> None:
    for i in range(14):
        await _write(client, f"Standup note {i}: the Zephyr deploy moved to slot {i}.", kind="fact")
    await _fillers(client)
    out = await ok(client, "recall", {"query": "Zephyr deploy slot", "k": 14, "explain": True})
    assert len(out["results"]) > 10
    far = 0
    for r in out["results"]:
        ranks = r["explain"]["lanes"]
        named = dict(part.split(" #") for part in r["why"].split("; ")[0].split(", "))
        high = {lane for lane, rank in ranks.items() if rank <= 10}
        assert set(named) == (high or {min(ranks, key=ranks.get)}), (r["why"], ranks)
        assert all(int(named[lane]) == ranks[lane] for lane in named)
        far += any(rank > 10 for rank in ranks.values())
        assert r["when"] == "since " + r["explain"]["valid_from"][:10], "a fact's validity, to the day"
    assert far, "some result was ranked past 10 by a lane (else this test shows nothing)"


async def test_long_content_is_cut_with_a_pointer_to_memory_read(client: Client) -> None:
    long = "Quarterly planning notes for the Zephyr project. " + "Detail line about budgets. " * 1000
    written = await _write(client, long)
    await _fillers(client)
    out = await ok(client, "recall", {"query": "Zephyr project planning"})
    top = out["results"][0]
    assert top["id"] == written["id"]
    assert len(top["content"]) < 1200 < len(long)
    assert "memory_read" in top["content"]
    whole = await ok(client, "memory_read", {"id": top["id"]})
    assert whole["memory"]["content"] == long


# -- 3. version chains ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("grouping", [{}, {"group_by": "session"}])
async def test_a_query_matching_an_earlier_version_finds_the_current_one(
    client: Client, grouping: dict[str, str]
) -> None:
    """Also when the caller ranks by a metadata group (try14 F6): grouped recall dropped the hits on earlier
    versions, so the current one came last, with no reason given."""
    first = await _write(client, "I work as a software engineer at Initech.", kind="fact")
    await _fillers(client)
    second = await ok(
        client, "amend", {"id": first["id"], "content": "I work as a senior software engineer at Initech."}
    )
    third = await ok(client, "amend", {"id": second["id"], "content": "I am now a tech lead at Globex."})
    plain = await ok(client, "recall", {"query": "Where do I work?", **grouping})
    assert plain["results"][0]["id"] == third["id"], [r["content"] for r in plain["results"]]
    old_words = await ok(client, "recall", {"query": "software engineer at Initech", **grouping})
    assert old_words["results"][0]["id"] == third["id"], [r["content"] for r in old_words["results"]]
    assert "earlier version" in old_words["results"][0]["why"]
    out = await ok(client, "recall", {"query": "Where do I work?", "explain": True, **grouping})
    top = out["results"][0]
    assert short_id(top["id"]) == third["id"]  # explain=true gives full ids
    assert "earlier version" in top["why"]
    assert set(short_ids(top["explain"]["via"])) <= {first["id"], second["id"]}
    assert top["explain"]["via"]
    assert short_ids(r["id"] for r in out["results"]).count(third["id"]) == 1


# -- 4. relations reach two hops -----------------------------------------------------------------------------


async def test_two_hop_relations_reach_the_answer(client: Client) -> None:
    await _write(
        client,
        "The Grand Palm, a heritage hotel on the lake shore, is located in Udaipur.",
        kind="fact",
        relations=[{"subject": "Grand Palm", "predicate": "located_in", "object": "Udaipur"}],
    )
    state = await _write(
        client,
        "Udaipur belongs to Rajasthan.",
        kind="fact",
        relations=[{"subject": "Udaipur", "predicate": "located_in", "object": "Rajasthan"}],
    )
    for text in (
        "Which state has the best beaches? Goa, according to my brother.",
        "The hotel in Kochi had a great breakfast buffet.",
        "The state fair is in September.",
        "Palm oil is in a lot of snacks.",
        "The Grand Hyatt lobby was too cold.",
        "Kerala is a state in the south of India.",
    ):
        await _write(client, text, kind="fact")
    await _fillers(client)
    plain = await ok(client, "recall", {"query": "Which state is the Grand Palm hotel in?"})
    assert state["id"] in [r["id"] for r in plain["results"][:5]], [r["content"] for r in plain["results"]]
    out = await ok(client, "recall", {"query": "Which state is the Grand Palm hotel in?", "explain": True})
    top5 = out["results"][:5]
    hit = next((r for r in top5 if short_id(r["id"]) == state["id"]), None)
    assert hit is not None, [r["content"] for r in out["results"]]
    assert any("Udaipur" in p and "Rajasthan" in p for p in hit["explain"]["paths"])
    assert "Rajasthan" in hit["why"]


async def test_an_amended_statement_keeps_the_relations_its_new_text_still_names(client: Client) -> None:
    """try14 F5: amend took no relations and read none from the new text, so amending "Udaipur belongs to
    Rajasthan" cut the path from the Grand Palm to its state. A relation whose two ends the new text still
    names carries over; one whose end it drops does not."""
    await _write(
        client,
        "The Grand Palm, a heritage hotel on the lake shore, is located in Udaipur.",
        kind="fact",
        relations=[{"subject": "Grand Palm", "predicate": "located_in", "object": "Udaipur"}],
    )
    state = await _write(
        client,
        "Udaipur belongs to Rajasthan.",
        kind="fact",
        relations=[{"subject": "Udaipur", "predicate": "located_in", "object": "Rajasthan"}],
    )
    for text in ("The state fair is in September.", "Kerala is a state in the south of India."):
        await _write(client, text, kind="fact")
    await _fillers(client)
    amended = await ok(
        client, "amend", {"id": state["id"], "content": "Udaipur belongs to Rajasthan, in north-west India."}
    )
    out = await ok(client, "recall", {"query": "Which state is the Grand Palm hotel in?", "explain": True})
    hit = next((r for r in out["results"][:5] if short_id(r["id"]) == amended["id"]), None)
    assert hit is not None, [r["content"] for r in out["results"]]
    assert any("Udaipur" in p and "Rajasthan" in p for p in hit["explain"]["paths"])
    moved = await ok(client, "amend", {"id": amended["id"], "content": "Udaipur is a lake city."})
    again = await ok(client, "recall", {"query": "Which state is the Grand Palm hotel in?", "explain": True})
    for r in again["results"]:
        if short_id(r["id"]) == moved["id"]:
            assert not any("Rajasthan" in p for p in r["explain"].get("paths", ()))


# -- 5. time means what people mean ------------------------------------------------------------------------


async def test_facts_are_not_boosted_by_a_time_in_the_query(client: Client) -> None:
    """Facts told this week and an event of this week; a week later, "what did Sam do last week" must put
    the event first: facts are not dated by when they were written."""
    for text in ("Sam has a dog named Rex.", "Sam lives in a flat in Leeds.", "Sam works at Initech."):
        await _write(client, text, kind="fact")
    await _write(client, "Sam prefers tea to coffee.", kind="preference")
    happened = datetime.now(UTC).replace(microsecond=0)
    run = await _write(
        client, "Sam ran the Leeds half marathon.", kind="event", event_time=happened.isoformat()
    )
    asked = {"query": "what did Sam do last week", "now": (happened + timedelta(days=7)).isoformat()}
    plain = await ok(client, "recall", asked)
    assert plain["results"][0]["id"] == run["id"], [r["content"] for r in plain["results"]]
    out = await ok(client, "recall", {**asked, "explain": True})
    assert short_id(out["results"][0]["id"]) == run["id"]
    assert out["results"][0]["when"] == happened.strftime("%Y-%m-%dT%H:%MZ")
    assert out["results"][0]["explain"]["time"]["rule"] == "in_interval"
    facts = [r for r in out["results"] if r["kind"] in ("fact", "preference")]
    assert facts
    assert all("time" not in r["explain"] for r in facts)
    assert all("event_time" not in r["explain"] for r in facts)


async def test_amend_with_effective_at_answers_as_of_on_valid_time(client: Client) -> None:
    old = await _write(client, "Sam works at Initech.", kind="fact", valid_from="2023-01-01")
    new = await ok(
        client,
        "amend",
        {"id": old["id"], "content": "Sam works at Globex since 1 October.", "effective_at": "2024-10-01"},
    )
    assert new["valid_from"].startswith("2024-10-01")
    # "1 October" in the new text is read from when the change took effect, not from the day of the call.
    stored = (await ok(client, "memory_read", {"id": new["id"]}))["memory"]
    assert stored["event_time"].startswith("2024-10-01"), stored
    october = await ok(client, "recall", {"query": "where did Sam work", "as_of": "2024-10-15"})
    assert october["results"][0]["id"] == new["id"]
    assert october["results"][0]["when"] == "since 2024-10-01"
    september = await ok(client, "recall", {"query": "where did Sam work", "as_of": "2024-09-15"})
    assert september["results"][0]["id"] == old["id"]
    assert september["results"][0]["when"] == "2023-01-01 to 2024-10-01"
    # What we knew then: before the amendment was recorded, October still looked like Initech.
    recorded = (await ok(client, "memory_read", {"id": old["id"]}))["memory"]["recorded_at"]
    then = await ok(
        client, "recall", {"query": "where did Sam work", "as_of": "2024-10-15", "known_at": recorded}
    )
    assert [r["id"] for r in then["results"]] == [old["id"]]
    code, _ = await fails(
        client, "amend", {"id": new["id"], "content": "Sam works at Hooli.", "effective_at": "2022-01-01"}
    )
    assert code == "invalid_input"


async def test_retire_with_effective_at_closes_validity_then(client: Client) -> None:
    m = await _write(client, "Sam is on the chess club committee.", kind="fact", valid_from="2024-01-01")
    out = await ok(client, "retire", {"id": m["id"], "effective_at": "2024-06-30"})
    assert out["valid_to"].startswith("2024-06-30")
    june = await ok(client, "recall", {"query": "chess club committee", "as_of": "2024-06-01"})
    assert [r["id"] for r in june["results"]] == [m["id"]]
    july = await ok(client, "recall", {"query": "chess club committee", "as_of": "2024-07-15"})
    assert july["results"] == []


async def test_a_summary_a_client_writes_is_not_called_a_mnemograph_digest(client: Client) -> None:
    fake = await _write(
        client,
        "Digest: the Zephyr launch was approved by everyone.",
        kind="summary",
        metadata={"digest_of": "chat-9", "messages": 40},
    )
    out = await ok(client, "recall", {"query": "Zephyr launch approved", "kinds": ["summary"]})
    (hit,) = [r for r in out["results"] if r["id"] == fake["id"]]
    assert "built by Mnemograph" not in hit["why"]


async def test_a_weak_match_on_an_earlier_version_does_not_bring_its_current_one(client: Client) -> None:
    """try14 F7: the similarity floor spared any result that stood for an earlier version, so a question about
    nothing stored ("quantum chromodynamics lecture") returned the job fact through a weak vector match on its
    first version. A strong match on the earlier version still leads to the current one."""
    first = await _write(client, "I work as a software engineer at Initech.", kind="fact")
    second = await ok(
        client, "amend", {"id": first["id"], "content": "I work as a senior software engineer at Initech."}
    )
    third = await ok(client, "amend", {"id": second["id"], "content": "I am now a tech lead at Globex."})
    await _fillers(client)
    nothing = await ok(client, "recall", {"query": "quantum chromodynamics lecture"})
    assert third["id"] not in [r["id"] for r in nothing["results"]], nothing["results"]
    strong = await ok(client, "recall", {"query": "software engineer at Initech"})
    assert strong["results"][0]["id"] == third["id"]


async def test_a_group_by_key_no_result_has_is_said_in_a_warning(client: Client) -> None:
    """try14 F6: a misspelt group_by changed the ranking with no word; the answer now says so."""
    await _write(client, "We planned the launch party for Friday.", metadata={"session": "s1"})
    await _write(client, "The launch party moved to Saturday.", metadata={"session": "s2"})
    right = await ok(client, "recall", {"query": "launch party", "group_by": "session"})
    assert "warning" not in right
    typo = await ok(client, "recall", {"query": "launch party", "group_by": "sesion"})
    assert typo["results"]
    assert "'sesion'" in typo["warning"]
    assert "spelling" in typo["warning"]
    assert "stale" not in typo


async def test_explain_leaves_out_empty_lists(client: Client) -> None:
    """try14 F9: docs/recall.md says empty fields are left out; explain sent "paths": [], "via": [] and
    "collapsed": [] on every result."""
    await _write(client, "The quarterly roadmap review is on Thursday.")
    out = await ok(client, "recall", {"query": "quarterly roadmap review", "explain": True})
    explained = out["results"][0]["explain"]
    assert explained["lanes"]
    assert not {"paths", "via", "collapsed"} & set(explained), explained


async def test_a_change_written_with_its_date_is_valid_from_that_date_without_an_amend(
    client: Client,
) -> None:
    """Found by a newcomer: "Sam works at Globex since 1 October 2025" written as a new memory closed Initech on
    1 October, but the Globex memory was valid only from the day it was written, so `as_of` in between found
    no employer at all. And a write whose caller gave `valid_from` closed what it replaced at the time of the
    call, not then, so `as_of` after that date found both employers."""
    old = await _write(client, "Sam works at Initech.", kind="fact", valid_from="2023-01-01")
    new = await _write(client, "Sam works at Globex since 1 October 2025.")  # the default kind, a note
    stored = (await ok(client, "memory_read", {"id": new["id"]}))["memory"]
    assert stored["valid_from"].startswith("2025-10-01"), stored
    november = await ok(client, "recall", {"query": "where did Sam work", "as_of": "2025-11-01"})
    assert [r["id"] for r in november["results"]][:1] == [new["id"]]
    assert old["id"] not in [r["id"] for r in november["results"]]
    september = await ok(client, "recall", {"query": "where did Sam work", "as_of": "2025-09-01"})
    assert [r["id"] for r in september["results"]] == [old["id"]]
    acme = await _write(
        client, "Ana works at Acme.", kind="fact", valid_from="2024-01-01", scopes=["user:ana"]
    )
    globex = await _write(
        client, "Ana works at Globex now.", kind="fact", valid_from="2025-06-01", scopes=["user:ana"]
    )
    assert acme["id"] in globex["supersedes"]
    ended = (await ok(client, "memory_read", {"id": acme["id"]}))["memory"]
    assert ended["valid_to"].startswith("2025-06-01"), ended
    later = await ok(
        client, "recall", {"query": "where does Ana work", "as_of": "2025-09-01", "scopes": ["user:ana"]}
    )
    assert [r["id"] for r in later["results"]] == [globex["id"]]


async def test_recall_in_a_scope_that_does_not_exist_says_so(client: Client) -> None:
    """A newcomer's typo (`project:nope`) returned `[]` with no hint: the agent could not tell a miss from a typo."""
    await _write(client, "The office wifi password is larch-ferry-42.", scopes=["project:site"])
    typo = await ok(client, "recall", {"query": "wifi password", "scopes": ["project:sitee"]})
    assert typo["results"] == []
    assert "No scope project:sitee exists" in typo["warning"]
    assert "list_scopes" in typo["warning"]
    right = await ok(client, "recall", {"query": "wifi password", "scopes": ["project:site"]})
    assert right["results"]
    assert "warning" not in right
    nothing = await ok(client, "recall", {"query": "the moon landing", "scopes": ["project:site"]})
    assert "warning" not in nothing  # an existing scope with no match: no warning


async def test_a_date_the_text_names_for_something_else_is_not_when_a_statement_took_effect(
    client: Client,
) -> None:
    """Found attacking session 19's change: any date anywhere in a memory was taken as when each of its
    statements took effect. "Sam lives in Porto. He was born on 4 July 1990." made the Porto memory valid from
    1990 and closed Lisbon (valid from 2020) in 1990, before it began: `as_of` 2021 answered Porto, and
    Lisbon's memory kept no validity at all. Only a time named in a statement's own sentence, and not where it
    ends ("until", "ends on" said in its own clause), is when it took effect."""
    today = datetime.now(UTC).date().isoformat()
    lisbon = await _write(client, "Sam lives in Lisbon.", kind="fact", valid_from="2020-01-01")
    porto = await _write(client, "Sam lives in Porto. He was born on 4 July 1990.", kind="fact")
    assert lisbon["id"] in porto["supersedes"]
    moved = (await ok(client, "memory_read", {"id": porto["id"]}))["memory"]
    assert moved["valid_from"].startswith(today), moved
    ended = (await ok(client, "memory_read", {"id": lisbon["id"]}))["memory"]
    assert ended["valid_from"].startswith("2020-01-01"), ended
    assert ended["valid_to"].startswith(today), ended
    then = await ok(client, "recall", {"query": "where does Sam live", "as_of": "2021-01-01"})
    assert [r["id"] for r in then["results"]] == [lisbon["id"]]
    # a date in another clause of the same line, and one that says when it ends, start nothing either
    initech = {"relations": [{"subject": "Bob", "predicate": "works_at", "object": "Initech"}]}
    for text, more in (
        ("Ana works at Globex; her contract ends on 1 March 2026.", {}),
        ("Bob works at Acme until 2020.", {}),
        ("I met Bob on 3 May 2024. He works at Initech.", initech),
    ):
        out = await _write(client, text, kind="fact", scopes=["user:other"], **more)
        stored = (await ok(client, "memory_read", {"id": out["id"]}))["memory"]
        assert stored["valid_from"].startswith(today), (text, stored)
    # the date said of the statement itself still counts, from the text or beside a caller's relation
    since = await _write(
        client,
        "I met Kim at a party. Kim works at Umbrella since 2 February 2025.",
        kind="fact",
        scopes=["user:other"],
        relations=[{"subject": "Kim", "predicate": "works_at", "object": "Umbrella"}],
    )
    stored = (await ok(client, "memory_read", {"id": since["id"]}))["memory"]
    assert stored["valid_from"].startswith("2025-02-02"), stored


async def test_an_amend_whose_new_words_name_a_past_start_changed_then(client: Client) -> None:
    """Found attacking session 19's stated starts: a write saying "since 1 October 2025" was valid from then,
    but the same words given to amend (no effective_at) changed the memory only at the call, so `as_of`
    2025-11-01 still answered the old employer. As a write, a past start the new words name is the amend's
    effective time, when not before the version it amends began."""
    old = await _write(
        client, "Sam works at Initech.", kind="fact", valid_from="2023-01-01", scopes=["user:am"]
    )
    new = await ok(client, "amend", {"id": old["id"], "content": "Sam works at Globex since 1 October 2025."})
    assert new["valid_from"].startswith("2025-10-01"), new
    november = await ok(
        client, "recall", {"query": "where did Sam work", "as_of": "2025-11-01", "scopes": ["user:am"]}
    )
    assert [r["id"] for r in november["results"]] == [new["id"]]
    september = await ok(
        client, "recall", {"query": "where did Sam work", "as_of": "2025-09-01", "scopes": ["user:am"]}
    )
    assert [r["id"] for r in september["results"]] == [old["id"]]
    # a start before the amended version began is not taken (it would end that version before it began)
    early = await _write(
        client, "Kim works at Acme.", kind="fact", valid_from="2025-01-01", scopes=["user:am"]
    )
    later = await ok(
        client, "amend", {"id": early["id"], "content": "Kim works at Umbrella since March 2020."}
    )
    assert later["valid_from"][:10] == datetime.now(UTC).date().isoformat(), later
