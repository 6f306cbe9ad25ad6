"""The engine's state: the stores (as ports), the scope tree, the lexicon, and the helpers every use case shares."""

from __future__ import annotations

import hashlib
import hmac
import logging
import shutil
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from scopes import (
    Principal,
    ScopeId,
)
from storage.domain.models import (
    EntityIn,
    MemoryKind,
    Provenance,
    RelationIn,
)
from storage.domain.records import RelationState
from storage.engine.audit import AUDIT_FILE, AuditLog
from storage.engine.compaction import Compactor
from storage.engine.salience import ACCESS_FILE, AccessCounts
from storage.enrich import Fact, llm
from storage.enrich.reconcile import DEFAULT_FUNCTIONAL
from storage.language.extraction import EntityLexicon
from storage.language.resolve import Judgement
from storage.ports.embedder import Embedder
from storage.ports.stores import Stores
from storage.recall.lanes import LaneContext, build_lanes
from storage.recall.pipeline import DigestSource
from storage.recall.query import Lane
from storage.sync.reconciler import Reconciler, Tx

log = logging.getLogger("mnemograph.engine")

VACUUM_MARKER = "VACUUM_PENDING"
# Salts the id of a memory whose words another principal already stored where this one may not read.
_SEPARATE = "separate:"
# Ids a prefix may match before the ones the caller cannot read are set aside (8+ hex characters: rarely > 1).
_PREFIX_CANDIDATES = 64


def scopes_tag(scopes: Sequence[str], secret: str = "") -> str:
    """What salts an id by the scopes it was written to: the sorted scope names, keyed by the store's ``secret``
    (``CanonicalStore.id_secret``) so that no one outside the store can test a guess of them from an id a reader
    of one of them sees. ``secret`` "" gives the unsalted names of stores made before secrets."""
    names = ",".join(sorted(scopes))
    if not secret:
        return names
    return hmac.new(bytes.fromhex(secret), b"scopes\x00" + names.encode(), hashlib.sha256).hexdigest()[:32]


def content_id(content: str, salt: str = "") -> str:
    """A memory's id: 128 bits of SHA-256 over its content (and, for a re-assertion, the id it follows)."""
    h = hashlib.sha256(content.encode("utf-8"))
    if salt:
        h.update(b"\x00" + salt.encode())
    return h.hexdigest()[:32]


def _now() -> datetime:
    return datetime.now(UTC)


def _relation_line(r: RelationState, readable: set[str]) -> str:
    """ "Ana —lives_in→ Lisbon [2023-03-01 → open]", with the memory that ended it when the reader may see it."""
    start = r.valid_from.date().isoformat() if r.valid_from else "?"
    end = r.valid_to.date().isoformat() if r.valid_to else "open"
    by = f", ended by {r.ended_by}" if r.ended_by and r.ended_by in readable else ""
    return f"{r.subject} —{r.predicate}→ {r.object} [{start} → {end}{by}]"


@dataclass
class _Prepared:
    """A validated write, ready for the reconciler."""

    id: str
    content: str
    scopes: list[str]
    kind: MemoryKind
    event_time: datetime
    event_time_source: str
    valid_from: datetime
    valid_to: datetime | None
    entities: list[EntityIn]
    relations: list[RelationIn]
    metadata: dict[str, Any]
    provenance: Provenance
    vector: list[float] | None
    facts: tuple[Fact, ...] = ()
    linked: tuple[tuple[str, str, str], ...] = ()  # (said, known entity, tier): storage.engine.resolution
    proposed: tuple[tuple[str, str, Judgement], ...] = ()
    # Near-duplicates by content (storage.enrich.near), found before the commit: (id, cosine), nearest first;
    # ``fold``: the caller asked to store nothing new when there is one (``Engine.write``).
    near: tuple[tuple[str, float], ...] = ()
    fold: bool = False
    # When the caller's ``valid_from`` says its statements took effect (None: they are news of now); reconcile
    # closes what they replace then, not at the time of writing.
    effective: datetime | None = None


class _State:
    """What every use case works on; built from ports (``storage.compose`` wires the adapters)."""

    def __init__(self, data_dir: Path, embedder: Embedder, lock_fd: int, stores: Stores) -> None:
        self.data_dir = data_dir
        self.embedder = embedder
        self._lock_fd = lock_fd
        self.stores = stores
        self.graph = stores.canonical
        self.vectors = stores.vectors
        self.text = stores.text
        self.reconciler = Reconciler(self.graph, stores.projections)
        self.lexicon = EntityLexicon()
        # Predicates with one current value per subject: a new value supersedes the old (settings can widen it).
        self.functional: frozenset[str] = frozenset(DEFAULT_FUNCTIONAL)
        self.enricher: llm.Enricher | None = None  # the optional LLM pass, after the commit (use_llm)
        self.sampler: llm.Enricher | None = None  # the writing clients' own models (use_sampling)
        self.digests: DigestSource | None = None  # conversation digests, for recall (engine.conversations)
        # Salience (Recipe.salience): whether recall applies it when the call does not say, and its half-life.
        self.salience_default = False
        self.salience_half_life = 30.0
        # How often each principal's recalls returned each memory (storage.engine.salience); off: none counted.
        self.count_accesses = True
        self.accesses = AccessCounts(data_dir / ACCESS_FILE, self.reconciler.post)
        self.audit = AuditLog(data_dir / AUDIT_FILE)
        # Whether a restricted principal still stands (its token not revoked): asked by work that runs after the
        # call that authorised it (the LLM pass, the reconcile decision), which otherwise acts on grants a
        # revoke took back. The owner process wires it to its token file (``server.owner``).
        self.principal_live: Callable[[Principal], bool] = lambda _principal: True
        self._tree_lock = threading.Lock()
        # Every CONTRADICTS link of the store, by memory, as of a commit (``_Reads._contradiction_links``).
        self._links_at: tuple[int, dict[str, tuple[str, ...]]] | None = None
        # One file rewrite after an erasure at a time: an erasure that commits while another's rewrite runs is in
        # that rewrite's journal as a delete (its bytes would stay), so it runs its own rewrite after.
        self._erasure_lock = threading.Lock()
        # Rewrites the canonical store when its file is mostly free pages, after a maintenance (compaction.py).
        self.compactor = Compactor(
            self.graph,
            self.reconciler.on_writer,
            self._erasure_lock,
            disk_free=lambda: shutil.disk_usage(self.data_dir).free,
        )
        self.reconciler.after_maintain = self.compactor.request
        self._owed_lock = threading.Lock()
        self._owed = 0  # erasures in flight that have not had their own rewrite yet (storage.engine.erasure)
        # Ids this node is erasing: their deletes, seen again in a shared log, need no second rewrite (core.py).
        self._erased_here: set[str] = set()
        self._remote_erasure = threading.Event()
        self._remote_rewriter: threading.Thread | None = None
        self._parents: dict[ScopeId, ScopeId] = {}
        self._scopes: set[str] = set()
        self._holders: Callable[[], Mapping[str, frozenset[str]]] = dict
        self._closed = False
        # Lanes of one recall run side by side; sized for a few concurrent recalls.
        self._lane_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="mnemograph-lane")
        self._lanes: list[Lane] = build_lanes(
            LaneContext(
                self.graph,
                self.text,
                self.vectors,
                self.embedder,
                self.lexicon,
                lambda: self.reconciler.committed_seq,
            )
        )

    def _enrichment_pending(self, memory_id: str) -> str | None:
        """Which model pass still has ``memory_id`` queued: ``sampling``, ``llm`` or None."""
        if self.sampler is not None and self.sampler.pending(memory_id):
            return "sampling"
        if self.enricher is not None and self.enricher.pending(memory_id):
            return "llm"
        return None

    def _relations_recorded(self, tx: Tx, memory_id: str, scopes: Sequence[str]) -> None:
        """Hook (``storage.engine.derived``), inside the transaction that recorded relations of ``memory_id``
        after its write (the LLM pass: Claude's or the client's model): chains through them are due. (An
        amend's new version joins its predecessor's chains: ``_sources_changed(successor=...)``.)"""

    def _sources_changed(
        self, tx: Tx, ids: Sequence[str], *, withdraw: bool, successor: str | None = None
    ) -> None:
        """Hook (``storage.engine.conversations``), inside the transaction that amends, retires, links or
        unlinks ``ids``: what was derived from them is due again. ``withdraw``: it may now say more, or show it
        wider, than its sources do, so it goes at once. ``successor``: the new version that takes their place."""
