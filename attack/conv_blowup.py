# ruff: noqa  (attack harness scripts: throwaway probes, not product code)
"""conversation_write of messages full of would-be names: owner RSS and time per call, growing message counts.
A watchdog SIGKILLs the owner past 4 GiB so the shared machine survives."""

from __future__ import annotations

import os
import random
import signal
import sys
import threading
import time

import anyio

from attack.harness import as_token, call, fresh_store, http_server, log, token
from attack.resources import hwm, names_text, rss

KIND = sys.argv[1] if len(sys.argv) > 1 else "names"
COUNTS = [int(x) for x in (sys.argv[2] if len(sys.argv) > 2 else "1,2,4,8").split(",")]


def text(n: int, rnd: random.Random) -> str:
    if KIND == "names":
        return names_text(n, rnd)
    if KIND == "prose":
        words = ["the", "garden", "was", "quiet", "and", "we", "walked", "slowly", "home", "after", "dinner"]
        return " ".join(rnd.choice(words) for _ in range(n // 5))[:n]
    return "A" + "b" * (n - 1)


async def main() -> None:
    rnd = random.Random(8)
    async with fresh_store() as store:
        t = token(store, "t", "team:r=admin")
        async with (
            http_server(store, auth=True, env={"MNEMOGRAPH_DIGESTS": "off"}) as srv,
            as_token(srv.url, t) as c,
        ):
            await call(c, "memory_write", {"content": "warm up", "scopes": ["team:r"]})
            pid = store.owner_pid()
            assert pid

            def watchdog() -> None:
                while True:
                    try:
                        if rss(pid) > 4096:
                            log("WATCHDOG: owner past 4 GiB, SIGKILL")
                            os.kill(pid, signal.SIGKILL)
                            return
                    except (FileNotFoundError, ProcessLookupError):
                        return
                    time.sleep(0.2)

            threading.Thread(target=watchdog, daemon=True).start()
            log(f"{KIND}: start rss {rss(pid):.0f}")
            t0 = time.perf_counter()
            ok, r = await call(c, "memory_write", {"content": text(32000, rnd), "scopes": ["team:r"]})
            log(
                f"memory_write 1x32000 {KIND}: {time.perf_counter() - t0:.1f}s rss {rss(pid):.0f} hwm {hwm(pid):.0f} ok={ok}"
            )
            for n in COUNTS:
                msgs = [
                    {
                        "role": "user",
                        "content": text(32000, rnd),
                        "time": f"2024-05-01T10:{i // 60:02d}:{i % 60:02d}Z",
                    }
                    for i in range(n)
                ]
                t0 = time.perf_counter()
                ok, _r = await call(
                    c, "conversation_write", {"conversation": f"c{n}", "scopes": ["team:r"], "messages": msgs}
                )
                log(
                    f"conversation_write {n}x32000 {KIND}: {time.perf_counter() - t0:.1f}s rss {rss(pid):.0f} hwm {hwm(pid):.0f} ok={ok}"
                )


if __name__ == "__main__":
    anyio.run(main)
