# ruff: noqa  (attack harness scripts: throwaway probes, not product code)
"""Resource exhaustion by a token holder: huge conversation_write, name-like floods, huge words, many writes,
long version chains; owner RSS (from /proc) and wall time before/after each."""

from __future__ import annotations

import json
import random
import string
import time

import anyio

from attack.harness import as_token, call, fresh_store, http_server, log, token


def rss(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
    return -1


def hwm(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM"):
            return int(line.split()[1]) / 1024
    return -1


def names_text(n: int, rnd: random.Random) -> str:
    out = []
    while sum(len(w) + 1 for w in out) < n:
        out.append(
            rnd.choice(string.ascii_uppercase)
            + "".join(rnd.choices(string.ascii_lowercase, k=rnd.randint(5, 12)))
        )
    return " ".join(out)[:n]


async def main() -> None:
    rnd = random.Random(8)
    async with fresh_store() as store:
        t = token(store, "t", "team:r=admin")
        async with (
            http_server(store, auth=True, env={"MNEMOGRAPH_DIGEST_QUIET": "1"}) as srv,
            as_token(srv.url, t) as c,
        ):
            await call(c, "memory_write", {"content": "warm up", "scopes": ["team:r"]})
            pid = store.owner_pid()
            assert pid
            log(f"start rss {rss(pid):.0f} MiB hwm {hwm(pid):.0f}")

            async def step(label: str, tool: str, args: dict) -> None:
                r0, t0 = rss(pid), time.perf_counter()
                ok, r = await call(c, tool, args)
                dt = time.perf_counter() - t0
                log(
                    f"{label}: ok={ok} {dt:.1f}s rss {r0:.0f}->{rss(pid):.0f} MiB hwm {hwm(pid):.0f} :: {json.dumps(r)[:200]}"
                )

            # 1. conversation_write near the 4 MiB body: 120 messages x 32000 chars of would-be names
            msgs = [
                {
                    "role": "user",
                    "content": names_text(32000, rnd),
                    "time": f"2024-05-01T10:{i // 60:02d}:{i % 60:02d}Z",
                }
                for i in range(120)
            ]
            await step(
                "conv 120x32000 names",
                "conversation_write",
                {"conversation": "big", "scopes": ["team:r"], "messages": msgs},
            )
            await anyio.sleep(5)
            log(f"after digest rss {rss(pid):.0f} hwm {hwm(pid):.0f}")
            # 2. single huge words
            await step(
                "one 32000-char word", "memory_write", {"content": "A" + "b" * 31999, "scopes": ["team:r"]}
            )
            await step("recall 4000-char word", "recall", {"query": "Q" + "z" * 3999, "scopes": ["team:r"]})
            q = " ".join("".join(rnd.choices(string.ascii_lowercase, k=24)) for _ in range(160))[:4000]
            await step(
                "recall 160 fuzzy words",
                "recall",
                {"query": q, "scopes": ["team:r"], "k": 100, "explain": True},
            )
            # 3. 64 entities x 16 aliases x 200 chars
            ents = [
                {
                    "name": names_text(200, rnd),
                    "type": "t",
                    "aliases": [names_text(200, rnd) for _ in range(16)],
                }
                for _ in range(64)
            ]
            rels = [
                {"subject": ents[i]["name"], "predicate": "p", "object": ents[(i + 1) % 64]["name"]}
                for i in range(64)
            ]
            await step(
                "64 ents x 16 aliases",
                "memory_write",
                {"content": "entity flood", "scopes": ["team:r"], "entities": ents, "relations": rels},
            )
            await step(
                "recall all entity names",
                "recall",
                {"query": " ".join(e["name"] for e in ents)[:4000], "scopes": ["team:r"], "explain": True},
            )
            # 4. a long version chain, then memory_read
            ok, w = await call(
                c, "memory_write", {"content": "Version 0 " + "x" * 30000, "scopes": ["team:r"]}
            )
            mid = w["id"]
            t0 = time.perf_counter()
            for i in range(1, 61):
                _ok, a = await call(c, "amend", {"id": mid, "content": f"Version {i} " + "y" * 30000})
                mid = a["id"]
            log(f"60 amends {time.perf_counter() - t0:.1f}s")
            await step("memory_read 61-version chain", "memory_read", {"id": mid})
            await step(
                "recall history",
                "recall",
                {
                    "query": "Version",
                    "scopes": ["team:r"],
                    "include_history": True,
                    "k": 100,
                    "token_budget": 100000,
                },
            )
            # 5. many small writes
            r0 = rss(pid)
            t0 = time.perf_counter()
            for i in range(600):
                await call(
                    c,
                    "memory_write",
                    {"content": f"small write {i} {names_text(60, rnd)}", "scopes": ["team:r"]},
                )
            log(
                f"600 small writes {time.perf_counter() - t0:.1f}s rss {r0:.0f}->{rss(pid):.0f} hwm {hwm(pid):.0f}"
            )


if __name__ == "__main__":
    anyio.run(main)
