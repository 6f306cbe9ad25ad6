"""Conversations in, and their digests: messages stored at once, a digest per conversation built after the commit.

``write_conversation`` stores each message as a memory of kind ``message`` (its send time as event time, the
role and speaker in its metadata) in one transaction: every message or none. A message's id is salted by its
conversation (its scopes and id) and its place in it (the client's message id, else its role and time), so
re-sending it is a ``duplicate`` while the same words said in another conversation, or again later in this
one, are messages of their own. The messages join a conversation node in the canonical store; the background
consolidator (``storage.enrich.consolidate``) reads the conversations changed since their digest from there
and rebuilds each digest once the conversation is quiet. A digest is a memory of kind ``summary`` in the
scopes every one of its messages belongs to (so it never shows a message to someone who may not read it),
naming its sources in its metadata; recall lets a digest's match lift its conversation's best messages
instead of showing the digest (``storage.recall.pipeline``). Erasing a message erases the digest with it and
schedules a new one from the messages left.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import hmac
import threading
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta, tzinfo
from typing import IO, TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from scopes import LOCAL_PRINCIPAL, Level, Principal
from storage.domain import validation as v
from storage.domain.errors import InvalidInput, MnemographError
from storage.domain.models import (
    MAX_CONVERSATION_ID_CHARS,
    MAX_MESSAGES,
    ROLES,
    AmendReceipt,
    ConversationReceipt,
    EraseReceipt,
    LinkReceipt,
    Memory,
    MemoryKind,
    MessageIn,
    Provenance,
    PurgeReceipt,
    RetireReceipt,
    WriteItem,
    WriteReceipt,
)
from storage.domain.records import NewMemory
from storage.engine import backup as snapshots
from storage.engine.erasure import _Erasure
from storage.engine.state import _now, _Prepared, content_id, log
from storage.enrich import days, llm
from storage.enrich import digest as digests
from storage.enrich.consolidate import DEFAULT_QUIET_S, Consolidator
from storage.enrich.results import ExtractionFailed
from storage.ports.canonical import Session
from storage.sync.reconciler import Tx

if TYPE_CHECKING:  # the Anthropic SDK loads only with an API key (server._engine.write_time)
    from storage.enrich.digest_claude import ClaudeDigester

MAX_SOURCES_LISTED = 100  # source ids a digest's metadata names (all of them count in ``messages``)
DIGEST_PRINCIPAL = Provenance("mnemograph", "consolidator", "digest")


def conversation_key(conversation: str, scopes: Sequence[str], secret: str = "") -> str:
    """The conversation node's key: a hash of the caller's id and the scopes it was written to (the same id in
    other scopes is another conversation, with its own digest), keyed by the store's ``secret``.

    Messages' ids are salted by it, and a reader of one of those scopes sees a message whole (its words, id,
    time, role and conversation id): without the secret, it could hash guesses of the other scopes' names and
    confirm one, and that the conversation went there too. ``secret`` "" is the unsalted key of stores made
    before secrets, which their conversations keep (``_Conversations._conversation``)."""
    data = b"conversation\x00" + ",".join(sorted(scopes)).encode() + b"\x00" + conversation.encode("utf-8")
    if secret:
        return hmac.new(bytes.fromhex(secret), data, hashlib.sha256).hexdigest()[:32]
    return hashlib.sha256(data).hexdigest()[:32]


class _Conversations(_Erasure):
    _consolidator: Consolidator | None = None
    _consolidator_off = False  # stop_consolidation was called
    _digester: ClaudeDigester | None = None  # Claude writes the digests (use_llm_digests)
    _digest_ids: dict[str, str]  # digest id -> conversation key (a superset of the stored digests)
    _day_quiet: float = days.DEFAULT_DAY_QUIET_S
    _day_run: dict[str, list[str]] | None = (
        None  # day key -> memories of the bulk run being written (writer only)
    )
    _zones: dict[str, tzinfo] | None = None  # scope -> its time zone, for those that set one (else UTC)

    # -- keys ----------------------------------------------------------------------------------------

    def _conversation(self, conn: Session, conversation: str, scopes: Sequence[str]) -> str:
        """The key of the conversation ``conversation`` written to ``scopes``: keyed by the store's secret,
        unless it is a conversation a store made before secrets already holds under its unsalted key (re-sent
        messages stay duplicates and the conversation keeps one digest). Only new keys are made salted, so an
        old conversation is the only one with its key."""
        secret = self.graph.id_secret(conn)
        key = conversation_key(conversation, scopes, secret)
        if secret and self.graph.conversation_state(conn, key) is None:
            old = conversation_key(conversation, scopes)
            if self.graph.conversation_state(conn, old) is not None:
                return old
        return key

    # -- lifecycle -----------------------------------------------------------------------------------

    def _start_consolidator(self, quiet: float = DEFAULT_QUIET_S) -> None:
        self._digest_ids = {}
        self._digest_lock = threading.Lock()
        with self.graph.read() as conn:
            self._digest_ids.update(self.graph.all_digests(conn))
        self.digests = self
        self._consolidator = Consolidator(
            self._pending_conversations, self._build_digest, quiet=quiet, hold=self._day_hold
        )
        self._consolidator.start()  # its first look at the store finds work queued before a stop or a crash

    def _stop_consolidator(self) -> None:
        if self._consolidator is not None:
            self._consolidator.close()

    def stop_consolidation(self) -> None:
        """Turn the background consolidator off (``MNEMOGRAPH_DIGESTS=off``): conversations still record that
        they changed, and their digests are built when it is on again (or by ``consolidate``). Existing
        digests stay in use by recall."""
        self._stop_consolidator()
        self._consolidator_off = True

    @property
    def digest_quiet(self) -> float:
        """Seconds a conversation must go without new messages before its digest is (re)built."""
        return self._consolidator.quiet if self._consolidator is not None else DEFAULT_QUIET_S

    @digest_quiet.setter
    def digest_quiet(self, seconds: float) -> None:
        if self._consolidator is not None:
            self._consolidator.quiet = max(0.0, float(seconds))
            self._consolidator.wake()

    @property
    def day_digest_quiet(self) -> float:
        """Seconds a scope must go without a new plain memory before the digest of its day, not over yet, is
        (re)built; a day that is over is digested anyway (``storage.enrich.days``)."""
        return self._day_quiet

    @day_digest_quiet.setter
    def day_digest_quiet(self, seconds: float) -> None:
        self._day_quiet = max(0.0, float(seconds))
        if self._consolidator is not None:
            self._consolidator.wake()

    def _day_hold(self, key: str, changed: datetime) -> datetime | None:
        if not days.is_period_key(key):
            return None
        tag = days.tag_of(key)
        zone = next((z for s, z in self._zone_map().items() if days.scope_tag(s) == tag), UTC)
        return days.hold(key, changed, self._day_quiet, zone)

    # -- a scope's time zone (its days and weeks) -----------------------------------------------------

    def _zone_map(self) -> dict[str, tzinfo]:
        """Scope -> time zone, read once from the store, then kept by ``set_scope_time_zone`` (a write reads
        no more than a dict to find its local day)."""
        if self._zones is None:
            with self.graph.read() as conn:
                self._zones = {
                    s: ZoneInfo(z) for s, z in self.graph.scope_zones(conn).items() if days.known_zone(z)
                }
        return self._zones

    def _reload_zones(self) -> None:
        """The store's zones changed under the cache (an import set some): read them again when next needed."""
        self._zones = None

    def _zone(self, scope: str) -> tzinfo:
        return self._zone_map().get(scope, UTC)

    def scope_time_zone(self, scope: str, *, principal: Principal = LOCAL_PRINCIPAL) -> str:
        """The IANA name of the zone ``scope``'s days and weeks are counted in ("UTC" unless set). NotFound for a
        scope that does not exist (a typo, a purged scope), after the same authorization as for one that does."""
        sid = v.scope(scope)
        self._authorize(principal, [sid], Level.READ, "read")
        self._require_scope(sid)
        return str(self._zone(str(sid)))

    def set_scope_time_zone(self, scope: str, zone: str, *, principal: Principal = LOCAL_PRINCIPAL) -> str:
        """Count ``scope``'s days and weeks in ``zone`` (an IANA name such as ``Asia/Tokyo``; ``UTC`` resets).
        Needs admin on the scope. Its memories are regrouped by the local day each was recorded on, in the same
        transaction: the old day and week digests go, and new ones are built by the consolidator. A bad zone is
        refused and nothing changes. Returns the zone now in force."""
        sid = v.scope(scope)
        name = zone.strip() if isinstance(zone, str) else ""
        if not days.known_zone(name):
            meant = days.zone_spelled(name)
            raise InvalidInput(
                f"{str(zone)[:60]!r} is not a time zone this machine knows",
                hint=(f"did you mean {meant}? " if meant else "")
                + "give an IANA name such as Europe/Lisbon, America/New_York or Asia/Tokyo (UTC resets it); "
                "nothing was changed",
            )
        self._authorize(principal, [sid], Level.ADMIN, "set the time zone of")
        if self.graph.shared:
            raise InvalidInput(
                "scope time zones are not available when the canonical store is a shared FalkorDB graph",
                hint="nothing was changed: day and week digests are not built on a shared graph yet",
            )
        self._require_scope(sid)
        target = ZoneInfo(name)
        scope_id = str(sid)
        if str(self._zone(scope_id)) == str(target):
            return str(target)
        tag = days.scope_tag(scope_id)

        def regroup(tx: Tx) -> None:
            groups = [
                (k, ids) for k, ids in self.graph.export_conversations(tx.conn)
                if days.is_period_key(k) and days.tag_of(k) == tag
            ]  # fmt: skip
            members = sorted({mid for k, ids in groups if days.is_day_key(k) for mid in ids})
            for key, _ids in groups:
                state = self.graph.conversation_state(tx.conn, key)
                if state is not None and state[1] is not None:
                    if self.graph.live_state(tx.conn, state[1]) is not None:
                        self._drop_digest(tx, state[1])
                    self._digest_ids.pop(state[1], None)
            self.graph.drop_conversations(tx.conn, [k for k, _ in groups])
            regrouped: dict[str, list[str]] = {}
            for m in self.graph.fetch(tx.conn, members).values():
                regrouped.setdefault(
                    days.day_key(scope_id, days.local_day(m.recorded_at, target)), []
                ).append(m.id)
            for key, ids in regrouped.items():
                self.graph.join_conversation(tx.conn, key, ids, tx.now)
            self.graph.set_scope_zone(tx.conn, scope_id, None if name == "UTC" else str(target))
            zones = dict(self._zone_map())
            if name == "UTC":
                zones.pop(scope_id, None)
            else:
                zones[scope_id] = target
            self._zones = zones  # in the writer: every later write counts its day in the new zone

        with self._digests_kept_on_failure():
            self.reconciler.submit(regroup)
        self._wake_consolidator()
        return str(target)

    def consolidate(self) -> int:
        """Build every pending digest now, without waiting for the quiet time. Returns how many were built."""
        return 0 if self._consolidator is None else self._consolidator.flush()

    def wait_digested(self, timeout: float = 30.0) -> bool:
        """Block until the background consolidator has digested every conversation (True; False on timeout)."""
        if self._consolidator is None or self._consolidator_off:
            now = datetime.now(UTC)  # a day still running is not waiting yet (``storage.enrich.days``)
            held = [(k, self._day_hold(k, c)) for k, c in self._pending_conversations()]
            return all(h is not None and h > now for _, h in held)
        return self._consolidator.wait_idle(timeout)

    def rebuild_digests(self) -> int:
        """Mark every conversation changed and rebuild all digests now (``mnemograph digests --rebuild``)."""
        with self.graph.read() as conn:
            keys = list(dict.fromkeys(self.graph.all_digests(conn).values()))
            keys += [k for k, _ in self.graph.pending_conversations(conn) if k not in keys]
        if keys:
            self.reconciler.submit(lambda tx: self.graph.touch_conversations(tx.conn, keys, tx.now))
        return self.consolidate()

    def is_digest(self, memory_id: str) -> bool:
        return memory_id in self._digest_ids

    def is_day_digest(self, memory_id: str) -> bool:
        """A scope's day or week digest (``storage.enrich.days``), not a conversation's."""
        key = self._digest_ids.get(memory_id)
        return key is not None and days.is_period_key(key)

    def is_derived(self, memory_id: str) -> bool:
        """A derived relation (``storage.engine.derived`` says which)."""
        return False

    def digest_sources(self, conn: Session, memory_id: str) -> list[str] | None:
        """The messages a digest was built from (its conversation's), or None if ``memory_id`` is no digest."""
        key = self._digest_ids.get(memory_id)
        return None if key is None else self.graph.conversation_members(conn, key)

    # -- conversations in ----------------------------------------------------------------------------

    def write_conversation(
        self,
        conversation: str,
        messages: Sequence[MessageIn],
        scopes: Sequence[str],
        *,
        principal: Principal = LOCAL_PRINCIPAL,
        extractor: llm.Extractor | None = None,
    ) -> ConversationReceipt:
        """Store a conversation's messages (all of them, or none on a bad one), recallable on return; the
        digest is built later in the background. Re-sending a message already stored is a ``duplicate``.
        ``extractor``: the writer's own model (MCP sampling) for the messages' pass after the commit."""
        conv = v.text(conversation, "conversation", limit=MAX_CONVERSATION_ID_CHARS)
        if not isinstance(messages, Sequence) or not messages:
            raise InvalidInput("messages is empty", hint="send at least one message")
        if len(messages) > MAX_MESSAGES:
            raise InvalidInput(
                f"{len(messages)} messages given; at most {MAX_MESSAGES} per call",
                hint="send the conversation in several calls with the same conversation id",
            )
        targets = [str(s) for s in v.scope_list(scopes)]
        self._authorize(principal, v.scope_list(targets), Level.WRITE, "write")
        if self.graph.shared:  # docs/scale-out.md: not built for a canonical store several nodes share yet
            raise InvalidInput(
                "conversation_write is not available when the canonical store is a shared FalkorDB graph",
                hint="nothing was written: write each message with memory_write (kind message, event_time its time)",
            )
        with self.graph.read() as conn:
            key = self._conversation(conn, conv, targets)
        now = _now()
        prepared: list[_Prepared] = []
        for n, m in enumerate(messages):
            try:
                prepared.append(self._prepare_message(m, conv, key, targets, now, principal))
            except InvalidInput as exc:
                fix = f"{exc.hint}; " if exc.hint else ""
                raise InvalidInput(
                    f"message {n}: {exc.message}",
                    hint=f"{fix}nothing was written: fix it and send the call again",
                ) from None
        with self.graph.read() as conn:
            known = self.graph.fetch(conn, [p.id for p in prepared])
        todo = [p for p in prepared if p.id not in known]
        if todo:
            for p, vec in zip(todo, self.embedder.embed([p.content for p in todo]), strict=True):
                p.vector = [float(x) for x in vec]
        intents = [self._write_intent(p, principal) for p in prepared]

        def all_or_nothing(tx: Tx) -> list[WriteReceipt]:
            receipts: list[WriteReceipt] = []
            try:
                for intent in intents:
                    receipts.append(intent(tx))
                self.graph.join_conversation(tx.conn, key, [r.id for r in receipts], tx.now)
            except MnemographError as exc:
                if tx.changes:  # something was already written in this transaction: roll it all back
                    raise RuntimeError(f"conversation write rolled back: {exc.message}") from exc
                raise
            return receipts

        receipts = self.reconciler.submit(all_or_nothing)
        for p, r in zip(prepared, receipts, strict=True):
            if r.status == "added":
                self.enrich_later(r, p, now, principal, extractor)
        self._wake_consolidator()
        self._after_write(targets, [e for p in prepared for e in p.entities])
        changed = [r for r in receipts if r.status != "duplicate"]
        if changed:
            self.audit.record(
                "write",
                principal=principal.name,
                client=principal.client,
                ids=[r.id for r in changed],
                scopes=sorted(targets),
                added=sum(r.status == "added" for r in changed),
                linked=sum(r.status == "linked" for r in changed),
            )
        shown = tuple(self._shown_write(r, targets, principal) for r in receipts)
        return ConversationReceipt(conv, shown, "off" if self._consolidator_off else "scheduled")

    def write_many(
        self,
        items: Sequence[WriteItem],
        *,
        principal: Principal = LOCAL_PRINCIPAL,
        extractor: llm.Extractor | None = None,
        near: str | None = None,
    ) -> list[WriteReceipt]:
        receipts = super().write_many(items, principal=principal, extractor=extractor, near=near)
        # After the commit: a plain memory joined its day's group, and a containment statement may have joined a
        # derivation (storage.engine.derived); the worker looks again once they can be due. Without it a
        # derivation found at write time waited for whatever woke the worker next (a conversation, a restart,
        # `mnemograph digests`): a running server never built "Grand Palm located in Rajasthan".
        self._wake_consolidator()
        return receipts

    def _apply_llm(self, job: llm.Job, result: llm.LlmResult | None, error: ExtractionFailed | None) -> None:
        super()._apply_llm(job, result, error)
        self._wake_consolidator()  # relations the model read may have joined derivations (as a write's do)

    def _added(
        self, tx: Tx, p: _Prepared, principal: Principal, cur: str, made: Any = None, moved: Any = None
    ) -> WriteReceipt:
        # A plain memory joins its scopes' groups of the day, in its own transaction: the store is the queue of
        # the day digests, so one due when the process stops is built after the next start.
        receipt = super()._added(tx, p, principal, cur, made, moved)
        if p.kind in days.DAY_KINDS and not self.graph.shared:
            for scope in p.scopes:
                key = days.day_key(scope, days.local_day(tx.now, self._zone(scope)))
                if self._day_run is not None:  # a bulk write: joined per day at the end of its run
                    self._day_run.setdefault(key, []).append(cur)
                else:
                    self.graph.join_conversation(tx.conn, key, [cur], tx.now)
        return receipt

    def _insert_run(self, tx: Tx, run: Sequence[_Prepared], principal: Principal) -> list[WriteReceipt]:
        # A bulk write's memories join their days a day at a time (a few statements per run, not per memory).
        self._day_run = {}
        try:
            out = super()._insert_run(tx, run, principal)
            for key, ids in self._day_run.items():
                self.graph.join_conversation(tx.conn, key, ids, tx.now)
            return out
        finally:
            self._day_run = None

    def _prepare_message(
        self, m: MessageIn, conv: str, key: str, targets: list[str], now: datetime, principal: Principal
    ) -> _Prepared:
        if m.role not in ROLES:
            raise InvalidInput(f"role {m.role!r} is not one of {', '.join(ROLES)}")
        meta: dict[str, object] = {"conversation": conv, "role": m.role}
        if m.speaker is not None:
            meta["speaker"] = v.text(m.speaker, "speaker", limit=200)
        elif m.role != "user":
            meta["speaker"] = m.role  # "I" in an assistant's message is not the user
        if m.id is not None:
            meta["message_id"] = v.text(m.id, "message id", limit=MAX_CONVERSATION_ID_CHARS)
        sent = v.when(m.time, "time")
        item = WriteItem(m.content, targets, MemoryKind.MESSAGE.value, event_time=sent or now, metadata=meta)
        p = self._prepare(item, now, principal)
        if sent is None:
            p.event_time_source = "recorded"  # the send time is the time it reached us
        place = f"id:{m.id}" if m.id is not None else f"{m.role}|{sent.isoformat() if sent else ''}"
        p.id = content_id(p.content, salt=f"message:{key}:{place}")
        return p

    # -- digests -------------------------------------------------------------------------------------

    def _pending_conversations(self) -> list[tuple[str, datetime]]:
        with self.graph.read() as conn:
            return self.graph.pending_conversations(conn)

    def _build_digest(self, key: str) -> bool:
        """Build the conversation's digest from its current messages and swap it in, in the writer. Nothing is
        committed if the conversation changed meanwhile (it stays pending) or lost a message (an erasure)."""
        with self.graph.read() as conn:
            state = self.graph.conversation_state(conn, key)
            if state is None:
                return True
            changed, _ = state
            members = self.graph.conversation_members(conn, key)
            records = self.graph.fetch(conn, members)
        live = [m for m in records.values() if m.status.value == "current"]
        if days.is_period_key(key):
            return self._build_day_digest(key, changed, records, live)
        built: digests.Digest | None = None
        by: dict[str, object] = {"digest_by": "offline"}
        scopes: list[str] = []
        if live:
            common = set(live[0].scopes).intersection(*(m.scopes for m in live[1:]))
            scopes = sorted(common)
        if live and scopes:
            conv = str(live[0].metadata.get("conversation", ""))
            said = [
                digests.Said(
                    m.id,
                    str(m.metadata.get("role", "user")),
                    _speaker(m.metadata),
                    m.event_time,
                    m.content,
                    tuple(m.entities),
                )
                for m in live
            ]
            built = digests.build(conv, said, lexicon=self.lexicon)
            how = self._llm_digest(conv, said, built)
            if how is not None:
                built, by = how
        vector = [float(x) for x in self.embedder.embed([built.text])[0]] if built is not None else None

        def swap(tx: Tx) -> None:
            now_state = self.graph.conversation_state(tx.conn, key)
            if now_state is None or now_state[0] != changed:
                return  # changed since we read it: still pending, built again
            if len(self.graph.present(tx.conn, list(records))) < len(records):  # one statement (day digests)
                return  # a message was erased meanwhile: its words must not come back in a digest
            old = now_state[1]
            if old is not None and self.graph.live_state(tx.conn, old) is None:
                old = None  # erased on its own: rebuilt with the same words (and id), it must be stored again
            new_id = None
            if built is not None and vector is not None:
                new_id = content_id(built.text, salt=f"digest:{key}")
            if old is not None and old != new_id and self.graph.live_state(tx.conn, old) is not None:
                self._drop_digest(tx, old)
            if new_id is not None and new_id == old and self.graph.live_state(tx.conn, old) is not None:
                # The same words as before, but its messages may be in other scopes now (a link): so is it.
                self._rescope(tx, old, scopes)
            if new_id is not None and built is not None and vector is not None and new_id != old:
                conv = str(live[0].metadata.get("conversation", ""))
                meta = {
                    "conversation": conv,
                    "digest_of": conv,
                    "messages": len(live),
                    "sources": sorted(m.id for m in live)[:MAX_SOURCES_LISTED],
                    **by,
                }
                new = NewMemory(
                    new_id, built.text, MemoryKind.SUMMARY, DIGEST_PRINCIPAL, meta, built.last, "content",
                    built.first, None, tx.now, vector,
                )  # fmt: skip
                self._insert(tx, new, scopes, list(built.entities), [])
                self._digest_ids[new_id] = key
            self.graph.set_digest(tx.conn, key, new_id, changed or tx.now)

        self.reconciler.submit(swap)
        return True

    def _build_day_digest(
        self, key: str, changed: datetime | None, records: Mapping[str, Memory], live: Sequence[Memory]
    ) -> bool:
        """A scope's day (or week) digest: its current plain memories still in that scope, at least
        ``MIN_DAY_MEMORIES`` of them (a week: ``MIN_WEEK_MEMORIES`` over ``MIN_WEEK_DAYS`` local days); it lives
        in that scope alone (every source is readable there). Offline only. A day, once dealt with, hands its
        memories to its week (in the same transaction), so weeks cost the write path nothing."""
        tag = days.tag_of(key)
        scope = next((s for m in live for s in m.scopes if days.scope_tag(s) == tag), None)
        kept = [m for m in live if scope in m.scopes and m.kind in days.DAY_KINDS]
        weekly = days.is_week_key(key)
        zone = self._zone(scope) if scope is not None else UTC
        if weekly:
            monday = days.week_of(key)
            year, week, _ = monday.isocalendar()
            label = f"{year:04d}-W{week:02d}"
            span = f"{label}, {monday.isoformat()} to {(monday + timedelta(days=6)).isoformat()}"
            enough = (
                len(kept) >= days.MIN_WEEK_MEMORIES
                and len({days.local_day(m.recorded_at, zone) for m in kept}) >= days.MIN_WEEK_DAYS
            )
        else:
            label = span = days.day_of(key).isoformat()
            enough = len(kept) >= days.MIN_DAY_MEMORIES
        built: digests.Digest | None = None
        if scope is not None and enough:
            said = [
                digests.Said(
                    m.id, "user", m.provenance.principal, m.recorded_at, m.content, tuple(m.entities)
                )
                for m in kept
            ]
            if weekly:
                built = digests.build(scope, said, lexicon=self.lexicon, week=span)
            else:
                built = digests.build(scope, said, lexicon=self.lexicon, day=label)
        vector = [float(x) for x in self.embedder.embed([built.text])[0]] if built is not None else None

        def swap(tx: Tx) -> bool:
            now_state = self.graph.conversation_state(tx.conn, key)
            if now_state is None or now_state[0] != changed:
                return False  # changed since we read it: still pending, built again
            # One statement for the lot, on the writer: a lookup per source held every write for 50 s when a
            # day of 5,000 memories was digested at 100,000 (docs/benchmarks/erasure.md, session 21).
            if len(self.graph.present(tx.conn, list(records))) < len(records):
                return False  # a source was erased meanwhile: its words must not come back in a digest
            old = now_state[1]
            if old is not None and self.graph.live_state(tx.conn, old) is None:
                old = None  # erased on its own: stored again
            had = old is not None
            new_id = content_id(built.text, salt=f"digest:{key}") if built is not None else None
            if old is not None and old != new_id and self.graph.live_state(tx.conn, old) is not None:
                self._drop_digest(tx, old)
            if new_id is not None and new_id == old and self.graph.live_state(tx.conn, old) is not None:
                self._rescope(tx, old, [scope] if scope else [])
            if built is not None and vector is not None and scope is not None and new_id != old:
                meta = {
                    "digest_of": f"{scope} {label}",
                    ("week" if weekly else "day"): label,
                    "scope": scope,
                    "memories": len(kept),
                    "sources": sorted(m.id for m in kept)[:MAX_SOURCES_LISTED],
                    "digest_by": "offline",
                }
                assert new_id is not None
                new = NewMemory(
                    new_id, built.text, MemoryKind.SUMMARY, DIGEST_PRINCIPAL, meta, built.last, "content",
                    built.first, None, tx.now, vector,
                )  # fmt: skip
                self._insert(tx, new, [scope], list(built.entities), [])
                self._digest_ids[new_id] = key
            self.graph.set_digest(tx.conn, key, new_id, changed or tx.now)
            if not weekly and scope is not None and records:
                # The day's memories join its week, which is digested after the day (``storage.enrich.days``).
                self.graph.join_conversation(
                    tx.conn, days.week_key(scope, days.day_of(key)), list(records), tx.now
                )
            return had

        # Counted as built when it stored or withdrew a digest (a day too small for one is not).
        made = bool(self.reconciler.submit(swap)) or built is not None
        if not weekly:
            self._wake_consolidator()  # its week may be pending now: the round that built this day read the list
        return made

    def _drop_digest(self, tx: Tx, digest: str) -> None:
        """Delete a digest being replaced or withdrawn, with the versions amended from it by hand: once the
        digest is gone they are tied to its sources by nothing, so erasing a source could no longer find them,
        and they quote its words (an erased memory's words stayed readable, and on disk)."""
        chain, at = [digest], digest
        while True:
            nxt = self.graph.fetch(tx.conn, [at]).get(at)
            if nxt is None or nxt.superseded_by is None or nxt.superseded_by in chain:
                break
            at = nxt.superseded_by
            chain.append(at)
        self.graph.delete_memories(tx.conn, chain)
        for mid in chain:
            tx.record("delete", mid)
            self._digest_ids.pop(mid, None)

    def _rescope(self, tx: Tx, digest: str, scopes: Sequence[str]) -> None:
        held = self.graph.fetch(tx.conn, [digest])[digest].scopes
        wider = [s for s in scopes if s not in held]
        if wider:
            self.graph.link(tx.conn, digest, wider, tx.now)
        for s in held:
            if s not in scopes:
                self.graph.unlink(tx.conn, digest, s)
        if wider or set(held) - set(scopes):
            tx.record("link", digest)

    def export(
        self, out: IO[str], *, scope: str | None = None, vectors: bool = False
    ) -> snapshots.ExportSummary:
        """As ``Consistency.export``, without the digests: they are derived, and an imported copy would no longer
        be erased with its messages. The messages carry their conversation, so the import digests them again."""
        with self._erasure_lock:  # no rewrite's switch meanwhile (``Consistency.export``)
            return snapshots.export(self, out, scope=scope, vectors=vectors, leave_out=set(self._digest_ids))

    def _rejoin_conversations(
        self, imported: Sequence[Memory], known: Mapping[str, Sequence[str]] | None = None
    ) -> None:
        """After an import: imported messages rejoin their conversations, then digested like any changed
        conversation. ``known``: key -> messages, as the file says; a message it does not place (a file
        written before exports said) goes by the conversation id in its metadata and its scopes."""
        groups: dict[str, list[str]] = {key: list(ids) for key, ids in (known or {}).items()}
        placed = {mid for ids in groups.values() for mid in ids}
        for m in imported:
            conv = m.metadata.get("conversation")
            if (
                m.id not in placed
                and m.kind is MemoryKind.MESSAGE
                and isinstance(conv, str)
                and conv
                and "digest_of" not in m.metadata
            ):
                # Such a file comes from a store made before secrets: its messages' ids were salted by the
                # unsalted key, so the conversation keeps that key (and re-sent messages stay duplicates).
                groups.setdefault(conversation_key(conv, m.scopes), []).append(m.id)
            elif m.kind in days.DAY_KINDS and not self.graph.shared:
                # A scope's day is derived (not in the file): the memory rejoins the day it was recorded on.
                for scope in m.scopes:
                    day = days.local_day(m.recorded_at, self._zone(scope))
                    groups.setdefault(days.day_key(scope, day), []).append(m.id)
        if not groups:
            return

        def join(tx: Tx) -> None:
            for key, ids in groups.items():
                self.graph.join_conversation(tx.conn, key, ids, tx.now)

        self.reconciler.submit(join)
        self._wake_consolidator()

    def use_llm_digests(self, digester: ClaudeDigester) -> None:
        """Have Claude write the digests (in the consolidator's thread); the offline digest stays the fallback."""
        self._digester = digester

    def _llm_digest(
        self, conv: str, said: Sequence[digests.Said], offline: digests.Digest
    ) -> tuple[digests.Digest, dict[str, object]] | None:
        """Claude's digest (the offline digest's first line, then Claude's text), with its model and token
        cost; on a failure the offline digest stays and the reason is kept. None when Claude is not set up."""
        if self._digester is None:
            return None
        try:
            got = self._digester.digest(conv, said)
        except ExtractionFailed as exc:
            return offline, {"digest_by": "offline", "llm": f"failed ({exc.reason})"}
        except Exception as exc:  # a bug or an SDK surprise: the offline digest still serves
            log.exception("the LLM digest failed")
            return offline, {"digest_by": "offline", "llm": f"failed (unexpected {type(exc).__name__})"}
        head = offline.text.split("\n", 1)[0]
        text = f"{head}\n{got.text}"[: digests.MAX_DIGEST_CHARS]
        cost = {"tokens_in": got.usage.input_tokens, "tokens_out": got.usage.output_tokens}
        return dataclasses.replace(offline, text=text), {"digest_by": got.model, **cost}

    # -- erasure hooks (storage.engine.erasure) -------------------------------------------------------

    def erase(
        self, id: str, *, confirm: str, reason: str = "", principal: Principal = LOCAL_PRINCIPAL
    ) -> EraseReceipt:
        receipt = super().erase(id, confirm=confirm, reason=reason, principal=principal)
        self._wake_consolidator()  # after the commit: the conversations it touched are pending now
        return receipt

    def purge(self, scope: str, *, confirm: str, principal: Principal = LOCAL_PRINCIPAL) -> PurgeReceipt:
        receipt = super().purge(scope, confirm=confirm, principal=principal)
        self._wake_consolidator()
        return receipt

    # -- a message amended, retired, linked or unlinked (storage.engine.versions, storage.engine.scopes) -----

    def amend(self, id: str, content: str, **kwargs: Any) -> AmendReceipt:
        with self._digests_kept_on_failure():
            receipt = super().amend(id, content, **kwargs)
        self._wake_consolidator()
        return receipt

    def retire(self, id: str, **kwargs: Any) -> RetireReceipt:
        with self._digests_kept_on_failure():
            receipt = super().retire(id, **kwargs)
        self._wake_consolidator()
        return receipt

    def link(self, id: str, scope: str, **kwargs: Any) -> LinkReceipt:
        with self._digests_kept_on_failure():
            receipt = super().link(id, scope, **kwargs)
        self._wake_consolidator()
        return receipt

    def unlink(self, id: str, scope: str, **kwargs: Any) -> LinkReceipt:
        with self._digests_kept_on_failure():
            receipt = super().unlink(id, scope, **kwargs)
        self._wake_consolidator()
        return receipt

    @contextlib.contextmanager
    def _digests_kept_on_failure(self) -> Iterator[None]:
        """``_sources_changed`` forgets a withdrawn digest inside the transaction; if that transaction is then
        refused, the digest is still stored and must still be known as one (recall would show it as a memory)."""
        try:
            yield
        except BaseException:
            with self.graph.read() as conn:
                self._digest_ids.update(self.graph.all_digests(conn))
            raise

    def _sources_changed(
        self, tx: Tx, ids: Sequence[str], *, withdraw: bool, successor: str | None = None
    ) -> None:
        # The conversation is marked changed, so the consolidator rebuilds its digest after the quiet time.
        # When the digest may now say more than its messages do (an amended or retired message's old words) or
        # be readable where one of them no longer is (an unlinked scope), it is deleted in this transaction:
        # until the rebuild, recall has no digest for the conversation rather than a wrong or too wide one.
        sources = [i for i in ids if i not in self._digest_ids]  # a digest changed by hand is not a source
        found = self.graph.conversations_of(tx.conn, sources) if sources else {}
        for key, digest in found.items():
            if withdraw and digest is not None:
                if self.graph.live_state(tx.conn, digest) is not None:
                    self._drop_digest(tx, digest)
                self._digest_ids.pop(digest, None)
                # Digested as of the last change before this one, so the touch below leaves it pending.
                state = self.graph.conversation_state(tx.conn, key)
                self.graph.set_digest(tx.conn, key, None, (state[0] if state else None) or tx.now)
            if successor is not None:
                self.graph.join_conversation(tx.conn, key, [successor], tx.now)
        if found:
            self.graph.touch_conversations(tx.conn, list(found), tx.now)

    def _scope_purged(self, tx: Tx, scope: str) -> None:
        # The scope is gone, so is its time zone, in the purge's transaction (its bytes go with the rewrite);
        # the stored one, even a zone this machine no longer takes (which ``_zone_map`` leaves out).
        if scope in self.graph.scope_zones(tx.conn):
            self.graph.set_scope_zone(tx.conn, scope, None)
            self._zones = {s: z for s, z in self._zone_map().items() if s != scope}
        # So are its days and weeks: those of memories it shared with other scopes stayed (named by the scope's
        # tag, a hash of its name), and a scope made again under that name would get them back.
        if self.graph.shared:
            return  # a shared graph keeps no days or weeks
        tag = days.scope_tag(scope)
        # The scope's own conversations only: reading every membership (``export_conversations``) cost 0.5 s
        # inside the purge's transaction at 100,000 memories, holding every write that long.
        keys = [
            k
            for k in self.graph.conversation_keys_ending(tx.conn, ":" + tag)
            if days.is_period_key(k) and days.tag_of(k) == tag
        ]
        for key in keys:
            state = self.graph.conversation_state(tx.conn, key)
            if state is not None and state[1] is not None:
                if self.graph.live_state(tx.conn, state[1]) is not None:
                    self._drop_digest(tx, state[1])
                self._digest_ids.pop(state[1], None)
        self.graph.drop_conversations(tx.conn, keys)

    def _wake_consolidator(self) -> None:
        if self._consolidator is not None:
            self._consolidator.notify()

    def _derived_from(self, tx: Tx, ids: Sequence[str]) -> tuple[list[str], list[str]]:
        found = self.graph.conversations_of(tx.conn, ids)
        erased = set(ids)
        digests_ = [d for d in found.values() if d is not None and d not in erased]
        for d in [*digests_, *(i for i in ids if i in self._digest_ids)]:
            self._digest_ids.pop(d, None)
        keys = list(found)
        return [d for d in digests_ if self.graph.live_state(tx.conn, d) is not None], keys

    def _sources_erased(self, tx: Tx, keys: Sequence[str]) -> None:
        # The conversation is marked changed: its digest is rebuilt from the messages left (none left: the
        # conversation node goes too). A digest erased on its own is rebuilt likewise: erase the messages to
        # remove what it says.
        if keys:
            self.graph.touch_conversations(tx.conn, keys, tx.now)


def _speaker(meta: dict[str, object]) -> str | None:
    s = meta.get("speaker")
    return s if isinstance(s, str) and s else None
