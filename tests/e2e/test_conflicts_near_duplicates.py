"""Write-time intelligence as two token holders meet it over real HTTP with SDK clients (issue 15): recall flags
a memory that a current memory contradicts, naming only memories the reader may read, and memory_write names
paraphrases already stored in the same scope and folds into them when asked."""

from __future__ import annotations

import json
from contextlib import AsyncExitStack

import pytest

from tests.e2e.conftest import Store, call, http_server
from tests.e2e.test_auth import as_token, make_token

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def test_recall_flags_contradictions_and_writes_name_near_duplicates(store: Store) -> None:
    lead_token = await make_token(store, "lead", "agent:lead=w", "team:t=w")
    member_token = await make_token(store, "member", "team:t=w")
    async with http_server(store, auth=True) as server, AsyncExitStack() as stack:
        lead = await stack.enter_async_context(as_token(server.url, lead_token))
        member = await stack.enter_async_context(as_token(server.url, member_token))

        # The lead keeps a private note; then tells the team the opposite, in its own scope too.
        private = await call(
            lead, "memory_write", {"content": "Ana is allergic to peanuts", "scopes": ["agent:lead"]}
        )
        shared = await call(
            lead,
            "memory_write",
            {"content": "Ana is not allergic to peanuts", "scopes": ["team:t", "agent:lead"]},
        )
        assert shared["contradicts"] == [private["id"]]
        plain = await call(
            member, "memory_write", {"content": "The team offsite is in Porto", "scopes": ["team:t"]}
        )

        # The lead reads both: each result names the other, in conflicts_with and in its reason.
        seen = await call(lead, "recall", {"query": "Is Ana allergic to peanuts?", "scopes": ["agent:lead"]})
        by_id = {r["id"]: r for r in seen["results"]}
        assert by_id[private["id"]]["conflicts_with"] == [shared["id"]]
        assert by_id[shared["id"]]["conflicts_with"] == [private["id"]]
        assert f"conflicts with {private['id']}" in by_id[shared["id"]]["why"]

        # The member cannot read the private note: no conflict is shown, and its id appears nowhere.
        theirs = await call(member, "recall", {"query": "Is Ana allergic to peanuts?", "scopes": ["team:t"]})
        assert [r["id"] for r in theirs["results"]] == [shared["id"]]
        assert "conflicts_with" not in theirs["results"][0]
        assert "conflicts" not in theirs["results"][0]["why"]
        assert private["id"] not in json.dumps(theirs)

        # A result with no conflict keeps the compact shape it had: no new key, no new words.
        offsite = await call(member, "recall", {"query": "where is the team offsite", "scopes": ["team:t"]})
        assert offsite["results"][0]["id"] == plain["id"]
        assert set(offsite["results"][0]) == {"id", "content", "kind", "when", "why"}

        # A paraphrase in the same scope is named with its similarity, and stored by default.
        deploys = await call(
            member, "memory_write", {"content": "Deploys happen on Tuesdays", "scopes": ["team:t"]}
        )
        # (The lead looks first, as an agent does before writing: 'report' compares with what the search
        # index holds, which a write acknowledged a few milliseconds earlier may not have reached yet.)
        await call(lead, "recall", {"query": "when do we deploy", "scopes": ["team:t"]})
        again = await call(
            lead,
            "memory_write",
            {"content": "We deploy on Tuesdays", "scopes": ["team:t"], "on_near_duplicate": "report"},
        )
        assert again["status"] == "added"
        assert [n["id"] for n in again["near_duplicates"]] == [deploys["id"]]
        assert 0.8 <= again["near_duplicates"][0]["similarity"] < 1

        # Asked to fold, nothing new is stored: the receipt names the existing memory, now also in agent:lead.
        japanese = await call(
            member, "memory_write", {"content": "Ines speaks fluent Japanese", "scopes": ["team:t"]}
        )
        folded = await call(
            lead,
            "memory_write",
            {
                "content": "Ines is fluent in Japanese",
                "scopes": ["agent:lead", "team:t"],
                "on_near_duplicate": "fold",
            },
        )
        assert (folded["status"], folded["id"]) == ("folded", japanese["id"])
        assert folded["scopes"] == ["agent:lead", "team:t"]
        mine = await call(lead, "recall", {"query": "Japanese", "scopes": ["agent:lead"]})
        assert [r["content"] for r in mine["results"]] == ["Ines speaks fluent Japanese"]
        team = await call(member, "recall", {"query": "Ines Japanese", "scopes": ["team:t"]})
        assert [r["content"] for r in team["results"]] == ["Ines speaks fluent Japanese"]

        # A negated statement never folds into the asserted one.
        negated = await call(
            lead,
            "memory_write",
            {"content": "Ines does not speak Japanese", "scopes": ["team:t"], "on_near_duplicate": "fold"},
        )
        assert (negated["status"], negated["near_duplicates"]) == ("added", [])
