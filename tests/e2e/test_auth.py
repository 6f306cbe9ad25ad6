"""Access control over real HTTP: real tokens made by the CLI, the SDK client with a bearer header, the
HTTP front and its owner in subprocesses."""

from __future__ import annotations

import json
import secrets
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.e2e.conftest import (
    HEADERS,
    INITIALIZE,
    MNEMOGRAPH,
    HttpServer,
    Store,
    call,
    free_port,
    http_server,
)
from tools._wire import short_id

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def cli(store: Store, *args: str) -> subprocess.CompletedProcess[bytes]:
    return await anyio.run_process([MNEMOGRAPH, *args, "--data-dir", str(store.data_dir)], check=False)


async def make_token(store: Store, name: str, *grants: str) -> str:
    done = await cli(store, "token", "create", "--name", name, *[a for g in grants for a in ("--grant", g)])
    assert done.returncode == 0, done.stderr
    token = done.stdout.decode().strip()
    assert token.startswith("mg_")
    assert "\n" not in token
    return token


@asynccontextmanager
async def as_token(url: str, token: str) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"}
    timeout = httpx2.Timeout(30.0, read=300.0)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client


async def fails(client: Client, tool: str, arguments: dict[str, Any]) -> tuple[str, str]:
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    text = result.content[0].text  # type: ignore[union-attr]
    code = (result.meta or {}).get("mnemograph/error", {}).get("code")
    return code, text


async def test_the_access_matrix(store: Store) -> None:
    a = await make_token(store, "A", "agent:a=w", "team:t=w")
    b = await make_token(store, "B", "agent:b=w", "team:t=w")
    r = await make_token(store, "R", "team:t=r")
    admin = await make_token(store, "Admin", "team:t=admin")
    async with (
        http_server(store, auth=True) as server,
        as_token(server.url, a) as ca,
        as_token(server.url, b) as cb,
        as_token(server.url, r) as cr,
        as_token(server.url, admin) as cadmin,
    ):
        private = await call(
            ca,
            "memory_write",
            {"content": "Agent A keeps the key under the blue mat.", "scopes": ["agent:a"]},
        )
        shared = await call(
            ca, "memory_write", {"content": "Team T ships releases on Thursdays.", "scopes": ["team:t"]}
        )

        # A's memory in agent:a is invisible to B; naming agent:a is an explicit denial.
        found_b = await call(cb, "recall", {"query": "where is the key kept", "k": 20})
        assert private["id"] not in [h["id"] for h in found_b["results"]]
        code, text = await fails(cb, "recall", {"query": "key", "scopes": ["agent:a"]})
        assert code == "scope_denied"
        assert "may not recall in agent:a" in text
        assert "'r' grant" in text
        # Reading, linking or retiring it by id looks exactly like a memory that does not exist.
        for tool, args in (
            ("memory_read", {"id": private["id"]}),
            ("retire", {"id": private["id"]}),
            ("amend", {"id": private["id"], "content": "Poisoned."}),
            ("link_memory", {"id": private["id"], "scope": "agent:b"}),
        ):
            code, text = await fails(cb, tool, args)
            assert code == "not_found", (tool, text)
            assert "agent:a" not in text
        code_missing, _ = await fails(cb, "memory_read", {"id": "feedfacefeedface"})
        assert code_missing == "not_found"

        # A's memory in team:t is found by B and R, with its provenance.
        for client in (cb, cr):
            asked = {"query": "when does team T ship releases", "explain": True}
            hits = (await call(client, "recall", asked))["results"]
            assert short_id(hits[0]["id"]) == shared["id"]  # explain=true gives full ids
            assert hits[0]["explain"]["provenance"]["principal"] == "A"
            assert hits[0]["scopes"] == ["team:t"]

        # R cannot write, amend, retire or link in team:t.
        for tool, args in (
            ("memory_write", {"content": "R was here.", "scopes": ["team:t"]}),
            ("amend", {"id": shared["id"], "content": "Team T ships on Fridays."}),
            ("retire", {"id": shared["id"]}),
            ("link_memory", {"id": shared["id"], "scope": "team:t"}),
            ("create_scope", {"scope": "agent:r", "parent": "team:t"}),
        ):
            code, _ = await fails(cr, tool, args)
            assert code == "scope_denied", tool
        # B cannot write into A's scope, nor share team memories into it.
        code, _ = await fails(cb, "memory_write", {"content": "Poison for A.", "scopes": ["agent:a"]})
        assert code == "scope_denied"
        code, _ = await fails(cb, "link_memory", {"id": shared["id"], "scope": "agent:a"})
        assert code == "scope_denied"

        # list_scopes shows only what the caller may read.
        assert {s["id"] for s in (await call(cb, "list_scopes", {}))["scopes"]} == {"team:t"}
        assert {s["id"] for s in (await call(ca, "list_scopes", {}))["scopes"]} == {"agent:a", "team:t"}

        # Scope ids in arguments cannot escape the grant.
        tricks = [
            "team:t/../agent:a",
            "team:*",
            "agent:*",
            "team:t%2F..",
            "agent:\u0430",  # Cyrillic a
            "agent:a\u200b",  # zero-width space
            "agent:A",
            "team:t,agent:a",
            "agent:a'",
            "agent:" + "a" * 5000,
            " agent:a",
        ]
        for trick in tricks:
            result = await cb.call_tool("recall", {"query": "key under the mat", "scopes": [trick]})
            assert result.is_error, trick
            assert "blue mat" not in result.content[0].text  # type: ignore[union-attr]
        code, _ = await fails(ca, "memory_write", {"content": "Wildcard.", "scopes": ["team:*"]})
        assert code == "invalid_arguments"

        # A cannot purge team:t; Admin can. Admin may also manage the team's scope tree.
        code, _ = await fails(ca, "purge", {"scope": "team:t", "confirm": "team:t"})
        assert code == "scope_denied"
        code, _ = await fails(ca, "create_scope", {"scope": "agent:x", "parent": "team:t"})
        assert code == "scope_denied"
        placed = await call(cadmin, "create_scope", {"scope": "agent:x", "parent": "team:t"})
        assert placed == {"id": "agent:x", "parent": "team:t", "memories": 0}
        inside = await call(
            ca, "memory_write", {"content": "Agent X notes live in the team.", "scopes": ["agent:x"]}
        )
        found = await call(cr, "recall", {"query": "agent X notes", "scopes": ["agent:x"]})
        assert found["results"][0]["id"] == inside["id"]  # a grant covers the scope's subtree
        purged = await call(cadmin, "purge", {"scope": "team:t", "confirm": "team:t"})
        assert purged["memories_deleted"] == 1
        assert (await call(ca, "memory_read", {"id": private["id"]}))["memory"]["status"] == "current"

    events = [json.loads(line) for line in (store.data_dir / "audit.jsonl").read_text().splitlines()]
    ops = [(e["op"], e["principal"]) for e in events]
    assert {("write", "A"), ("purge", "Admin"), ("scope_create", "Admin")} <= set(ops)
    assert ("token_create", "local") in ops
    assert "blue mat" not in (store.data_dir / "audit.jsonl").read_text()


async def test_inheritance_over_http(store: Store) -> None:
    ana = await make_token(store, "ana", "user:ana=admin")
    async with http_server(store, auth=True) as server, as_token(server.url, ana) as client:
        await call(client, "create_scope", {"scope": "project:site", "parent": "user:ana"})
        up = await call(
            client, "memory_write", {"content": "Ana likes short stand-ups.", "scopes": ["user:ana"]}
        )
        down = await call(
            client, "memory_write", {"content": "The site deploys from main.", "scopes": ["project:site"]}
        )
        from_project = await call(
            client, "recall", {"query": "stand-ups", "scopes": ["project:site"], "k": 5}
        )
        assert up["id"] in [h["id"] for h in from_project["results"]]
        from_user = await call(client, "recall", {"query": "site deploys", "scopes": ["user:ana"], "k": 5})
        assert down["id"] not in [h["id"] for h in from_user["results"]]
        below = await call(
            client, "recall", {"query": "site deploys", "scopes": ["user:ana"], "k": 5, "descendants": True}
        )
        assert down["id"] in [h["id"] for h in below["results"]]


async def test_unauthenticated_forged_truncated_and_revoked_tokens_get_401(store: Store) -> None:
    good = await make_token(store, "good", "team:t=w")
    async with http_server(store, auth=True) as server, httpx2.AsyncClient(base_url=server.base) as http:
        bare = await http.post("/mcp", json=INITIALIZE, headers=HEADERS)
        assert bare.status_code == 401
        challenge = bare.headers["www-authenticate"]
        assert challenge.startswith('Bearer error="invalid_token"')
        assert "mnemograph token create" in challenge, "the 401 says how to get a token"
        # Tokens are issued locally: no metadata names an authorization server that does not exist, so an
        # OAuth-capable client does not start a sign-in that cannot succeed.
        assert "resource_metadata" not in challenge
        for path in ("/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"):
            assert (await http.get(path)).status_code == 404
        assert (await http.get("/.well-known/oauth-authorization-server")).status_code == 404

        def auth(value: str) -> dict[str, str]:
            return {**HEADERS, "Authorization": value}

        assert (await http.post("/mcp", json=INITIALIZE, headers=auth(f"Bearer {good}"))).status_code == 200
        for bad in (
            f"Bearer {good[:-1]}",
            f"Bearer {good}x",
            f"Bearer {good[:20]}",
            f"Bearer {good.upper()}",
            f"Bearer mg_{secrets.token_urlsafe(32)}",
            f"Bearer {good[3:]}",
            "Bearer",
            f"Basic {good}",
            f"Bearer {'mg_' + 'A' * 5000}",
        ):
            response = await http.post("/mcp", json=INITIALIZE, headers=auth(bad))
            assert response.status_code == 401, bad[:40]
        # A client's own mnemograph-* headers cannot switch auth off.
        sneaky = await http.post("/mcp", json=INITIALIZE, headers={**HEADERS, "mnemograph-auth": "none"})
        assert sneaky.status_code == 401

        # Tokens made and revoked while the server runs take effect at once.
        late = await make_token(store, "late", "team:t=r")
        assert (await http.post("/mcp", json=INITIALIZE, headers=auth(f"Bearer {late}"))).status_code == 200
        async with as_token(server.url, late) as client:
            assert (await call(client, "recall", {"query": "anything"}))["results"] == []
        assert (await cli(store, "token", "revoke", "late")).returncode == 0
        revoked = await http.post("/mcp", json=INITIALIZE, headers=auth(f"Bearer {late}"))
        assert revoked.status_code == 401
        # A token sent and refused is told apart from none sent: the person fixes the token, not the header.
        assert "not valid here (unknown, revoked or mistyped)" in revoked.json()["error_description"]
        assert "not valid" not in bare.json()["error_description"]
        assert (await http.post("/mcp", json=INITIALIZE, headers=auth(f"Bearer {good}"))).status_code == 200


async def test_no_auth_is_refused_off_loopback(store: Store) -> None:
    server = HttpServer(store, free_port(), "--host", "0.0.0.0", auth=False)
    try:
        await anyio.to_thread.run_sync(lambda: server.process.wait(60))
        assert server.process.returncode == 2
        assert server.process.stderr is not None
        assert b"--no-auth is refused on 0.0.0.0" in server.process.stderr.read()
    finally:
        server.stop()


async def test_token_list_with_no_token_says_how_to_make_one(store: Store) -> None:
    assert (await cli(store, "scope", "create", "project:site")).returncode == 0  # a store, no token yet
    none = await cli(store, "token", "list")  # before: nothing at all, on either stream
    assert (none.returncode, none.stdout) == (0, b"")
    assert b"no tokens yet; create one with `mnemograph token create --name NAME" in none.stderr


async def test_token_cli_with_and_without_a_running_server(store: Store) -> None:
    first = await make_token(store, "ci-bot", "project:site=r", "team:t=w")
    stored = (store.data_dir / "tokens.json").read_text()
    assert first[3:] not in stored  # only a keyed hash is kept
    assert (store.data_dir / "tokens.json").stat().st_mode & 0o077 == 0
    listing = await cli(store, "token", "list")
    assert listing.returncode == 0
    assert listing.stdout.decode().split() == ["ci-bot", "active", "project:site=r", "team:t=w"]
    for bad_args, message in (
        (["--name", "ci-bot", "--grant", "team:t=w"], b"already exists"),
        (["--name", "x", "--grant", "team:*=w"], b"scope name"),
        (["--name", "x", "--grant", "team:t=write"], b"not one of: r, w, admin"),
        (["--name", "x"], b"at least one --grant"),
        (["--name", "bad name", "--grant", "team:t=r"], b"is invalid"),
    ):
        done = await cli(store, "token", "create", *bad_args)
        assert done.returncode == 2
        assert message in done.stderr
        assert done.stdout == b""
    async with http_server(store, auth=True) as server:
        second = await make_token(store, "while-running", "team:t=r")
        async with as_token(server.url, second) as client:
            await client.list_tools()
        revoked = await cli(store, "token", "revoke", "ci-bot")
        assert revoked.returncode == 0
    again = await cli(store, "token", "revoke", "ci-bot")
    assert again.returncode == 2
    assert b"already revoked" in again.stderr
    listing = (await cli(store, "token", "list")).stdout.decode()
    assert "revoked" in listing
    assert first not in listing
    audit = (store.data_dir / "audit.jsonl").read_text()
    assert first[3:] not in audit
    assert second[3:] not in audit
    assert [json.loads(line)["op"] for line in audit.splitlines()] == [
        "token_create",
        "token_create",
        "token_revoke",
    ]
