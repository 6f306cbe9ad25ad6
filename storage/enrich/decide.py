"""The reconcile decision by a model, where the rules cannot decide: plain values, prompt and validation, no SDK.

The rules (``storage.enrich.reconcile``) settle functional and fixed predicates, negations and likes vs dislikes
inside the write. What they leave open goes to Claude after the commit (``storage.engine.decisions``): stored
memories that state another value for a predicate with many values ("Ana likes jazz" / "Ana likes rock"), or
whose text is close to the new one. For each such *candidate* Claude calls ``record_decision`` once, saying
whether the new memory adds to it, updates it (then when the change took effect, if the text says), contradicts
it or repeats it, with a short reason. ``parse_decision`` accepts only the candidates it was shown; anything
else fails the whole decision and nothing is applied. ``apply`` records the outcome through the one writer as
the rules record theirs: ``SUPERSEDES`` with the old validity closed, ``CONTRADICTS``, or a note for a repeat.
``storage.enrich.decide_claude`` sends the request.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple, Protocol

from storage.domain.models import MemoryKind
from storage.enrich.reconcile import Access
from storage.enrich.results import ExtractionFailed, Usage
from storage.ports.canonical import CanonicalStore, Session
from storage.sync.reconciler import Tx

__all__ = [
    "INSTRUCTIONS",
    "MAX_CANDIDATES",
    "NOT_DECIDED",
    "SCHEMA",
    "TOOL_NAME",
    "VERDICTS",
    "Candidate",
    "Decided",
    "Decider",
    "Job",
    "Verdict",
    "apply",
    "parse_decision",
    "request_text",
    "scopes_now",
    "shown_ids",
]

VERDICTS = ("adds", "updates", "contradicts", "repeats")
MAX_CANDIDATES = 8  # stored memories shown to the model per new memory, at most
MAX_REASON = 200  # characters of a reason kept
SHORT = 12  # hex characters of an id shown to the model
NOT_DECIDED = frozenset({MemoryKind.MESSAGE, MemoryKind.SUMMARY})
"""Kinds never shown as candidates, so never superseded or linked by the model: a conversation message is a
record of what was said (it cannot stop being true), a digest is rebuilt from its messages."""
DECIDED_BY = "decided by claude"
TOOL_NAME = "record_decision"
TOOL_DESCRIPTION = "Record, for each stored memory shown, how the new memory relates to it."
INSTRUCTIONS = """You reconcile one new memory with stored memories of the same user, for a long-term memory
store. Call the record_decision tool exactly once, with one decision for each stored memory shown.

For each stored memory (named by its id) decide how the NEW memory relates to it:
- adds: both can be true at once; the new memory adds information (the default when unsure).
- updates: the new memory replaces what the stored one says: it is no longer true, the new value is. Give
  effective (ISO 8601 date) only when the new memory says when the change happened.
- contradicts: both cannot be true, and the new memory does not say that things changed.
- repeats: the new memory says the same thing as the stored one, in other words.

reason: at most 20 words, saying why, without quoting either memory. Use only the ids shown."""
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decisions": {
            "type": "array",
            "maxItems": MAX_CANDIDATES,
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "relation": {"type": "string", "enum": list(VERDICTS)},
                    "reason": {"type": "string"},
                    "effective": {"type": "string", "description": "ISO 8601 date, updates only"},
                },
                "required": ["id", "relation", "reason"],
            },
        }
    },
    "required": ["decisions"],
}


@dataclass(frozen=True, slots=True)
class Candidate:
    """A stored memory shown to the model: one the writer may read, sharing a scope with the new memory."""

    id: str
    content: str
    written_at: datetime
    why: str  # what makes it a candidate ("Ana —likes→ jazz", "close wording")


@dataclass(frozen=True, slots=True)
class Verdict:
    id: str  # the candidate's full id
    relation: str  # one of VERDICTS
    reason: str  # the model's; validated, never stored (it may quote any memory it was shown)
    effective: datetime | None = None


@dataclass(frozen=True, slots=True)
class Decided:
    verdicts: tuple[Verdict, ...]
    usage: Usage
    model: str


class Decider(Protocol):
    model: str

    def decide(
        self, content: str, *, written_at: datetime, speaker: str | None, candidates: Sequence[Candidate]
    ) -> Decided:
        """The model's verdicts on ``candidates``; ExtractionFailed when it could not be asked or answered
        badly (nothing is then applied)."""
        ...


def shown_ids(candidates: Sequence[Candidate]) -> dict[str, str]:
    """Each candidate's id as shown to the model: its first ``SHORT`` characters, or the whole id when another
    candidate starts the same way (ids are content hashes: a writer can grind two that share a prefix)."""
    starts = collections.Counter(c.id[:SHORT] for c in candidates)
    return {c.id: c.id[:SHORT] if starts[c.id[:SHORT]] == 1 else c.id for c in candidates}


def scopes_now(graph: CanonicalStore, conn: Session, memory_id: str, written: Sequence[str]) -> set[str]:
    """The scopes of ``written`` the new memory is still in: a scope it was taken out of since the write is no
    longer one where the model may compare it or change anything (its readers would see a memory closed by
    one they cannot read)."""
    held = graph.fetch(conn, [memory_id]).get(memory_id)
    return set(written) & set(held.scopes) if held is not None else set()


def request_text(
    content: str, *, written_at: datetime, speaker: str | None, candidates: Sequence[Candidate]
) -> str:
    """The per-memory part of the request: the new memory, then each candidate under its short id."""
    ids = shown_ids(candidates)
    shown = "\n".join(
        f'<stored id="{ids[c.id]}" written="{c.written_at.date().isoformat()}" why="{c.why}">\n'
        f"{c.content}\n</stored>"
        for c in candidates
    )
    return (
        f"Speaker: {speaker or 'unknown'}\nWritten at: {written_at.isoformat()}\n\n"
        f"<new>\n{content}\n</new>\n\n{shown}"
    )


def parse_decision(
    arguments: Any, candidates: Sequence[Candidate], usage: Usage, attempt: int
) -> tuple[Verdict, ...]:
    """The verdicts of one ``record_decision`` call's input. ExtractionFailed on anything malformed: not a
    list, an unknown relation, an id that is not one of ``candidates`` (the model may name no other memory),
    one decided twice, an effective time that is not a date."""
    raw = arguments.get("decisions") if isinstance(arguments, dict) else None
    if not isinstance(raw, list) or len(raw) > MAX_CANDIDATES:
        raise ExtractionFailed(
            f"malformed answer: 'decisions' is not a list of at most {MAX_CANDIDATES}", usage, attempt
        )
    shown = shown_ids(candidates)
    out: dict[str, Verdict] = {}
    for n, item in enumerate(raw):
        if (
            not isinstance(item, dict)
            or item.get("relation") not in VERDICTS
            or not isinstance(item.get("id"), str)
            or not isinstance(item.get("reason"), str)
        ):
            raise ExtractionFailed(f"malformed answer: decision {n} is not a valid decision", usage, attempt)
        given = item["id"].strip().lower()
        named = [full for full, short in shown.items() if given.startswith(short) and full.startswith(given)]
        full = named[0] if len(named) == 1 else None
        if full is None:
            raise ExtractionFailed(
                f"malformed answer: decision {n} names a memory it was not shown", usage, attempt
            )
        if full in out:
            raise ExtractionFailed(f"malformed answer: decision {n} repeats a memory", usage, attempt)
        effective = _date(item.get("effective")) if item["relation"] == "updates" else None
        if item["relation"] == "updates" and item.get("effective") not in (None, "") and effective is None:
            raise ExtractionFailed(
                f"malformed answer: decision {n} has an invalid effective date", usage, attempt
            )
        reason = " ".join(item["reason"].split())[:MAX_REASON] or "no reason given"
        out[full] = Verdict(full, item["relation"], reason, effective)
    return tuple(out.values())


def _date(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        when = datetime.fromisoformat(value.strip())
        return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    except (ValueError, OverflowError):  # year 1 or 9999 with an offset leaves the calendar in UTC
        return None


class Applied(NamedTuple):
    superseded: list[str]
    contradicted: list[str]


@dataclass(frozen=True, slots=True)
class Job:
    """What ``apply`` needs of the new memory: its id, scopes, when it says it happened, and its writer's
    access (``storage.enrich.reconcile.Access``)."""

    memory_id: str
    scopes: tuple[str, ...]
    event_time: datetime
    access: Access


def apply(
    graph: CanonicalStore, tx: Tx, job: Job, decided: Decided | None, error: ExtractionFailed | None
) -> Applied:
    """In the writer: apply the verdicts for ``job``'s memory, or record why there are none. Returns the ids
    of the memories it superseded and of those it linked as contradicted. Every named memory is checked again here: gone from the new memory's
    scopes or from what its writer may read, and the whole decision fails, nothing applied. An update of a
    memory the writer may not change (one of its scopes is not writable) is linked as a contradiction instead,
    as the rules do. The outcome joins the memory's enrichment record (``memory_read``), tokens added."""
    if not graph.live_state(tx.conn, job.memory_id):
        return Applied([], [])  # erased or no longer current: nothing to say about it
    changed: list[str] = []
    contradicted: list[str] = []
    usage = decided.usage if decided is not None else (error.usage if error is not None else Usage())
    if decided is None:
        why = error.reason if error is not None else "not run"
        note = f"reconcile decision failed ({why}); nothing changed"
    else:
        held = graph.fetch(tx.conn, [v.id for v in decided.verdicts])
        targets = scopes_now(graph, tx.conn, job.memory_id, job.scopes)
        if any(
            v.id not in held
            or held[v.id].kind in NOT_DECIDED
            or not targets & set(held[v.id].scopes)
            or not job.access.can_read(held[v.id].scopes)
            for v in decided.verdicts
        ):
            note = "reconcile decision failed (it named a memory not in the new memory's readable scopes); nothing changed"
        else:
            # Counts only: the record outlives the memories it would name (an erase of one of them takes the
            # SUPERSEDES / CONTRADICTS edge, which memory_read shows to whoever may read both), and the model's
            # reason may quote any memory it was shown, so it is kept nowhere.
            counts: collections.Counter[str] = collections.Counter()
            new = graph.fetch(tx.conn, [job.memory_id])[job.memory_id]
            began = new.valid_from  # given by the writer, else when it was written
            for v in decided.verdicts:
                if v.relation == "adds":
                    continue
                if not graph.live_state(tx.conn, v.id):
                    counts["left alone (no longer current)"] += 1
                    continue
                if v.relation == "repeats":
                    counts["repeats"] += 1
                elif (
                    v.relation == "contradicts"
                    or not job.access.can_write(held[v.id].scopes)
                    or held[v.id].valid_from > began
                ):
                    # An update of a memory true from a later time than the new one would hide the newer value
                    # behind the older (and close it before it began): a conflict, as the rules record it.
                    graph.contradict(tx.conn, job.memory_id, v.id, DECIDED_BY, tx.now)
                    contradicted.append(v.id)
                    counts[
                        "contradicts"
                        if v.relation == "contradicts"
                        else "contradicts (an update you may not make)"
                        if not job.access.can_write(held[v.id].scopes)
                        else "contradicts (the stored one is newer)"
                    ] += 1
                else:
                    at = min(v.effective or job.event_time, tx.now)
                    if began > tx.now:
                        at = began  # a planned change: the stored value holds until the new one starts
                    for r in graph.relation_history(tx.conn, [v.id]):
                        if r.valid_to is None:
                            graph.close_relation(
                                tx.conn,
                                v.id,
                                r.subject,
                                r.predicate,
                                r.object,
                                valid_to=at,
                                ended_by=job.memory_id,
                            )
                    if at > tx.now:
                        # Current until then, as the rules leave it (``storage.enrich.reconcile``).
                        graph.end_validity(tx.conn, v.id, valid_to=at, by=job.memory_id)
                        counts["updates from a later date"] += 1
                        continue
                    # Never the model's own words: it may quote any memory it was shown, from a scope neither
                    # end is in, and the edge goes wherever these two go (an export of their scope).
                    graph.supersede(
                        tx.conn,
                        v.id,
                        job.memory_id,
                        reason=f"{DECIDED_BY}: updates",
                        at=tx.now,
                        close_valid_to=at,
                    )
                    changed.append(v.id)
                    counts["updates"] += 1
            parts = [f"{what} {n}" for what, n in counts.items() if n]
            note = f"{DECIDED_BY}: " + (", ".join(parts) if parts else "adds to what is stored")
            if any(n for what, n in counts.items() if what.startswith(("updates", "contradicts"))):
                tx.record("enrich", job.memory_id)  # contradiction links and closed relations: readers reload
    row = graph.enrichment_of(tx.conn, job.memory_id)
    model = decided.model if decided is not None else ""
    merged: dict[str, Any] = {
        "status": "done",
        "detail": note,
        "model": model,
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
    }
    if row is not None:
        merged = dict(row) | {"detail": f"{row['detail']}; {note}"}
        if not merged.get("model"):
            merged["model"] = model
    for key, add in (
        ("input_tokens", usage.input_tokens),
        ("output_tokens", usage.output_tokens),
        ("cache_read_tokens", usage.cache_read_tokens),
        ("cache_write_tokens", usage.cache_write_tokens),
    ):
        merged[key] = int(merged.get(key) or 0) + add
    graph.record_enrichment(tx.conn, job.memory_id, merged | {"at": tx.now})
    return Applied(changed, contradicted)
