"""The single write path. Every change to the stores is an intent run by one writer thread.

- Writer thread: takes intents off a queue, group-commits as many as are waiting in ONE Kùzu transaction,
  appends a change record per touched memory (a monotonically increasing ``seq``) and only then
  acknowledges them. Acknowledged therefore means durable in the canonical store.
- Projector thread: tails the change log past each projection's watermark and makes LanceDB and Tantivy
  reflect the canonical state of every touched memory. Live projection and crash replay are the same
  code, and both are idempotent, so a crash between the two commits is repaired by simply running it.
- ``wait_projected`` lets readers see their own writes: recall waits until the projections have caught up
  with what was committed when it started. ``wait_fresh`` is the readers' version: it waits at most
  ``read_wait`` seconds, and not at all again while the projections make no progress after such a wait, and
  says how far behind the answer is, so that a stalled projection costs one wait, not one per recall.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from storage.domain.errors import Closed, MnemographError, StorageUnavailable, StoreFailed, WriteRace
from storage.domain.records import Change, ProjectionRow
from storage.ports.canonical import CanonicalStore, Session
from storage.ports.projection import Projection
from storage.sync._heap import release_free_memory

log = logging.getLogger("mnemograph.reconciler")
T = TypeVar("T")
MAX_BATCH = 256
PROJECT_BATCH = 2_000
PRUNE_EVERY = 5_000
MAINTAIN_EVERY = 2_000  # changes between LanceDB compactions / ANN index refreshes
# Small writes leave one LanceDB fragment each, and every search pays for each (about 0.06 ms at 100,000
# memories). Compacted once this many have piled up, or, from IDLE_FRAGMENTS on, once writes pause for IDLE_S.
MAINTAIN_FRAGMENTS = 128
IDLE_FRAGMENTS, IDLE_S = 16, 1.0
READ_WAIT_S = 10.0  # how long a recall waits for the projections to show the writes committed before it
RETRY_FIRST_S, RETRY_MAX_S = 0.25, 30.0  # a failed projection is retried after this, doubling up to the cap
# A shared canonical store (several nodes): how often a node looks for the others' commits when nobody asks,
# and how often an intent that lost a race with another node's write is run again before its caller sees it.
FOLLOW_S = 0.5
RACE_RETRIES = 8


@dataclass
class Tx:
    """What an intent gets: the write session inside the open transaction, and a change recorder."""

    conn: Session
    graph: CanonicalStore
    now: datetime
    _next_seq: Callable[[], int]
    changes: list[Change] = field(default_factory=list)

    def record(self, op: str, memory_id: str) -> None:
        self.changes.append(Change(self._next_seq(), op, memory_id))


@dataclass
class _Intent(Generic[T]):
    fn: Callable[[Tx], T]
    future: Future[T]
    maintenance: bool = False
    races: int = 0  # how often it lost a race with another node's write (shared stores)


class Reconciler:
    def __init__(self, graph: CanonicalStore, projections: Sequence[Projection]) -> None:
        self._graph = graph
        self._projections = list(projections)
        self._queue: queue.Queue[_Intent[Any] | None] = queue.Queue()
        self._projector_jobs: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self._cond = threading.Condition()
        with graph.read() as conn:
            self._seq = graph.max_seq(conn)
        if not graph.shared:
            # An erasure prunes the embedded log whole, and its head goes with it: numbering must go on past
            # what the projections applied, or the next changes would look applied already and never be.
            self._seq = max(self._seq, *(p.watermark.value for p in self._projections))
        self._committed = self._seq
        self._projected = min((p.watermark.value for p in self._projections), default=self._seq)
        self._last_pruned = self._projected
        self._keep_after: int | None = None  # while set, the change log keeps every change past it
        self._last_maintained = self._projected
        self.read_wait = READ_WAIT_S
        self._stalled_at: int | None = None  # the projected seq at which a reader's wait last timed out
        self._closed = False
        self._projector_error: BaseException | None = None
        self._retry_s = RETRY_FIRST_S
        self._retry: threading.Timer | None = None
        self._idle: threading.Timer | None = None
        self.maintain_fragments, self.idle_fragments = MAINTAIN_FRAGMENTS, IDLE_FRAGMENTS
        self._maintain_after = 0  # after a failed maintain: appends to wait for before the next try
        self._stopping = False
        # After a projection is rebuilt from a snapshot, rows past its watermark may already be in it.
        self._replay_next = False
        # With a shared store: called in the projector thread with each batch of changes before readers waiting
        # for them are woken (the engine refreshes what it caches of the canonical state: scopes, lexicon).
        self.on_changes: Callable[[list[Change]], None] | None = None
        # A shared store: why its last poll of the log's head failed (None while it answers). Every call of
        # this node fails meanwhile; /healthz says so, so that a load balancer stops sending it work.
        self.canonical_error: str | None = None
        # While set (``follow``): called in the projector thread after each batch it applies, once readers
        # waiting for that batch are woken, with the batch's last seq (an erasure's rebuilt projections follow).
        self._on_batch: Callable[[int], None] | None = None
        self._wake_lock = threading.Lock()
        self._wake_queued = False  # a wake-up waits in the projector's queue
        self._follow_stop = threading.Event()
        # Called in the projector thread after each maintenance of the projections (the engine asks its compactor
        # to look at the canonical store's free space then); must return at once.
        self.after_maintain: Callable[[], None] | None = None
        self._follower = threading.Thread(target=self._follow_loop, name="mnemograph-follower", daemon=True)
        self._writer = threading.Thread(target=self._write_loop, name="mnemograph-writer", daemon=True)
        self._projector = threading.Thread(
            target=self._project_loop, name="mnemograph-projector", daemon=True
        )

    def start(self) -> None:
        """Replay what the projections missed (crash repair), then start both threads."""
        # The engine may have rebuilt the projections since __init__ (watermarks moved either way): one it
        # rebuilt because its watermark was ahead of the log no longer numbers the next changes.
        with self._graph.read() as conn:
            self._seq = self._graph.max_seq(conn)
        if not self._graph.shared:
            self._seq = max(self._seq, *(p.watermark.value for p in self._projections))
        self._committed = self._seq
        self._projected = min((p.watermark.value for p in self._projections), default=self._seq)
        self._last_pruned = self._last_maintained = self._projected
        self._catch_up(replay=True)
        self._writer.start()
        self._projector.start()
        if self._graph.shared:
            self._follower.start()

    # -- the write side ----------------------------------------------------------------------------

    def submit(self, fn: Callable[[Tx], T]) -> T:
        """Run ``fn`` in the writer thread inside a transaction; return its result after the commit."""
        return self._enqueue(_Intent(fn, Future()))

    def submit_many(self, fns: list[Callable[[Tx], T]]) -> list[T]:
        """Queue several intents at once (they group-commit) and return their results in order.

        Raises the first error after every intent has finished; the others have been committed.
        """
        if self._closed:
            raise Closed("the memory store is closed")
        intents = [_Intent(fn, Future()) for fn in fns]
        for intent in intents:
            self._queue.put(intent)
        results: list[T] = []
        error: BaseException | None = None
        for intent in intents:
            try:
                results.append(intent.future.result())
            except BaseException as exc:
                error = error or exc
        if error is not None:
            raise error
        return results

    def on_writer(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` in the writer thread between transactions (store maintenance, e.g. a rebuild)."""
        return self._enqueue(_Intent(lambda _tx: fn(), Future(), maintenance=True))

    def post(self, fn: Callable[[], None]) -> None:
        """Queue ``fn`` for the writer thread, between transactions, without waiting for it (a batched
        bookkeeping write, such as recall's access counts). Raises Closed once the reconciler is closing; an
        error ``fn`` raises is logged."""
        if self._closed or self._stopping:
            raise Closed("the memory store is closed")

        def job(_tx: Tx) -> None:
            try:
                fn()
            except Exception:
                log.exception("a queued job on the writer failed")

        self._queue.put(_Intent(job, Future(), maintenance=True))

    def on_projector(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` in the projector thread once the projections have caught up with every commit."""
        if self._closed:
            raise Closed("the memory store is closed")
        fut: Future[T] = Future()

        def job() -> None:
            try:
                fut.set_result(fn())
            except BaseException as exc:
                fut.set_exception(exc)

        self._projector_jobs.put(job)
        return fut.result()

    def _enqueue(self, intent: _Intent[T]) -> T:
        if self._closed:
            raise Closed("the memory store is closed")
        self._queue.put(intent)
        return intent.future.result()

    def _write_loop(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            if first.maintenance:
                self._run_maintenance(first)
                continue
            batch = [first]
            # A shared store's transaction does not read its own buffered writes, so a later intent of a batch
            # would not see an earlier one's: one intent per transaction there.
            while len(batch) < (1 if self._graph.shared else MAX_BATCH):
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None or nxt.maintenance:
                    self._queue.put(nxt)  # handled after this batch, in order
                    break
                batch.append(nxt)
            self._commit(batch)

    def _run_maintenance(self, intent: _Intent[Any]) -> None:
        try:
            intent.future.set_result(intent.fn(None))  # type: ignore[arg-type]
        except BaseException as exc:
            intent.future.set_exception(exc)

    def _commit(self, batch: list[_Intent[Any]]) -> None:
        start_seq = self._seq
        results: list[tuple[_Intent[Any], Any, BaseException | None]] = []
        try:
            with self._graph.transaction() as conn:
                tx = Tx(conn, self._graph, datetime.now(UTC), self._alloc)
                for intent in batch:
                    try:
                        results.append((intent, intent.fn(tx), None))
                    except MnemographError as exc:
                        # Intents check before they mutate, so a domain error leaves the transaction clean.
                        results.append((intent, None, exc))
                if tx.changes:
                    self._graph.append_changes(conn, tx.changes, tx.now)
        except StoreFailed as exc:
            # The store is now closed to everything: fail the whole batch (the error says whether the commit
            # reached the log, where the next open finds it).
            self._seq = start_seq
            log.error("commit failed: %s", exc.message)
            # A call that had already failed its own check changed nothing: its own error is the true answer.
            own = {id(intent): error for intent, _, error in results if error is not None}
            for intent in batch:
                intent.future.set_exception(own.get(id(intent), exc))
            return
        except WriteRace as exc:
            self._seq = start_seq
            # Another node committed the same memory, scope or entity first: run the intent again against the
            # state it left (it finds a duplicate, or MERGEs the node that now exists).
            batch[0].races += 1
            if batch[0].races <= RACE_RETRIES:
                self._commit(batch)
            else:
                batch[0].future.set_exception(exc)
            return
        except Exception as exc:
            self._seq = start_seq
            if len(batch) > 1:
                # One intent broke the shared transaction: retry each alone so only it fails.
                for intent in batch:
                    self._commit([intent])
                return
            log.exception("write failed")
            # An error of ours already says what happened and what to do (a shared store's server unreachable,
            # a commit's outcome in doubt, another node holding the turn): it is passed on as it is.
            batch[0].future.set_exception(exc if isinstance(exc, MnemographError) else _storage_error(exc))
            return
        if self._graph.shared:
            # Numbered by the store's counter, not by ``_alloc``: the head now covers this commit (and any
            # other node's before it).
            try:
                with self._graph.read() as conn:
                    self._seq = max(self._seq, self._graph.max_seq(conn))
            except (
                Exception
            ):  # committed all the same: the next head read (a recall, the follower) catches up
                log.warning("could not read the change log's head after a commit", exc_info=True)
        with self._cond:
            self._committed = max(self._committed, self._seq)
            self._cond.notify_all()
        for intent, value, error in results:
            if error is not None:
                intent.future.set_exception(error)
            else:
                intent.future.set_result(value)
        self._wake_projector()

    def _wake_projector(self) -> None:
        """Queue one wake-up of the projector unless one is already waiting: a wake-up catches up with every
        commit made before the projector takes it, so one per commit only lengthened the queue, and a job
        queued behind it (an erasure's switch) waited for a catch-up per commit before it."""
        with self._wake_lock:
            if self._wake_queued:
                return
            self._wake_queued = True
        self._projector_jobs.put(_WAKE)

    def _alloc(self) -> int:
        self._seq += 1
        return self._seq

    # -- the projection side -----------------------------------------------------------------------

    def _project_loop(self) -> None:
        while True:
            job = self._projector_jobs.get()
            if job is None:
                return
            if job is _WAKE:
                with self._wake_lock:
                    self._wake_queued = False  # a commit from here on queues the next one
            try:
                # Up to the commits made before this job, not "until none is left": under a stream of writes
                # that never pauses that never ended, and a job queued behind it (the switch of an erasure's
                # rewrite) never ran. A commit queues a wake-up unless one waits, so nothing is left behind.
                self._catch_up(replay=self._replay_next, until=self._committed)
                self._replay_next = False
            except Exception as exc:
                log.exception("projection failed; retrying in %.2f s (and on the next change)", self._retry_s)
                # The failed batch may be in a projection's files already: its commit went through and only its
                # watermark's write failed. Its retry must not take the batch's new memories for never
                # projected (``fresh`` skips their delete): each retry added them again, one more row each.
                self._replay_next = True
                with self._cond:
                    self._projector_error = exc
                    self._cond.notify_all()
                self._schedule_retry()
            else:
                self._retry_s = RETRY_FIRST_S
            if job is not _WAKE:
                job()  # jobs report their own errors through their future

    def _schedule_retry(self) -> None:
        """Wake the projector again after a backoff: a transient fault (a full disk that was freed) must not
        leave the projections behind until the next write happens to come."""
        self._retry = self._later(self._retry, self._retry_s, _WAKE)
        self._retry_s = min(self._retry_s * 2, RETRY_MAX_S)

    @property
    def projection_error(self) -> str | None:
        """Why the last projection attempt failed, while the projections have not caught up since."""
        exc = self._projector_error
        return None if exc is None else f"{type(exc).__name__}: {exc}"

    def _pruned_past(self, conn: Session, low: int, changes: list[Change]) -> bool:
        """A shared log only: whether changes past ``low`` that this node never applied were pruned (by another
        node's erasure, which must prune the entries naming the erased ids). Replaying what is left would then
        miss them: an erased memory would stay in this node's files, a write made just before would never be
        found. A first change right after ``low``, or an empty log no newer than ``low``, means none were."""
        if changes and changes[0].seq == low + 1:
            return False
        oldest = self._graph.oldest_change(conn)
        if oldest is not None:
            return oldest > low + 1
        return self._graph.max_seq(conn) > low

    def _rebuild_behind_gap(self, low: int) -> None:
        """Rebuild this node's projections from the canonical rows (new files: nothing pruned stays in them)."""
        with self._graph.read() as conn:
            head = self._graph.max_seq(conn)
            rows = list(self._graph.projection_rows(conn).values())
        log.warning(
            "changes %d..%d of the shared log were pruned before this node applied them (another node's "
            "erasure); rebuilding this node's search indexes from the canonical store (%d memories)",
            low + 1,
            head,
            len(rows),
        )
        for projection in self._projections:
            projection.replace_all(rows)
            projection.watermark.set(head)
        if self.on_changes is not None:
            try:
                self.on_changes([])
            except Exception:
                log.warning("could not refresh the engine's caches after a rebuild", exc_info=True)
        with self._cond:
            self._projected = max(self._projected, head)
            self._committed = max(self._committed, head)
            self._projector_error = None
            self._cond.notify_all()

    def _catch_up(self, *, replay: bool, until: int | None = None) -> None:
        """Apply every change past the projections' watermarks (or at least up to ``until``), in batches."""
        while until is None or self._projected < until:
            marks = [p.watermark.value for p in self._projections]
            low = min(marks, default=self._seq)
            with self._graph.read() as conn:
                changes = self._graph.changes_since(conn, low, limit=PROJECT_BATCH)
                gap = self._graph.shared and self._pruned_past(conn, low, changes)
            if gap:
                self._rebuild_behind_gap(low)
                continue
            if not changes:
                break
            with self._graph.read() as conn:
                ids = list(dict.fromkeys(c.memory_id for c in changes))
                rows = self._graph.projection_rows(conn, ids)
            upserts = [rows[i] for i in ids if i in rows]
            deletes = [i for i in ids if i not in rows]
            # A memory whose first change here is its creation was never projected, unless this is a
            # replay after a crash (it may have been applied before the watermark was written).
            fresh: list[str] = []
            if not replay:
                first_op: dict[str, str] = {}
                for c in changes:
                    first_op.setdefault(c.memory_id, c.op)
                fresh = [i for i, op in first_op.items() if op == "add"]
            top = changes[-1].seq
            # A projection ahead of the slowest one may hold these rows already: no ``fresh`` shortcut.
            todo = [
                (p, fresh if mark == low else [])
                for p, mark in zip(self._projections, marks, strict=True)
                if mark < top
            ]
            self._apply_each(todo, upserts, deletes, top)
            if self.on_changes is not None:
                try:
                    self.on_changes(changes)
                except Exception:  # the projections did advance: readers must not wait on a cache refresh
                    log.warning("could not refresh the engine's caches after applying changes", exc_info=True)
            with self._cond:
                self._projected = top
                self._projector_error = None
                self._cond.notify_all()
            follower = self._on_batch
            if follower is not None:
                follower(top)
        pending = self._pending_maintenance()
        if pending >= self._maintain_after and (
            self._projected - self._last_maintained >= MAINTAIN_EVERY or pending >= self.maintain_fragments
        ):
            self._maintain()
        elif pending >= max(self.idle_fragments, self._maintain_after) and not replay:
            self._when_idle()
        # Another node sharing the store may still need changes this one has projected: no pruning there.
        prunable = not self._graph.shared and not replay and not self._closed
        if self._projected - self._last_pruned >= PRUNE_EVERY and prunable:
            keep = self._keep_after
            upto = self._projected if keep is None else min(self._projected, keep)
            self._last_pruned = upto
            self._queue.put(_Intent(lambda tx: self._graph.prune_changes(tx.conn, upto), Future()))

    def _apply_each(
        self,
        todo: Sequence[tuple[Projection, Sequence[str]]],
        upserts: Sequence[ProjectionRow],
        deletes: Sequence[str],
        top: int,
    ) -> None:
        """Apply a batch (its last seq: ``top``) to every projection of ``todo`` (each with its ``fresh`` ids),
        the first on this thread and the others beside it; returns once all are done, raising the first
        failure. Each sets its own watermark after its own apply, so a failure (or a crash) leaves each
        projection where it got to, as applying them one after the other did."""

        def apply(projection: Projection, fresh: Sequence[str]) -> None:
            projection.apply(upserts, deletes, fresh=fresh)
            projection.watermark.set(top)

        if len(todo) < 2:
            for projection, fresh in todo:
                apply(projection, fresh)
            return
        # A daemon thread per batch, as the projector is one. A pool's threads are joined at the interpreter's
        # exit, and a process that exited without closing the store then aborted in most runs ("terminate called
        # without an active exception", exit status 134: 9 of 14 runs; 2 of 14 with the applies one after the
        # other, 0 of 14 like this). Starting and joining a thread costs about 0.13 ms of a batch's 30-140.
        failures: list[BaseException] = []

        def beside(projection: Projection, fresh: Sequence[str]) -> None:
            try:
                apply(projection, fresh)
            except BaseException as exc:
                failures.append(exc)

        others = [
            threading.Thread(target=beside, args=item, name="mnemograph-project", daemon=True)
            for item in todo[1:]
        ]
        started: list[threading.Thread] = []
        try:
            for thread in others:
                thread.start()  # may fail (no thread left to the process): the others started are joined
                started.append(thread)
            apply(*todo[0])
        except BaseException as exc:
            failures.insert(0, exc)
        for thread in started:
            thread.join()  # never leave a projection writing behind the projector's back
        if failures:
            raise failures[0]

    def _maintain(self) -> None:
        """Compact small fragments, drop old versions, build or refresh the ANN index once large enough.

        A failure costs search speed, not correctness: it is logged (not a projection failure) and tried again
        after another ``maintain_fragments`` appends."""
        self._last_maintained = self._projected
        try:
            for projection in self._projections:
                projection.maintain()
        except Exception:
            self._maintain_after = self._pending_maintenance() + self.maintain_fragments
            log.exception("maintenance of the vector projection failed; it is tried again after more writes")
        else:
            self._maintain_after = 0
        if self.after_maintain is not None:
            self.after_maintain()
        release_free_memory()  # compaction's buffers, freed by now, would stay in the process (see _heap)

    def _when_idle(self) -> None:
        """Maintain once no change has come for ``IDLE_S``: a burst of small writes is compacted after it
        ends, off the path of the writes themselves. Each new change restarts the wait."""
        self._idle = self._later(self._idle, IDLE_S, self._idle_maintain)

    def _later(
        self, pending: threading.Timer | None, seconds: float, job: Callable[[], None]
    ) -> threading.Timer | None:
        """Hand ``job`` to the projector after ``seconds``, replacing ``pending`` (a no-op once it has fired);
        nothing once the reconciler is stopping."""
        if pending is not None:
            pending.cancel()
        if self._closed or self._stopping:
            return None
        timer = threading.Timer(seconds, self._projector_jobs.put, args=(job,))
        timer.daemon = True
        timer.start()
        return timer

    def _idle_maintain(self) -> None:
        """A projector job: maintain if nothing newer is waiting (else the next catch-up decides again)."""
        pending = self._pending_maintenance()
        if self._projector_jobs.empty() and pending >= max(self.idle_fragments, self._maintain_after):
            self._maintain()

    def _pending_maintenance(self) -> int:
        return max((p.appends_since_maintain for p in self._projections), default=0)

    @contextmanager
    def keeping_changes_after(self, seq: int) -> Iterator[None]:
        """Within the block the periodic pruning keeps every change past ``seq``: a projection rebuilt beside
        live traffic from the rows at ``seq`` catches up from them."""
        self._keep_after = seq
        try:
            yield
        finally:
            self._keep_after = None

    def follow(self, fn: Callable[[int], None] | None) -> None:
        """Call ``fn(seq)`` after each batch of changes the projector applies (None: stop). Set and cleared
        from projector jobs (``on_projector``), so no batch is half followed. ``fn`` runs after the readers
        waiting for the batch are woken: what it costs delays the next batch, never this one's readers; it
        must not raise."""
        self._on_batch = fn

    def rebuilt(self) -> None:
        """Called (in the projector thread) after a projection was rebuilt from a canonical snapshot."""
        self._replay_next = True

    def sync_head(self) -> None:
        """With a shared store, take the head of the change log (every node's commits) as what readers must
        see, and wake the projector if it moved: a client reads its own writes on any node. A no-op (no query)
        for a store this process owns."""
        if not self._graph.shared or self._closed:
            return
        with self._graph.read() as conn:
            head = self._graph.max_seq(conn)
        with self._cond:
            moved = head > self._committed
            self._committed = max(self._committed, head)
        if moved:
            self._wake_projector()

    def _follow_loop(self) -> None:
        """Keep a node's projections near the shared log while nobody reads (a recall syncs anyway), and keep
        ``canonical_error`` up to date for the node's health check."""
        failing = False
        while not self._follow_stop.wait(FOLLOW_S):
            try:
                self.sync_head()
            except Exception as exc:
                self.canonical_error = f"{type(exc).__name__}: {exc}"
                if not failing:  # once per outage, not twice a second
                    log.warning(
                        "cannot read the shared change log's head (%s); retrying every %.1f s", exc, FOLLOW_S
                    )
                failing = True
            else:
                self.canonical_error = None
                if failing:
                    log.warning("the shared change log is reachable again")
                failing = False

    def wait_projected(self, timeout: float = 10.0) -> bool:
        """Block until every commit made before this call is visible in both projections."""
        self.sync_head()
        with self._cond:
            target = self._committed
            return self._cond.wait_for(lambda: self._projected >= target or self._closed, timeout)

    def fresh_mark(self) -> int:
        """The commit a reader starting now must see (every node's, with a shared store): for ``wait_fresh``
        called later, from another thread, for this moment."""
        self.sync_head()
        with self._cond:
            return self._committed

    def wait_fresh(self, upto: int | None = None) -> int:
        """For readers: wait (up to ``read_wait`` seconds) until the projections show every commit made before
        this call (or up to ``upto``, a ``fresh_mark``), and return how many committed changes they still lack
        (0: fully fresh). With a shared store, "committed" is every node's: the head is read first
        (``sync_head``).

        A wait that times out marks the projections stalled; until they make progress, later readers do not
        wait at all but get the lag at once (and say so to their caller)."""
        if upto is None:
            self.sync_head()
        with self._cond:
            target = self._committed if upto is None else upto
            timeout = 0.0 if self._stalled_at == self._projected else self.read_wait
            caught_up = self._cond.wait_for(lambda: self._projected >= target or self._closed, timeout)
            if caught_up:
                self._stalled_at = None
                return 0
            self._stalled_at = self._projected
            if timeout:
                log.warning(
                    "recall answered %d change(s) behind: the projections made no progress for %.1f s",
                    target - self._projected,
                    timeout,
                )
            return target - self._projected

    @property
    def committed_seq(self) -> int:
        return self._committed

    @property
    def projected_seq(self) -> int:
        return self._projected

    def close(self) -> None:
        """Drain queued writes and projections, then stop both threads. Idempotent."""
        if self._closed:
            return
        self._stopping = True  # no new timers from here on
        self._follow_stop.set()
        if self._follower.is_alive():
            self._follower.join()
        self._queue.put(None)
        self._writer.join()
        self._projector_jobs.put(_WAKE)
        self._projector_jobs.put(None)
        self._projector.join()
        for timer in (self._retry, self._idle):
            if timer is not None:
                timer.cancel()
        if self._projector_error is None and self._pending_maintenance() >= self.idle_fragments:
            self._maintain()  # leave no pile of small fragments to the next process: it would not know of them
        self._closed = True
        with self._cond:
            self._cond.notify_all()


def _wake() -> None:
    """Sentinel job: just catch up."""


_WAKE: Callable[[], None] = _wake


def _storage_error(exc: BaseException) -> StorageUnavailable:
    return StorageUnavailable(
        f"the canonical store refused the write: {exc}",
        hint="nothing was changed; check free disk space and permissions on the data directory, then retry",
    )
