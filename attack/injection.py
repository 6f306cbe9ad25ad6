# ruff: noqa  (attack harness scripts: throwaway probes, not product code)
"""Injection and odd input: quotes, backslashes, NUL, lone surrogates, Cypher and Tantivy syntax, in every field."""

from __future__ import annotations

import json

import anyio

from attack.harness import as_token, call, cli, fresh_store, http_server, log, token

EVIL = [
    "quote ' and \" and `back` \\ slash",
    "nul \x00 byte inside",
    "'}) MATCH (n) DETACH DELETE n //",
    "$e $ss $now {id: $e}",
    "content:* OR id:* AND scopes:team\\:secret",
    '"unclosed phrase ( [ { ~2 ^10 field:[a TO z]',
    "\u202e RTL override \ufeff bom \u200b zwsp",
    "emoji 👩‍👩‍👧‍👦 and combining e\u0301",
]


async def raw_surrogates(url: str, tok: str) -> None:
    """Lone surrogates cannot be sent by the SDK (it encodes UTF-8); raw JSON escapes can."""
    import httpx2

    h = {
        "Authorization": f"Bearer {tok}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2025-06-18",
    }
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }
    async with httpx2.AsyncClient(timeout=60) as http:
        r = await http.post(url, json=init, headers=h)
        log("raw init", r.status_code)
        cases = {
            "content": '{"content": "lone \\ud800 surrogate", "scopes": ["team:i"]}',
            "meta": '{"content": "meta surrogate", "scopes": ["team:i"], "metadata": {"\\udfff": "\\ud800"}}',
            "entity": '{"content": "entity surrogate", "scopes": ["team:i"], "entities": [{"name": "X\\ud800"}]}',
        }
        for name, args in cases.items():
            body = (
                '{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "memory_write", "arguments": '
                + args
                + "}}"
            )
            r = await http.post(url, content=body.encode(), headers=h)
            log("raw surrogate", name, r.status_code, r.text[:400])
        for tool, args in (
            ("recall", '{"query": "\\ud800"}'),
            (
                "conversation_write",
                '{"conversation": "\\ud800", "scopes": ["team:i"], "messages": [{"role": "user", "content": "\\ud800"}]}',
            ),
        ):
            body = (
                '{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "'
                + tool
                + '", "arguments": '
                + args
                + "}}"
            )
            r = await http.post(url, content=body.encode(), headers=h)
            log("raw surrogate", tool, r.status_code, r.text[:400])


async def main() -> None:
    async with fresh_store() as store:
        t = token(store, "t", "team:i=admin", "team:secret=r")
        async with http_server(store, auth=True) as srv, as_token(srv.url, t) as c:
            for i, e in enumerate(EVIL):
                ok, r = await call(
                    c,
                    "memory_write",
                    {
                        "content": f"Item {i}: {e}",
                        "scopes": ["team:i"],
                        "metadata": {e: e, "n": [e]},
                        "entities": [{"name": f"Ent {e}"[:200], "type": e[:30], "aliases": [e[:50]]}],
                        "relations": [{"subject": f"Ent {e}"[:200], "predicate": "rel", "object": e[:60]}],
                    },
                )
                log("write", i, ok, json.dumps(r)[:300])
                ok, r = await call(c, "recall", {"query": e, "scopes": ["team:i"], "explain": True})
                log("recall", i, ok, json.dumps(r)[:300] if ok else r)
                ok, r = await call(
                    c,
                    "conversation_write",
                    {
                        "conversation": e,
                        "scopes": ["team:i"],
                        "messages": [{"role": "user", "content": e, "speaker": e, "id": e}],
                    },
                )
                log("conv", i, ok, json.dumps(r)[:300] if ok else r)
                ok, r = await call(c, "create_scope", {"scope": f"team:{e}"})
                log("scope", i, ok, str(r)[:200])
            # Tantivy scope filter bypass: recall naming no scopes with field syntax
            ok, r = await call(c, "recall", {"query": "scopes:team:secret OR *", "k": 100})
            log("tantivy all", ok, len(r["results"]) if ok else r)
            # deep metadata
            deep: object = "x"
            for _ in range(9):
                deep = [deep]
            ok, r = await call(
                c,
                "memory_write",
                {"content": "deep list meta", "scopes": ["team:i"], "metadata": {"d": deep}},
            )
            log("deep9 list", ok, str(r)[:200])
            deep = "x"
            for _ in range(7):
                deep = {"a": deep}
            ok, r = await call(
                c, "memory_write", {"content": "deep dict meta 7", "scopes": ["team:i"], "metadata": deep}
            )
            log("deep7 dict", ok, str(r)[:200])
            big = {"k": "\u00e9" * 9000}
            ok, r = await call(
                c,
                "memory_write",
                {"content": "meta with 9000 e-acute", "scopes": ["team:i"], "metadata": big},
            )
            log("meta 9000 e-acute (18000 utf8 bytes)", ok, str(r)[:200])
            big = {"k": "\x01" * 3000}
            ok, r = await call(
                c,
                "memory_write",
                {"content": "meta with 3000 control chars", "scopes": ["team:i"], "metadata": big},
            )
            log("meta control chars (18000 escaped bytes)", ok, str(r)[:200])
            for bad_time in (
                "2024-13-01",
                "9999-12-31T23:59:59Z",
                "0001-01-01",
                "2024-05-01T10:00:00+25:00",
                "NaN",
                "1e309",
            ):
                ok, r = await call(
                    c,
                    "memory_write",
                    {"content": f"time {bad_time}", "scopes": ["team:i"], "event_time": bad_time},
                )
                log("time", bad_time, ok, str(r)[:200])
                ok, r = await call(
                    c, "recall", {"query": "time", "scopes": ["team:i"], "as_of": bad_time, "now": bad_time}
                )
                log("recall time", bad_time, ok, str(r)[:200])
            ok, r = await call(
                c,
                "recall",
                {"query": "x", "scopes": ["team:i"], "since": "9999-12-31T23:59:59Z", "until": "0001-01-01"},
            )
            log("since>until", ok, str(r)[:200])
            await raw_surrogates(srv.url, t)
        v = cli(store, "verify", check=False)
        log("verify", v.returncode, v.stdout[-500:], v.stderr[-500:])
        log(
            "owner.log tail",
            (store.paths.root / "owner.log").read_text()[-3000:]
            if (store.paths.root / "owner.log").exists()
            else None,
        )


if __name__ == "__main__":
    anyio.run(main)
