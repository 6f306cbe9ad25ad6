# ruff: noqa  (attack harness scripts: throwaway probes, not product code)
"""Cross-scope oracles: a token reading team:att/team:shared probes what the victim keeps in team:secret."""

from __future__ import annotations

import anyio

from attack.harness import as_token, call, dump, fresh_store, http_server, log, token

SECRETS = ["Lisbon", "Zorblax", "4417", "Quetzal", "Marrakesh", "Vortigern", "pineapple"]


def leaks(label: str, obj: object) -> None:
    s = dump(obj)
    found = [w for w in SECRETS if w in s]
    log(f"[{label}] {'LEAK ' + str(found) if found else 'clean'} :: {s[:1500]}")


async def main() -> None:
    async with fresh_store() as store:
        vic = token(store, "victim", "team:secret=admin")
        att = token(store, "attacker", "team:att=admin", "team:shared=w")
        both = token(store, "bridge", "team:secret=admin", "team:shared=admin")
        env = {"MNEMOGRAPH_DIGEST_QUIET": "1"}
        async with (
            http_server(store, auth=True, env=env) as srv,
            as_token(srv.url, vic) as v,
            as_token(srv.url, att) as a,
            as_token(srv.url, both) as b,
        ):
            S = ["team:secret"]
            ok, w1 = await call(v, "memory_write", {"content": "Ana Lima lives in Lisbon.", "scopes": S})
            log("w1", w1)
            ok, _w2 = await call(
                v, "memory_write", {"content": "Ana Lima works at Zorblax Bank.", "scopes": S}
            )
            ok, w3 = await call(
                v,
                "memory_write",
                {
                    "content": "Project Quetzal ships from Marrakesh.",
                    "scopes": S,
                    "entities": [{"name": "Project Quetzal", "type": "codename", "aliases": ["PQX"]}],
                    "relations": [
                        {"subject": "Project Quetzal", "predicate": "ships_from", "object": "Marrakesh"}
                    ],
                },
            )
            log("w3", w3)
            ok, w4 = await call(
                v, "memory_write", {"content": "The vault code is 4417, Vortigern knows it.", "scopes": S}
            )
            ok, am = await call(
                b, "amend", {"id": w4["id"], "content": "The vault code was rotated last week."}
            )
            log("amend", ok, am)
            ok, lk = await call(b, "link_memory", {"id": am["id"], "scope": "team:shared"})
            log("link", ok, lk)

            # attacker side
            await call(
                a, "memory_write", {"content": "Ana Lima is my colleague and friend.", "scopes": ["team:att"]}
            )
            ok, r = await call(
                a, "memory_write", {"content": "Ana Lima moved to Porto.", "scopes": ["team:att"]}
            )
            leaks("receipt moved", r)
            ok, r = await call(a, "memory_write", {"content": "PQX is delayed.", "scopes": ["team:att"]})
            leaks("receipt alias PQX", r)
            ok, r = await call(
                a, "memory_write", {"content": "Project Quetzal is delayed again.", "scopes": ["team:att"]}
            )
            leaks("receipt name", r)
            for q in (
                "where does Ana Lima live",
                "where does Ana Lima work",
                "Project Quetzal ships from",
                "PQX",
            ):
                ok, r = await call(a, "recall", {"query": q, "explain": True, "k": 20})
                leaks(f"recall {q}", r)
            ok, r = await call(
                a,
                "recall",
                {"query": "vault code 4417 Vortigern", "scopes": ["team:shared"], "explain": True},
            )
            leaks("recall via", r)
            ok, r = await call(
                a,
                "recall",
                {
                    "query": "vault code 4417 Vortigern",
                    "scopes": ["team:shared"],
                    "explain": True,
                    "include_history": True,
                },
            )
            leaks("recall via hist", r)
            ok, r = await call(a, "memory_read", {"id": am["id"]})
            leaks("memory_read linked", r)
            for fid in (w1["id"], w1["id"][:8], w4["id"]):
                for tool, args in (
                    ("memory_read", {"id": fid}),
                    ("link_memory", {"id": fid, "scope": "team:att"}),
                    ("amend", {"id": fid, "content": "x y z"}),
                    ("retire", {"id": fid}),
                    ("erase", {"id": fid, "confirm": fid}),
                    ("unlink_memory", {"id": fid, "scope": "team:secret"}),
                ):
                    ok, r = await call(a, tool, args)
                    leaks(f"{tool} {fid[:10]}", r)
            ok, r = await call(a, "list_scopes", {})
            leaks("list_scopes", r)
            ok, r = await call(a, "recall", {"query": "Lisbon", "descendants": True, "explain": True})
            leaks("recall descendants", r)
            # conversations sharing a conversation id
            ok, r = await call(
                v,
                "conversation_write",
                {
                    "conversation": "conv-1",
                    "scopes": S,
                    "messages": [
                        {
                            "role": "user",
                            "content": "I love pineapple pizza from Marrakesh.",
                            "time": "2024-05-01T10:00:00Z",
                            "speaker": "Ana Lima",
                        },
                        {
                            "role": "assistant",
                            "content": "Noted: pineapple pizza.",
                            "time": "2024-05-01T10:01:00Z",
                        },
                    ],
                },
            )
            log("vic conv", ok, r)
            ok, r = await call(
                a,
                "conversation_write",
                {
                    "conversation": "conv-1",
                    "scopes": ["team:att"],
                    "messages": [
                        {"role": "user", "content": "What pizza do I like?", "time": "2024-05-02T10:00:00Z"}
                    ],
                },
            )
            leaks("att conv", r)
            await anyio.sleep(8)
            ok, r = await call(a, "recall", {"query": "pizza", "kinds": ["summary"], "explain": True})
            leaks("att digest recall", r)
            ok, r = await call(a, "recall", {"query": "pizza", "group_by": "conversation", "explain": True})
            leaks("att group_by", r)
            ok, r = await call(v, "recall", {"query": "pizza", "kinds": ["summary"], "explain": True})
            log("vic digest", r)
            # the attacker creates/moves scopes
            for tool, args in (
                ("create_scope", {"scope": "team:secret", "parent": "team:att"}),
                ("create_scope", {"scope": "project:x", "parent": "team:secret"}),
                ("move_scope", {"scope": "team:shared", "parent": "team:att"}),
                ("move_scope", {"scope": "team:att", "parent": "team:shared"}),
                ("purge", {"scope": "team:shared", "confirm": "team:shared"}),
            ):
                ok, r = await call(a, tool, args)
                leaks(f"{tool} {args}", (ok, r))


if __name__ == "__main__":
    anyio.run(main)
