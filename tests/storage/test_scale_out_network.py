"""A node commits to a shared FalkorDB graph over a network that loses a message (a proxy in front of the real
server cuts the connection on cue): the caller hears what truly happened to its call, and the other nodes see
exactly that."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import redis
from redis.lock import Lock

from storage import CachedEmbedder, Engine
from storage.adapters.falkordb import _cypher
from storage.adapters.falkordb import local as falkordb_local
from storage.adapters.falkordb import store as falkordb_store
from storage.adapters.falkordb.store import lock_key
from storage.domain.errors import NotFound, StorageUnavailable
from tests.e2e.conftest import wait_for
from tests.storage._lossy_proxy import LossyProxy

pytestmark = pytest.mark.slow


@pytest.fixture
def proxy(falkordb: falkordb_local.LocalServer) -> Iterator[LossyProxy]:
    p = LossyProxy(falkordb.port)
    yield p
    p.close()


@pytest.fixture
def nodes(
    falkordb: falkordb_local.LocalServer, proxy: LossyProxy, tmp_path: Path, embedder: CachedEmbedder
) -> Iterator[tuple[Engine, Engine]]:
    """Node a reaches the server through the lossy proxy; node b directly (the other nodes' view)."""
    a = Engine.open(tmp_path / "a", embedder=embedder, warm=False, canonical=proxy.url("g"))
    b = Engine.open(tmp_path / "b", embedder=embedder, warm=False, canonical=falkordb.url("g"))
    yield a, b
    a.close()
    b.close()


def test_a_commit_whose_reply_is_lost_is_acknowledged_because_the_server_kept_it(
    nodes: tuple[Engine, Engine], proxy: LossyProxy
) -> None:
    """It used to fail with "nothing was changed; check free disk space" while every node served the memory."""
    a, b = nodes
    key = a.write("Ana keeps the spare key under the blue pot.", ["user:ana"])

    proxy.lose_reply("bees on the roof")
    bees = a.write("Ana keeps bees on the roof.", ["user:ana"])
    assert bees.status == "added"
    assert b.read(bees.id).memory.content == "Ana keeps bees on the roof."
    assert a.write("Ana keeps bees on the roof.", ["user:ana"]).status == "duplicate"

    proxy.lose_reply("in the shed now")
    amended = a.amend(key.id, "Ana keeps the spare key in the shed now.")
    assert b.read(key.id).memory.superseded_by == amended.id
    assert b.read(amended.id).memory.supersedes == key.id

    proxy.lose_reply("the hive moved")
    a.retire(bees.id, reason="the hive moved")
    assert b.read(bees.id).memory.retired_at is not None
    assert [h.memory.id for h in b.recall("Where are the bees and the key?", ["user:ana"])] == [amended.id]
    assert proxy.cuts >= 3  # the three replies were lost for sure


def test_a_commit_the_server_never_received_says_nothing_was_kept(
    nodes: tuple[Engine, Engine], proxy: LossyProxy
) -> None:
    a, b = nodes
    proxy.lose_request("the gate code is 4711")
    with pytest.raises(StorageUnavailable) as info:
        a.write("Ana's gate code is 4711 — the gate code is 4711.", ["user:ana"])
    assert "nothing from this call was kept" in info.value.hint
    assert "disk" not in info.value.hint  # not the embedded store's advice
    assert not b.recall("gate code", ["user:ana"])
    assert a.write("Ana's gate code is 4711 — the gate code is 4711.", ["user:ana"]).status == "added"


def test_a_server_gone_after_a_commit_was_sent_says_the_outcome_is_unknown_and_holds_no_one_up(
    nodes: tuple[Engine, Engine], proxy: LossyProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reply is lost and the server then stays out of reach: whether the call was kept cannot be known, and
    the caller is told so and how to find out. The commit lock this node could not give back does not hold the
    other nodes' writes for its 60 s lease."""
    monkeypatch.setattr(_cypher, "SETTLE_S", 0.5)
    a, b = nodes
    proxy.lose_reply("the boat is moored at pier 9")
    proxy.refuse = True
    try:
        with pytest.raises(StorageUnavailable) as info:
            a.write("Ana's boat: the boat is moored at pier 9.", ["user:ana"])
    finally:
        proxy.refuse = False
    assert "may or may not have been kept" in info.value.hint
    assert "nothing" not in info.value.hint
    # It was kept (the server ran it); sent again, the caller learns so.
    assert a.write("Ana's boat: the boat is moored at pier 9.", ["user:ana"]).status == "duplicate"
    w = b.write("Bo's boat is in dry dock.", ["user:bo"])  # not held up by a's lock
    assert b.read(w.id).memory.content == "Bo's boat is in dry dock."


def test_a_lost_reply_to_a_refused_call_still_refuses_it(
    nodes: tuple[Engine, Engine], proxy: LossyProxy
) -> None:
    """Lost replies are settled by reading the graph: a domain refusal before any send is unchanged."""
    a, _ = nodes
    with pytest.raises(NotFound):
        a.amend("0" * 32, "no such memory")


def test_a_commit_slower_than_the_lease_keeps_its_turn_and_a_dead_nodes_turn_would_free_soon(
    nodes: tuple[Engine, Engine],
    proxy: LossyProxy,
    falkordb: falkordb_local.LocalServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A turn is a short lease its node renews while the commit runs: a commit that takes longer than the lease
    keeps its turn to the end, and a node that died holding a turn frees it after one lease, not a minute."""
    monkeypatch.setattr(falkordb_store, "LEASE_S", 1.5)
    a, b = nodes
    key = falkordb_store.lock_key("g")
    watch = redis.Redis(port=falkordb.port)
    holders: list[tuple[bytes | None, int]] = []  # (who holds the turn, how long its lease has left, ms)
    proxy.delay_reply("the ferry leaves at noon", 4.0)  # the reply takes 4 s: longer than 2 leases
    with ThreadPoolExecutor(1) as pool:
        slow = pool.submit(a.write, "Ana's note: the ferry leaves at noon.", ["user:ana"])
        wait_for(lambda: watch.get(key) is not None, timeout=30, what="a's turn")
        while not slow.done():
            holders.append((watch.get(key), watch.pttl(key)))
            time.sleep(0.1)  # sampling who holds the turn while a's slow commit runs
        assert slow.result().status == "added"
    held = holders[:-3]  # the last samples may see the turn given back
    assert len(held) > 20, holders
    assert {h for h, _ in held} == {held[0][0]}, holders  # one holder to the end
    # Never more than one lease left: had a died now, b would wait 1.5 s, not a minute.
    assert max(ttl for _, ttl in held) <= 1500, holders
    assert b.write("Bo's note: the ferry is late.", ["user:bo"]).status == "added"
    watch.close()


@pytest.mark.parametrize("lost", ["the reply to the lock's acquire", "the lock's release"])
def test_a_message_lost_around_the_commit_lock_leaves_no_lock_held(
    nodes: tuple[Engine, Engine], proxy: LossyProxy, falkordb: falkordb_local.LocalServer, lost: str
) -> None:
    """The commit lock is a key on the server with a 60 s lease. When the reply to its acquire is lost (the
    server set the key: the lock is this node's) or its release never reaches the server, the key stayed:
    every node's next write, this node's own included, waited the whole lease (measured: 60.0 s)."""
    a, b = nodes
    a.write("Ana keeps the spare key under the blue pot.", ["user:ana"])
    if lost == "the reply to the lock's acquire":
        proxy.lose_reply(lock_key("g"))
        with pytest.raises(StorageUnavailable) as info:
            a.write("Ana keeps bees on the roof.", ["user:ana"])
        assert "nothing from this call was kept" in info.value.hint
    else:
        proxy.lose_request(hashlib.sha1(Lock.LUA_RELEASE_SCRIPT.encode()).hexdigest())
        assert a.write("Ana keeps bees on the roof.", ["user:ana"]).status == "added"
    assert proxy.cuts
    server = redis.Redis(port=falkordb.port)
    try:
        assert not server.exists(lock_key("g")), "the lock is held though no node is committing"
    finally:
        server.close()
    w = b.write("Bo's boat is in dry dock.", ["user:bo"])
    assert a.read(w.id).memory.content == "Bo's boat is in dry dock."
    assert a.write("Ana keeps bees on the roof.", ["user:ana"]).status in ("added", "duplicate")
    assert [h.memory.content for h in b.recall("bees", ["user:ana"], k=1)] == ["Ana keeps bees on the roof."]


def test_a_server_that_stops_answering_fails_the_call_instead_of_hanging_the_node(
    falkordb: falkordb_local.LocalServer,
    proxy: LossyProxy,
    tmp_path: Path,
    embedder: CachedEmbedder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The reply is lost and the network then drops every packet (connections are accepted, nothing comes
    back). The client had no socket timeout: the settle's first question never returned, and the node's
    writer, its projector and every caller waited forever (its 10 s deadline was never looked at)."""
    monkeypatch.setattr(falkordb_store, "SOCKET_TIMEOUT_S", 1.0)
    monkeypatch.setattr(_cypher, "SETTLE_S", 0.5)
    a = Engine.open(tmp_path / "a", embedder=embedder, warm=False, canonical=proxy.url("g"))
    outcome: list[BaseException | str] = []

    def call() -> None:
        try:
            outcome.append(a.write("Ana's boat: the boat is moored at pier 9.", ["user:ana"]).status)
        except BaseException as exc:
            outcome.append(exc)

    try:
        proxy.lose_reply("the boat is moored at pier 9")
        proxy.stall = True
        caller = threading.Thread(target=call, daemon=True)
        caller.start()
        caller.join(300)  # a liveness bound, not a speed check: it hung for good before
        assert outcome, "the call never returned"
        (got,) = outcome
        assert isinstance(got, StorageUnavailable)
        assert "may or may not have been kept" in (got.hint or "")
        proxy.stall = False
        assert a.write("Ana's boat: the boat is moored at pier 9.", ["user:ana"]).status == "duplicate"
    finally:
        proxy.stall = False
        a.close()
