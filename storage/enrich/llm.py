"""Running the LLM enrichment after the commit: queues, worker threads, and applying what it found.

A write is acknowledged before any of this starts, so a slow, rate-limited or failing model never delays or
fails it. A job may bring its own extractor (the writing client's model, through MCP sampling:
``Job.extractor``); the engine queues those on an Enricher of their own, so a slow client never holds up the
configured model. Each job asks the extractor once (with its own retries), then applies the asserted
statements it returned as relations, and reconciles them like offline ones, in one writer intent. A failure applies
nothing and is recorded (``Enrichment`` row) so ``memory_read`` shows it. On close, the job in flight
finishes and jobs still queued are recorded as not run.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from storage.enrich import Fact
from storage.enrich.results import SAMPLING, ExtractionFailed, ExtractionSkipped, LlmResult, Skip, Usage
from storage.ports.canonical import CanonicalStore

__all__ = [
    "SAMPLING",
    "Enricher",
    "ExtractionFailed",
    "ExtractionSkipped",
    "Extractor",
    "Job",
    "LlmResult",
    "Skip",
    "apply",
    "describe",
]
from storage.domain.models import EntityIn
from storage.enrich.reconcile import Access, Outcome, reconcile
from storage.language.extraction import EntityLexicon, _norm
from storage.sync.reconciler import Tx

log = logging.getLogger("mnemograph.enrich")


class Extractor(Protocol):
    model: str

    def extract(self, content: str, *, written_at: datetime, speaker: str | None) -> LlmResult: ...


@runtime_checkable
class Stoppable(Protocol):
    def stop(self) -> None:
        """The request in flight is the last: no retry after it."""


@dataclass(frozen=True, slots=True)
class Job:
    memory_id: str
    content: str
    written_at: datetime
    event_time: datetime
    scopes: tuple[str, ...]
    speaker: str | None
    access: Access
    extractor: Extractor | None = None  # this job's own model (the writing client's, through MCP sampling)
    principal: str = "local"  # who wrote it, and through which client: for the audit log of what it changes
    client: str = ""


class Enricher:
    """Background workers feeding ``apply`` (which runs a writer intent) with extractor results.

    Jobs are queued per *owner*: the ``owner`` attribute of a job's extractor (the MCP session whose client's
    model it asks), else one shared queue. Each owner's jobs run one at a time, in order, on a thread of that
    owner's own, started when its first job arrives and ended when its queue is empty; so a client that never
    answers holds up only its own memories, never another session's (each of its requests still waits up to
    the sampling timeout). The configured LLM's jobs bring no extractor: one queue, one worker, as before.
    ``limit`` bounds the jobs waiting *per owner* (the one in flight included): past it a job is recorded as
    skipped without asking any model, so one client writing faster than its model answers cannot crowd out
    the others either.
    """

    def __init__(
        self,
        extractor: Extractor | None,
        apply: Callable[[Job, LlmResult | None, ExtractionFailed | None], None],
        *,
        limit: int | None = None,
    ) -> None:
        self.extractor = extractor  # None: every job brings its own
        self._apply = apply
        self._limit = limit  # jobs waiting beyond this (per owner) are recorded as skipped, without asking
        self._queues: dict[object, collections.deque[Job]] = {}
        self._counts: dict[object, int] = {}  # per owner: queued and in flight
        self._workers: dict[object, threading.Thread] = {}
        self._pending: set[str] = set()
        self._cond = threading.Condition()
        self._stopping = False

    def submit(self, job: Job) -> None:
        owner = _owner_of(job)
        with self._cond:
            if self._stopping:
                return
            if self._limit is not None and self._counts.get(owner, 0) >= self._limit:
                # Bounded: a client writing faster than its model answers gets the offline extraction, and
                # the queue holds no more copies of its content than the limit.
                reason = f"{self._limit} memories were already waiting for a model"
                job = dataclasses.replace(job, content="", extractor=Skip(reason))
            self._pending.add(job.memory_id)
            self._counts[owner] = self._counts.get(owner, 0) + 1
            self._queues.setdefault(owner, collections.deque()).append(job)
            if owner not in self._workers:
                worker = threading.Thread(
                    target=self._run, args=(owner,), name="mnemograph-enrich", daemon=True
                )
                self._workers[owner] = worker
                worker.start()

    def pending(self, memory_id: str) -> bool:
        with self._cond:
            return memory_id in self._pending

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Block until every submitted job has been applied or recorded as failed."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._pending, timeout)

    def close(self, abandon: Callable[[Job], None]) -> None:
        """Finish the jobs in flight, without their retries; ``abandon`` each job still queued (recorded as
        not run)."""
        if isinstance(self.extractor, Stoppable):
            self.extractor.stop()
        with self._cond:
            self._stopping = True
            left = [(owner, job) for owner, jobs in self._queues.items() for job in jobs]
            for jobs in self._queues.values():
                jobs.clear()
            workers = list(self._workers.values())
        for worker in workers:
            worker.join()
        for owner, job in left:
            try:
                abandon(job)
            finally:
                self._done(owner, job)

    def _run(self, owner: object) -> None:
        while True:
            with self._cond:
                jobs = self._queues.get(owner)
                if not jobs:  # decided under the lock submit takes: a job queued later starts a new worker
                    self._queues.pop(owner, None)
                    self._workers.pop(owner, None)
                    return
                job = jobs.popleft()
            try:
                self._handle(job)
            finally:
                self._done(owner, job)

    def _handle(self, job: Job) -> None:
        extractor = job.extractor or self.extractor
        try:
            try:
                if extractor is None:
                    raise ExtractionSkipped("no model to ask")
                result = extractor.extract(job.content, written_at=job.event_time, speaker=job.speaker)
            except ExtractionFailed as exc:
                self._apply(job, None, exc)
            except Exception as exc:  # a bug or an SDK surprise: still visible in memory_read
                log.exception("enrichment of %s failed", job.memory_id)
                self._apply(job, None, ExtractionFailed(f"unexpected {type(exc).__name__}", Usage(), 0))
            else:
                self._apply(job, result, None)
        except Exception:
            log.exception("recording the enrichment of %s failed", job.memory_id)

    def _done(self, owner: object, job: Job) -> None:
        with self._cond:
            self._pending.discard(job.memory_id)
            left = self._counts.get(owner, 0) - 1
            if left > 0:
                self._counts[owner] = left
            else:
                self._counts.pop(owner, None)
            self._cond.notify_all()


def _owner_of(job: Job) -> object:
    """Whose queue a job waits in: its extractor's ``owner`` (an MCP session), else the shared one (None)."""
    return getattr(job.extractor, "owner", None)


def apply(
    graph: CanonicalStore,
    tx: Tx,
    job: Job,
    result: LlmResult | None,
    error: ExtractionFailed | None,
    *,
    functional: frozenset[str],
    model: str,
    lexicon: EntityLexicon | None = None,
) -> Outcome | None:
    """In the writer: record the LLM's relations for ``job``'s memory and reconcile them, or the failure.

    Nothing is applied to a memory that is gone or no longer current (erased, retired, superseded since).
    ``lexicon`` (the engine's) learns the new entities and counts the new relations, as a write's do: the
    graph lane matches queries against it and walks only from entities it counts relations for."""
    usage = result.usage if result is not None else (error.usage if error is not None else Usage())
    if job.extractor is not None:  # the job's own model: say which (sampling:<the model the client used>)
        model = job.extractor.model
        if result is not None and job.extractor.model == SAMPLING:
            model = f"{SAMPLING}:{result.model}"[:200]
    elif result is not None:
        model = result.model
    row: dict[str, Any] = {
        "model": model,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_tokens": usage.cache_read_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
        "at": tx.now,
    }
    if not graph.live_state(tx.conn, job.memory_id):
        return None  # erased or no longer current: nothing to say about it
    if result is None:
        reason = error.reason if error is not None else "not run"
        status = "skipped" if isinstance(error, ExtractionSkipped) else "failed"
        graph.record_enrichment(tx.conn, job.memory_id, row | {"status": status, "detail": reason})
        return None
    memory = graph.fetch(tx.conn, [job.memory_id])[job.memory_id]
    # A name the model spells differently from the memory's own mention of it ("Acme Inc" for "Acme Inc.") is
    # that mention: the relation is recorded on the entity the memory mentions, never on another entity with
    # the model's spelling (which may be another team's, and whose edges the memory's scope changes do not
    # reach: a relation's ends are the memory's mentions, docs/security.md).
    known = {_norm(e): e for e in memory.entities}
    recorded = {
        (_norm(r.subject), r.predicate, _norm(r.object))
        for r in graph.relation_history(tx.conn, [job.memory_id])
    }
    before = set(recorded)
    facts: list[Fact] = []
    new_entities: dict[str, EntityIn] = {}
    added = 0
    for s in result.statements:
        if s.status not in ("asserted", "negated"):
            continue
        s = dataclasses.replace(
            s,
            subject=known.get(_norm(s.subject), s.subject),
            object=known.get(_norm(s.object), s.object),
        )
        facts.append(Fact(s.subject, s.predicate, s.object, s.status, job.event_time, s.ended))  # type: ignore[arg-type]
        key = (_norm(s.subject), s.predicate, _norm(s.object))
        if s.status != "asserted" or key in recorded:
            continue
        for name, kind in ((s.subject, s.subject_type), (s.object, s.object_type)):
            if _norm(name) not in known:
                new_entities[_norm(name)] = EntityIn(name[:200], kind)
                known[_norm(name)] = name[:200]  # a later statement's other spelling of it is this entity
        recorded.add(key)
        added += 1
    if new_entities:
        graph.mention(tx.conn, job.memory_id, list(new_entities.values()))
        if lexicon is not None:
            for e in new_entities.values():
                lexicon.add(e.name, e.aliases)
                lexicon.mentioned(e.name, scopes=memory.scopes)
    done: set[tuple[str, str, str]] = set()
    for f in facts:
        key = (_norm(f.subject), f.predicate, _norm(f.object))
        if f.status == "asserted" and key not in before and key not in done:
            done.add(key)
            graph.relate(tx.conn, job.memory_id, f.subject[:200], f.predicate, f.object[:200], tx.now)
            if (
                lexicon is not None
            ):  # counted in the writer, as a write's relations are (over-counting is harmless)
                lexicon.related(f.subject[:200])
                lexicon.related(f.object[:200])
    if new_entities or done:
        # New mentions and relations move the change log's head: the graph lane keeps what it read of the graph
        # until the head moves (and other nodes of a shared store reload their lexicon when it does).
        tx.record("enrich", job.memory_id)
    # A memory valid only from a later date (a planned change) takes effect then, as its write reconciled it.
    planned = memory.valid_from if memory.valid_from > tx.now else None
    out, changed = reconcile(
        graph, tx.conn, new_id=job.memory_id, scopes=job.scopes, facts=facts, functional=functional,
        access=job.access, now=tx.now, effective=planned,
    )  # fmt: skip
    for mid in changed:
        tx.record("supersede", mid)
    detail = (
        f"{added} relation(s) added, {len(out.supersedes)} superseded, {len(out.contradicts)} contradicted"
    )
    graph.record_enrichment(tx.conn, job.memory_id, row | {"status": "done", "detail": detail})
    return out


def describe(row: dict[str, Any] | None, pending: str | None) -> str | None:
    """One line for memory_read: how the LLM enrichment went, and what it cost in tokens. ``pending``: which
    model pass (``llm`` or ``sampling``) still has the memory queued, if any."""
    if row is None:
        return f"{pending}: pending" if pending else None
    model = str(row["model"])
    if model == SAMPLING or model.startswith(SAMPLING + ":"):
        # The client's own model: the client pays for it and reports no token counts.
        who = f"sampling (the client's model {model[len(SAMPLING) + 1 :]})" if ":" in model else "sampling"
        tail = "" if row["status"] == "done" else "; the offline extraction stands"
        return f"{who}: {row['status']} ({row['detail']}){tail}"
    return (
        f"llm {model}: {row['status']} ({row['detail']}); tokens in {row['input_tokens']} "
        f"(cache read {row['cache_read_tokens']}, cache write {row['cache_write_tokens']}), out {row['output_tokens']}"
    )
