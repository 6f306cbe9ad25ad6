# ruff: noqa  (attack harness scripts: throwaway probes, not product code)
"""Alias oracle: an alias known only from another team's memory resolves, in the attacker's recall, to an entity
the attacker's own memories mention, revealing which of its candidate names the foreign alias stands for."""

from __future__ import annotations

import json

import anyio

from attack.harness import as_token, call, fresh_store, http_server, log, token


async def main() -> None:
    async with fresh_store() as store:
        vic = token(store, "victim", "team:secret=w")
        att = token(store, "attacker", "team:att=w")
        async with (
            http_server(store, auth=True) as srv,
            as_token(srv.url, vic) as v,
            as_token(srv.url, att) as a,
        ):
            ok, r = await call(
                v,
                "memory_write",
                {
                    "content": "Operation Nightjar launches in March.",
                    "scopes": ["team:secret"],
                    "entities": [{"name": "Operation Nightjar", "type": "zzcodename", "aliases": ["ONJ7"]}],
                },
            )
            assert ok, r
            candidates = ["Operation Falcon", "Operation Nightjar", "Operation Heron", "Operation Osprey"]
            ids = {}
            for name in candidates:
                ok, w = await call(
                    a, "memory_write", {"content": f"{name} is on our watch list.", "scopes": ["team:att"]}
                )
                ids[w["id"]] = name
                ok, mr = await call(a, "memory_read", {"id": w["id"]})
                log("attacker's own read", name, json.dumps(mr["memory"]["entities"]))
            for q in ("ONJ7", "what is ONJ7", "ONJ7 launch date", "zzcodename"):
                ok, r = await call(a, "recall", {"query": q, "explain": True, "k": 10})
                log(q, [(ids.get(x["id"]), x["explain"]["lanes"]) for x in r["results"]])
            # control: an alias nobody defined
            ok, r = await call(a, "recall", {"query": "QQZ9", "explain": True, "k": 10})
            log("control QQZ9", [(ids.get(x["id"]), x["explain"]["lanes"]) for x in r["results"]])


if __name__ == "__main__":
    anyio.run(main)
