"""The reconcile decision by Claude, after the commit, for what the rules cannot decide (``storage.enrich.decide``).

It runs on the enrichment worker right after the extraction pass of the same memory, so a write is never held up
or failed by it, and ``wait_enriched`` covers it. Candidates are current memories that share a scope with the
new one and that its writer may read, found two ways: another value for a subject and predicate the new memory
states, on a predicate the rules leave open (not functional, not fixed); and close wording (the words index,
then the cosine of the stored vectors). Memories the rules already linked to it (superseded, contradicted) are
not asked about. Nothing is sent when there is no candidate.
"""

from __future__ import annotations

import numpy as np

from storage.domain.models import MemoryKind, Status
from storage.engine.state import _now, log
from storage.engine.writes import _Writes
from storage.enrich import decide, llm
from storage.enrich.near import NEAR_COSINE, NEAR_K
from storage.enrich.reconcile import FIXED
from storage.enrich.results import ExtractionFailed, Usage
from storage.sync.reconciler import Tx


class _Decisions(_Writes):
    _decider: decide.Decider | None = None

    def use_llm_decisions(self, decider: decide.Decider) -> None:
        """Ask ``decider`` (Claude) how each new memory relates to the stored ones the rules leave undecided,
        after the extraction pass of that memory (``use_llm``)."""
        self._decider = decider

    def _apply_llm(
        self, job: llm.Job, result: llm.LlmResult | None, error: llm.ExtractionFailed | None
    ) -> None:
        super()._apply_llm(job, result, error)
        abandoned = (
            result is None and error is None
        )  # queued at shutdown (``Engine.close``): ask nothing more
        if self._decider is not None and job.extractor is None and not abandoned:
            try:
                self._decide(job, self._decider)
            except Exception:  # a bug here must not cost the worker: the memory stays as it was
                log.exception("the reconcile decision of %s failed", job.memory_id)

    def _decide(self, job: llm.Job, decider: decide.Decider) -> None:
        candidates = self._candidates(job)
        if not candidates:
            return
        decided: decide.Decided | None = None
        failure: ExtractionFailed | None = None
        try:
            decided = decider.decide(
                job.content, written_at=job.event_time, speaker=job.speaker, candidates=candidates
            )
        except ExtractionFailed as exc:
            failure = exc
        except Exception as exc:  # an SDK surprise: still visible in memory_read
            log.exception("asking for the reconcile decision of %s failed", job.memory_id)
            failure = ExtractionFailed(f"unexpected {type(exc).__name__}", Usage(), 0)
        target = decide.Job(job.memory_id, job.scopes, job.event_time, job.access)

        def intent(tx: Tx) -> decide.Applied:
            applied = decide.apply(self.graph, tx, target, decided, failure)
            for mid in applied.superseded:
                tx.record("supersede", mid)
            # what the superseded memories justified (digests, derived relations) goes in this transaction
            self._sources_changed(tx, applied.superseded, withdraw=True)
            return applied

        applied = self.reconciler.submit(intent)
        if applied.superseded or applied.contradicted:
            # Changes made on the writer's behalf after its call returned: audited under its name, with the
            # model that decided them (ids and counts, never the model's reason or any content).
            self.audit.record(
                "reconcile",
                principal=job.principal,
                client=job.client,
                ids=[job.memory_id, *applied.superseded, *applied.contradicted],
                by=decided.model if decided is not None else "",
                superseded=len(applied.superseded),
                contradicted=len(applied.contradicted),
            )

    def _candidates(self, job: llm.Job) -> list[decide.Candidate]:
        """Current memories sharing a scope with ``job``'s that its writer may read and that the rules left
        undecided, at most ``decide.MAX_CANDIDATES``, those sharing a statement first."""
        self.reconciler.wait_fresh()  # the words index holds every memory committed before this one
        with self.graph.read() as conn:
            if not self.graph.live_state(conn, job.memory_id):
                return []
            targets = decide.scopes_now(self.graph, conn, job.memory_id, job.scopes)
            if not targets:
                return []
            settled = {
                job.memory_id,
                *self.graph.contradictions(conn, job.memory_id),
                *self.graph.chain(conn, job.memory_id),
            }
            why: dict[str, str] = {}
            for r in self.graph.relation_history(conn, [job.memory_id]):
                if r.valid_to is not None or r.predicate in self.functional or r.predicate in FIXED:
                    continue  # the rules decide these
                for o in self.graph.open_relations(conn, r.subject, [r.predicate], other_than=r.object):
                    if (
                        o.memory_id not in settled
                        and targets & set(o.scopes)
                        and job.access.can_read(o.scopes)
                    ):
                        why.setdefault(o.memory_id, f"{r.subject} {r.predicate} {o.object_name}")
            found = self.text.search(
                job.content, scopes=sorted(targets), k=NEAR_K, live_only=True, kinds=None
            )
            ids = [i for i, _ in found if i not in settled and i not in why]
            vector = self.graph.vector_of(conn, job.memory_id)
            if ids and vector is not None:
                new = np.asarray(vector, dtype=np.float32)
                new /= float(np.linalg.norm(new)) or 1.0
                for i, (_content, kind, vec) in self.graph.current_texts(conn, ids, _now()).items():
                    if kind == MemoryKind.SUMMARY.value:
                        continue
                    old = np.asarray(vec, dtype=np.float32)
                    cos = float(new @ old) / (float(np.linalg.norm(old)) or 1.0)
                    if cos >= NEAR_COSINE:
                        why.setdefault(i, "close wording")
            held = self.graph.fetch(conn, list(why))
            out = [
                decide.Candidate(i, m.content, m.event_time, reason)
                for i, reason in why.items()
                if (m := held.get(i)) is not None
                and m.status is Status.CURRENT
                and m.kind not in decide.NOT_DECIDED
                and targets & set(m.scopes)
                and job.access.can_read(m.scopes)
            ]
        return out[: decide.MAX_CANDIDATES]
