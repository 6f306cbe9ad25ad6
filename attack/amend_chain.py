# ruff: noqa  (attack harness scripts: throwaway probes, not product code)
"""A long amend chain of large, near-identical versions: owner RSS and time per amend, then memory_read."""

from __future__ import annotations

import sys
import time

import anyio

from attack.harness import as_token, call, fresh_store, http_server, log, token
from attack.resources import hwm, rss

N = int(sys.argv[1]) if len(sys.argv) > 1 else 30
SIZE = int(sys.argv[2]) if len(sys.argv) > 2 else 30000
OP = sys.argv[3] if len(sys.argv) > 3 else "memory_read"


async def main() -> None:
    async with fresh_store() as store:
        t = token(store, "t", "team:r=admin")
        async with (
            http_server(store, auth=True, env={"MNEMOGRAPH_DIGESTS": "off"}) as srv,
            as_token(srv.url, t) as c,
        ):
            ok, w = await call(
                c, "memory_write", {"content": "Version 0 " + "x" * SIZE, "scopes": ["team:r"]}
            )
            pid = store.owner_pid()
            assert pid
            mid = w["id"]
            for i in range(1, N + 1):
                t0 = time.perf_counter()
                ok, a = await call(c, "amend", {"id": mid, "content": f"Version {i} " + "y" * SIZE})
                if not ok:
                    log("amend failed", a)
                    return
                mid = a["id"]
                log(f"amend {i}: {time.perf_counter() - t0:.2f}s rss {rss(pid):.0f} hwm {hwm(pid):.0f}")
            t0 = time.perf_counter()
            args = {"id": mid, "confirm": mid} if OP == "erase" else {"id": mid}
            try:
                ok, r = await call(c, OP, args)
            except Exception as e:  # the owner died under us
                log(f"{OP}: {time.perf_counter() - t0:.2f}s FAILED {type(e).__name__}: {e}")
                return
            log(
                f"{OP}: {time.perf_counter() - t0:.2f}s ok={ok} {str(r)[:200]} rss {rss(pid):.0f} hwm {hwm(pid):.0f}"
            )


if __name__ == "__main__":
    anyio.run(main)
