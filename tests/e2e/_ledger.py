"""A ledger of acknowledged operations, kept by the load tests (soak and concurrency), and the check that the
store holds exactly what it acknowledged.

The operation mix is a table (``OPS``): name, weight, and the coroutine that runs it for one worker. Sharing
goes both ways the tools offer it: ``link_memory`` into a shared scope, and writing identical content into
another scope (status ``linked``).
"""

from __future__ import annotations

import json
import random
import subprocess
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from mcp import Client

from storage import content_id
from tests.e2e.conftest import MNEMOGRAPH, Store
from tools._wire import short_id

SHARED = "team:shared"
LINKED = "team:linked"


class CallFailed(Exception):
    """A call that was not acknowledged (an error result or a transport error): its outcome is unknown."""


@dataclass
class Ledger:
    sent: set[str] = field(default_factory=set)  # every content ever sent
    contents: dict[str, str] = field(default_factory=dict)  # acknowledged memories: id -> exact content
    supersedes: dict[str, str] = field(default_factory=dict)  # acknowledged amends: new id -> old id
    retired: set[str] = field(default_factory=set)
    linked: dict[str, set[str]] = field(default_factory=dict)  # id -> scopes it must (at least) be in
    uncertain: set[str] = field(default_factory=set)  # ids touched by an unacknowledged amend or retire
    ops: Counter[str] = field(default_factory=Counter)  # acknowledged operations by name
    failures: list[str] = field(default_factory=list)

    @property
    def acknowledged(self) -> int:
        return sum(self.ops.values())


@dataclass
class Worker:
    name: str
    client: Client
    ledger: Ledger
    rng: random.Random
    live: list[str] = field(default_factory=list)  # this worker's current memories whose state is certain
    n: int = 0

    @property
    def scope(self) -> str:
        return f"user:{self.name}"

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        try:
            result = await self.client.call_tool(tool, arguments)
        except Exception as exc:  # the owner died while handling it: a JSON-RPC error, or a broken stream
            raise CallFailed(f"{tool}: {type(exc).__name__}: {str(exc)[:200]}") from exc
        if result.is_error:
            raise CallFailed(f"{tool}: {result.content[0].text[:300]}")  # type: ignore[union-attr]
        assert isinstance(result.structured_content, dict)
        return result.structured_content


async def op_write(w: Worker) -> None:
    w.n += 1
    content = f"{w.name} note {w.n}: bin {w.rng.randrange(10**9)} holds {w.n * 3} red widgets."
    w.ledger.sent.add(content)
    out = await w.call("memory_write", {"content": content, "scopes": [w.scope]})
    assert out["status"] == "added", out
    w.ledger.contents[out["id"]] = content
    w.live.append(out["id"])


async def op_amend(w: Worker) -> None:
    if not w.live:
        return await op_write(w)
    old = w.rng.choice(w.live)
    w.n += 1
    content = f"{w.name} amended {old[:8]} at step {w.n}: bin {w.rng.randrange(10**9)}."
    w.ledger.sent.add(content)
    w.live.remove(old)
    try:
        out = await w.call("amend", {"id": old, "content": content, "reason": "soak"})
    except CallFailed:
        w.ledger.uncertain.add(old)
        raise
    assert out["supersedes"] == old
    w.ledger.contents[out["id"]] = content
    w.ledger.supersedes[out["id"]] = old
    w.ledger.linked[out["id"]] = set(w.ledger.linked.get(old, set()))
    w.live.append(out["id"])
    return None


async def op_retire(w: Worker) -> None:
    if len(w.live) < 3:
        return await op_write(w)
    mid = w.rng.choice(w.live)
    w.live.remove(mid)
    try:
        await w.call("retire", {"id": mid, "reason": "soak"})
    except CallFailed:
        w.ledger.uncertain.add(mid)
        raise
    w.ledger.retired.add(mid)
    return None


async def op_recall(w: Worker) -> None:
    if not w.live:
        return await op_write(w)
    mid = w.rng.choice(w.live)
    words = " ".join(w.ledger.contents[mid].split()[3:6])
    out = await w.call("recall", {"query": words, "scopes": [w.scope], "k": 5})
    assert out["results"], f"recall found nothing for {words!r}"
    return None


async def op_link(w: Worker) -> None:
    if not w.live:
        return await op_write(w)
    mid = w.rng.choice(w.live)
    out = await w.call("memory_write", {"content": w.ledger.contents[mid], "scopes": [SHARED]})
    assert out["id"] == mid
    assert out["status"] in ("linked", "duplicate"), out  # duplicate: an earlier unacknowledged link landed
    w.ledger.linked.setdefault(mid, set()).add(SHARED)
    return None


async def op_link_tool(w: Worker) -> None:
    if not w.live:
        return await op_write(w)
    mid = w.rng.choice(w.live)
    out = await w.call("link_memory", {"id": mid, "scope": LINKED})
    assert out["id"] == mid
    assert LINKED in out["scopes"], out
    w.ledger.linked.setdefault(mid, set()).add(LINKED)
    return None


Op = Callable[[Worker], Awaitable[None]]
OPS: list[tuple[str, float, Op]] = [
    ("write", 0.35, op_write),
    ("amend", 0.15, op_amend),
    ("retire", 0.10, op_retire),
    ("recall", 0.30, op_recall),
    ("link", 0.05, op_link),
    ("link_memory", 0.05, op_link_tool),
]


async def step(w: Worker) -> bool:
    """Run one operation from the mix; True when it was acknowledged."""
    name, _weight, fn = w.rng.choices(OPS, weights=[o[1] for o in OPS])[0]
    try:
        await fn(w)
    except CallFailed as exc:
        w.ledger.failures.append(str(exc))
        return False
    w.ledger.ops[name] += 1
    return True


def stored_memories(store: Store) -> list[dict[str, Any]]:
    """Every memory in the store, read through ``mnemograph export`` (via the owner when one runs)."""
    done = subprocess.run(
        [MNEMOGRAPH, "export", "--data-dir", str(store.data_dir)], capture_output=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return [r for r in map(json.loads, done.stdout.decode().splitlines()) if r["type"] == "memory"]


def check_store(store: Store, ledger: Ledger, workers: list[Worker]) -> dict[str, int]:
    """Assert the store holds every acknowledged operation exactly, and nothing half-written; returns counts."""
    verify = subprocess.run(
        [MNEMOGRAPH, "verify", "--json", "--data-dir", str(store.data_dir)], capture_output=True, check=False
    )
    report = json.loads(verify.stdout)
    assert report["ok"], f"drift: { {k: v[:5] for k, v in report['drift'].items() if v} }"
    stored = stored_memories(store)
    # Tools acknowledge ids as they show them (their first 12 hex characters); the export has full ids.
    memories = {short_id(m["id"]): m for m in stored}
    assert len(memories) == len(stored), "two stored memories share a short id"
    lost = sorted(set(ledger.contents) - set(memories))
    assert not lost, f"{len(lost)} acknowledged writes lost, e.g. {lost[:3]}"
    for mid, content in ledger.contents.items():
        assert memories[mid]["content"] == content, f"{mid}: content changed"
    for new, old in ledger.supersedes.items():
        assert short_id(memories[old]["superseded_by"] or "") == new, (
            f"acknowledged amend {old} -> {new} lost"
        )
        assert short_id(memories[new]["supersedes"] or "") == old
    for mid in ledger.retired:
        assert memories[mid]["retired_at"] is not None, f"acknowledged retire of {mid} lost"
    for mid, scopes in ledger.linked.items():
        assert scopes <= set(memories[mid]["scopes"]), f"acknowledged link of {mid} lost"
    for w in workers:
        for mid in w.live:
            m = memories[mid]
            assert m["retired_at"] is None, f"{mid} retired without an acknowledged retire"
            assert m["superseded_by"] is None, f"{mid} superseded without an acknowledged amend"
    # Nothing foreign or half-written: every stored memory is content that was sent, stored exactly once, with
    # its scopes; one that was never acknowledged is complete (it was committed whole) or absent.
    sent_ids = {content_id(c) for c in ledger.sent}
    assert {m["id"] for m in stored} <= sent_ids, "a memory nobody sent appeared"
    counts = Counter(m["content"] for m in memories.values())
    assert max(counts.values(), default=1) == 1, "a write was stored twice"
    assert all(m["scopes"] for m in memories.values())
    return {"stored": len(memories), "acknowledged_memories": len(ledger.contents)}
