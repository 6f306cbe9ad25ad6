# ruff: noqa  (attack harness scripts: throwaway probes, not product code)
"""SIGKILL of the owner mid-write, mid-erase and mid-purge; then restart: acknowledged writes present, erased
data absent (bytes), store opens and verifies."""

from __future__ import annotations

import os
import signal

import anyio

from attack.harness import as_token, call, cli, fresh_store, http_server, log, scan, token


async def main() -> None:
    async with fresh_store() as store:
        t = token(store, "t", "team:c=admin", "team:p=admin")
        acked: list[str] = []
        async with http_server(store, auth=True, env={"MNEMOGRAPH_DIGESTS": "off"}) as srv:
            async with as_token(srv.url, t) as c:
                await call(c, "memory_write", {"content": "warm", "scopes": ["team:c"]})
                for i in range(40):
                    await call(
                        c,
                        "memory_write",
                        {"content": f"Purge me {i}: Zebulon-{i} hid the map.", "scopes": ["team:p"]},
                    )
                ok, victim = await call(
                    c,
                    "memory_write",
                    {"content": "Erase me: Quillon Vantablack owes 7733 dollars.", "scopes": ["team:c"]},
                )

                async def writer() -> None:
                    for i in range(200):
                        try:
                            ok, r = await call(
                                c,
                                "memory_write",
                                {"content": f"Acked write {i} about kites.", "scopes": ["team:c"]},
                            )
                            if ok:
                                acked.append(r["id"])
                        except Exception as e:  # outcome unknown: not acknowledged
                            log("write", i, "unknown:", type(e).__name__)

                async def killer() -> None:
                    for _ in range(3):
                        await anyio.sleep(1.5)
                        pid = store.owner_pid()
                        if pid:
                            os.kill(pid, signal.SIGKILL)
                            log("killed owner", pid, "acked so far", len(acked))

                async with anyio.create_task_group() as tg:
                    tg.start_soon(writer)
                    tg.start_soon(killer)
            # mid-erase and mid-purge kills
            for op, args in (
                ("erase", {"id": victim["id"], "confirm": victim["id"]}),
                ("purge", {"scope": "team:p", "confirm": "team:p"}),
            ):
                async with as_token(srv.url, t) as c:

                    async def do() -> None:
                        try:
                            log(op, await call(c, op, args))
                        except Exception as e:
                            log(op, "interrupted:", type(e).__name__)

                    async def kill_soon() -> None:
                        await anyio.sleep(0.4)
                        pid = store.owner_pid()
                        if pid:
                            os.kill(pid, signal.SIGKILL)
                            log("killed owner mid", op, pid)

                    async with anyio.create_task_group() as tg:
                        tg.start_soon(do)
                        tg.start_soon(kill_soon)
            async with as_token(srv.url, t) as c:
                missing = []
                for mid in acked:
                    ok, r = await call(c, "memory_read", {"id": mid})
                    if not ok:
                        missing.append(mid)
                log("acked", len(acked), "missing after kills", len(missing))
                ok, r = await call(c, "memory_read", {"id": victim["id"]})
                log("victim after erase+kill", ok, str(r)[:150])
                ok, r = await call(
                    c, "recall", {"query": "Zebulon map", "scopes": ["team:c"], "descendants": True}
                )
                log("purge scope recall", ok, str(r)[:200])
                ok, r = await call(c, "list_scopes", {})
                log("scopes", r)
        store.stop_owner()
        v = cli(store, "verify", check=False)
        log("verify", v.returncode, v.stdout.strip()[-300:])
        hits = scan(
            store.data_dir, {"victim": b"Quillon", "victim-id": victim["id"].encode(), "purged": b"Zebulon"}
        )
        log("byte hits after restart:", hits)


if __name__ == "__main__":
    anyio.run(main)
