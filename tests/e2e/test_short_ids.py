"""Short ids (issue 14) as a client meets them: over stdio, and over HTTP between token holders.

The twin contents (ids sharing their first 12 hex characters) are explained in tests/tools/test_short_ids.py.
"""

from __future__ import annotations

import json
import re

import pytest
from mcp import Client

from storage import content_id
from tests.e2e.conftest import Store, call, error_text, http_server
from tests.e2e.test_auth import as_token, fails, make_token
from tests.tools.test_short_ids import SHARED, TWIN_A, TWIN_B

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def test_recalled_ids_go_back_into_the_tools_and_a_shared_one_is_refused_over_stdio(
    shared_store: Store,
) -> None:
    scope = "project:short-ids"
    async with Client(shared_store.stdio(default_scope=scope), mode="legacy") as client:
        await call(client, "memory_write", {"content": "The staging server is db-7 in Frankfurt."})
        found = await call(client, "recall", {"query": "staging server"})
        sid = found["results"][0]["id"]
        assert re.fullmatch(r"[0-9a-f]{12}", sid)
        amended = await call(client, "amend", {"id": sid, "content": "The staging server is db-9 in Paris."})
        assert amended["supersedes"] == sid
        record = await call(client, "memory_read", {"id": amended["id"]})
        assert [v["status"] for v in record["versions"]] == ["superseded", "current"]
        assert record["versions"][0]["id"] == content_id("The staging server is db-7 in Frankfurt.")

        await call(client, "memory_write", {"content": TWIN_A})
        await call(client, "memory_write", {"content": TWIN_B})
        refused = await client.call_tool("retire", {"id": SHARED})
        text = error_text(refused)
        assert refused.meta is not None
        assert refused.meta["mnemograph/error"]["code"] == "ambiguous"
        assert content_id(TWIN_A) in text
        assert content_id(TWIN_B) in text
        recalled = await call(client, "recall", {"query": "spare bike key drawer"})
        assert [r["id"] for r in recalled["results"]].count(SHARED) == 2, "neither was retired"
        retired = await call(client, "retire", {"id": content_id(TWIN_A)})
        assert retired["id"] == SHARED
        await call(client, "purge", {"scope": scope, "confirm": scope})


async def test_a_short_id_shared_with_a_memory_one_cannot_read_is_not_ambiguous_and_names_it_not(
    store: Store,
) -> None:
    a = await make_token(store, "A", "team:a=admin")
    b = await make_token(store, "B", "team:b=admin")
    async with (
        http_server(store, auth=True) as server,
        as_token(server.url, a) as ca,
        as_token(server.url, b) as cb,
    ):
        theirs = await call(cb, "memory_write", {"content": TWIN_B, "scopes": ["team:b"]})
        mine = await call(ca, "memory_write", {"content": TWIN_A, "scopes": ["team:a"]})
        assert mine["id"] == theirs["id"] == SHARED
        # Only memories A may read are candidates: the short id is A's own memory, and B's is never named.
        read = await call(ca, "memory_read", {"id": SHARED})
        assert read["memory"]["id"] == content_id(TWIN_A)
        amended = await call(ca, "amend", {"id": SHARED, "content": "Parking note: the key is in the box."})
        assert amended["supersedes"] == SHARED
        assert content_id(TWIN_B) not in json.dumps([read, amended])
        assert "29475334" not in json.dumps([read, amended])
        # B's full id answers A exactly like an id that exists nowhere.
        unknown = "f" * 32
        answers = [await fails(ca, "memory_read", {"id": i}) for i in (content_id(TWIN_B), unknown)]
        assert answers[0] == ("not_found", answers[1][1].replace(unknown, content_id(TWIN_B)))
        untouched = await call(cb, "memory_read", {"id": content_id(TWIN_B)})
        assert untouched["memory"]["status"] == "current"
        assert untouched["versions"] == [untouched["memory"]]
