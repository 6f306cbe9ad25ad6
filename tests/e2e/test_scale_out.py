"""Scale-out mode end to end: one FalkorDB server, two Mnemograph HTTP nodes (``serve --canonical falkordb://``),
each with its own data directory; many SDK clients write through both while one node is SIGKILLed (its front
and its owner) and restarted. Every acknowledged write must then be recallable from both nodes, and ``verify``
must be clean on each."""

from __future__ import annotations

import json
import os
import signal

import anyio
import pytest
from mcp import Client

from storage.adapters.falkordb import local as falkordb_local
from tests.e2e.conftest import MNEMOGRAPH, HttpServer, Store, await_for, call, free_port

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.slow]

SCOPE = "team:fleet"
CLIENTS_PER_NODE = 4
WRITES_PER_CLIENT = 10
KILL_AFTER = 25  # acknowledged writes before node b dies


class Node:
    """One Mnemograph node: an HTTP front (and the owner it starts) on a fixed port and data directory."""

    def __init__(self, store: Store, url: str) -> None:
        self.store, self.canonical, self.port = store, url, free_port()
        self.server = self._start()

    def _start(self) -> HttpServer:
        return HttpServer(self.store, self.port, "--canonical", self.canonical)

    @property
    def url(self) -> str:
        return self.server.url

    async def ready(self) -> None:
        await await_for(self.server.healthy, within=90, what=f"the node on port {self.port}")

    async def crash_and_restart(self) -> None:
        """SIGKILL the node's owner (engine, projections) and its HTTP front, then start it again."""
        if self.store.owner_pid() is not None:
            self.store.kill_owner(signal.SIGKILL)
        self.server.process.send_signal(signal.SIGKILL)
        self.server.process.wait()
        if self.server.process.stderr:
            self.server.process.stderr.close()
        self.server = self._start()
        await self.ready()

    def stop(self) -> None:
        self.server.stop()


async def _client(node: Node, name: str, acked: dict[str, str], errors: list[str]) -> None:
    """Writes its notes through ``node``; a call that fails (the node died) is retried on a new session, so
    each note ends acknowledged once (``added``, or ``duplicate`` when the lost attempt had committed)."""
    pending = [
        f"Fleet log {name}-{n}: truck {name} delivered {n * 11 + 3} parcels."
        for n in range(WRITES_PER_CLIENT)
    ]
    with anyio.fail_after(300):
        while pending:
            try:
                async with Client(node.url) as client:
                    while pending:
                        receipt = await call(
                            client, "memory_write", {"content": pending[0], "scopes": [SCOPE]}
                        )
                        assert receipt["status"] in ("added", "duplicate")
                        acked[receipt["id"]] = pending.pop(0)
            except Exception as exc:  # the node was killed under this session: reconnect once it is back
                errors.append(f"{name}: {type(exc).__name__}")
                await anyio.sleep(0.05)  # back off before the next connection attempt (not a wait for state)


async def _verify(node: Node) -> dict[str, object]:
    env = {**os.environ, **node.store.env()}
    done = await anyio.run_process(
        [
            MNEMOGRAPH,
            "verify",
            "--json",
            "--data-dir",
            str(node.store.data_dir),
            "--canonical",
            node.canonical,
        ],
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    report: dict[str, object] = json.loads(done.stdout)
    return report


async def test_two_nodes_share_one_falkordb_and_survive_a_node_crash_mid_load(
    falkordb: falkordb_local.LocalServer, stores: tuple[Store, Store]
) -> None:
    url = falkordb.url("fleet")
    a, b = Node(stores[0], url), Node(stores[1], url)
    acked: dict[str, str] = {}
    errors: list[str] = []
    try:
        await a.ready()
        await b.ready()
        async with anyio.create_task_group() as tg:
            for n in range(CLIENTS_PER_NODE):
                tg.start_soon(_client, a, f"a{n}", acked, errors)
                tg.start_soon(_client, b, f"b{n}", acked, errors)

            async def crash() -> None:
                await await_for(lambda: len(acked) >= KILL_AFTER, within=240, what="writes before the crash")
                await b.crash_and_restart()

            tg.start_soon(crash)

        total = 2 * CLIENTS_PER_NODE * WRITES_PER_CLIENT
        assert len(acked) == total
        assert any(e.startswith("b") for e in errors), "the crash must have hit node b's clients mid-load"
        for node in (a, b):
            async with Client(node.url) as client:
                for memory_id, content in acked.items():
                    assert (await call(client, "memory_read", {"id": memory_id}))["memory"][
                        "content"
                    ] == content
                    found = await call(client, "recall", {"query": content, "scopes": [SCOPE], "k": 3})
                    assert memory_id in [h["id"] for h in found["results"]], (node.port, content)
                scopes = {s["id"]: s["memories"] for s in (await call(client, "list_scopes", {}))["scopes"]}
                assert scopes[SCOPE] == total
            report = await _verify(node)
            assert report["ok"] is True, report
            assert report["counts"] == {"falkordb": total, "lancedb": total, "tantivy": total}
    finally:
        a.stop()
        b.stop()
