"""The domain façade: the operations the MCP tools, the CLI and the benchmarks call.

Synchronous and thread-safe. Writes become intents for the reconciler (one writer thread); reads run in
the calling thread. Arguments are validated before anything is queued, so a rejected call changes nothing.
"""

from __future__ import annotations

import base64
import builtins
import dataclasses
import fcntl
import hashlib
import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from scopes import (
    LOCAL_PRINCIPAL,
    Level,
    Principal,
    ScopeId,
    ScopeKind,
    readable,
    visible_scopes,
    would_cycle,
)
from scopes import descendants as subtree
from storage.adapters.embedder import CachedEmbedder, Embedder, MiniLMEmbedder
from storage.adapters.kuzu.store import Connection, GraphStore, NewMemory, RelationState, entity_key
from storage.adapters.lance_vectors import VectorIndex
from storage.adapters.tantivy_text import TextIndex
from storage.domain import validation as v
from storage.domain.errors import Conflict, InvalidInput, Locked, NotFound, ScopeDenied, StorageUnavailable
from storage.domain.models import (
    AmendReceipt,
    EntityIn,
    EraseReceipt,
    LinkReceipt,
    Memory,
    MemoryKind,
    MemoryRecord,
    Page,
    Provenance,
    PurgeReceipt,
    Recalled,
    RelationIn,
    RetireReceipt,
    ScopeInfo,
    Status,
    VerifyReport,
    WriteItem,
    WriteReceipt,
)
from storage.engine import backup as snapshots
from storage.engine.audit import AUDIT_FILE, AuditLog
from storage.engine.private_files import make_private
from storage.enrich import Enriched, Fact, enrich, llm, speaker_of
from storage.enrich.reconcile import DEFAULT_FUNCTIONAL, Access, reconcile
from storage.language.extraction import EntityLexicon, _norm, extract
from storage.recall import pipeline as recall_path
from storage.recall.lanes.graph import GraphLane
from storage.recall.recipes import Recipe, resolve
from storage.recall.understanding import analyse
from storage.sync.reconciler import Reconciler, Tx

log = logging.getLogger("mnemograph.engine")

VACUUM_MARKER = "VACUUM_PENDING"
# Salts the id of a memory whose words another principal already stored where this one may not read.
_SEPARATE = "separate:"
# Ids a prefix may match before the ones the caller cannot read are set aside (8+ hex characters: rarely > 1).
_PREFIX_CANDIDATES = 64


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


class Engine:
    """One data directory's stores, owned by this process until ``close()``."""

    def __init__(self, data_dir: Path, embedder: Embedder, lock_fd: int, *, ann_threshold: int) -> None:
        self.data_dir = data_dir
        self.embedder = embedder
        self._lock_fd = lock_fd
        self.graph = GraphStore(data_dir / "graph", dim=embedder.dim, embedder_name=embedder.name)
        self.vectors = VectorIndex(data_dir / "vectors", dim=embedder.dim, ann_threshold=ann_threshold)
        self.text = TextIndex(data_dir / "text")
        self.reconciler = Reconciler(self.graph, self.vectors, self.text)
        self.lexicon = EntityLexicon()
        # Predicates with one current value per subject: a new value supersedes the old (settings can widen it).
        self.functional: frozenset[str] = frozenset(DEFAULT_FUNCTIONAL)
        self.enricher: llm.Enricher | None = None  # the optional LLM pass, after the commit (use_llm)
        self.audit = AuditLog(data_dir / AUDIT_FILE)
        self._tree_lock = threading.Lock()
        self._parents: dict[ScopeId, ScopeId] = {}
        self._scopes: set[str] = set()
        self._holders: Callable[[], Mapping[str, frozenset[str]]] = dict
        self._closed = False
        # Lanes of one recall run side by side; sized for a few concurrent recalls.
        self._lane_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="mnemograph-lane")
        self._lanes: list[recall_path.Lane] = [
            recall_path.Bm25Lane(self.text),
            recall_path.VectorLane(self.vectors, self.embedder),
            GraphLane(self.graph, self.lexicon),
        ]

    # -- lifecycle ---------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        data_dir: Path | str,
        *,
        embedder: Embedder | None = None,
        warm: bool = True,
        ann_threshold: int = 50_000,
    ) -> Engine:
        """Open (creating if needed) the stores under ``data_dir`` and repair the projections.

        Takes an exclusive lock on ``data_dir/owner.lock``: a second process gets StorageUnavailable.
        Never imports torch itself; with ``warm`` the embedder loads in a background thread.
        """
        path = Path(data_dir).expanduser().resolve()
        try:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(path / "owner.lock", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise StorageUnavailable(f"cannot use data directory {path}: {exc.strerror}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise Locked(
                f"data directory {path} is owned by another Mnemograph process",
                hint="connect through that process (mnemograph serve attaches to it) instead of opening it",
            ) from None
        try:
            # The directory's permissions are the boundary against other local users (docs/security.md):
            # private from birth (the entry points' umask), and tightened here when an older version left it
            # open. Under the lock, so a CLI that finds an owner running does not walk the tree.
            make_private(path)
        except OSError as exc:
            os.close(fd)
            raise StorageUnavailable(f"cannot make data directory {path} private: {exc.strerror}") from exc
        emb = embedder if embedder is not None else CachedEmbedder(MiniLMEmbedder())
        try:
            engine = cls(path, emb, fd, ann_threshold=ann_threshold)
            engine._start()
        except BaseException:
            os.close(fd)
            raise
        if warm:
            threading.Thread(target=emb.warm, name="mnemograph-embedder-warm", daemon=True).start()
        return engine

    def _start(self) -> None:
        if self._projection_behind_log():
            self._rebuild_projections()
        self.reconciler.start()
        self._reload_tree()
        self._reload_lexicon()
        if (self.data_dir / VACUUM_MARKER).exists():
            try:
                self._vacuum()  # an erasure was interrupted before its files were rewritten
            except StorageUnavailable:
                # The erased rows are gone from every store (nothing can read them); only their bytes wait for
                # the rewrite, which the marker keeps asking for. A store that cannot be rewritten right now
                # (disk full) must still open: refusing to would lose the user every other memory.
                log.exception(
                    "the rewrite that removes erased bytes failed; it is retried at the next erasure"
                )

    def close(self) -> None:
        """Drain queued writes, flush projections and release the directory. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self.enricher is not None:
            self.enricher.close(lambda job: self._apply_llm(job, None, None))
        self.reconciler.close()
        self._lane_pool.shutdown(wait=True)
        self.text.close()
        self.graph.close()
        os.close(self._lock_fd)

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- scopes and access ------------------------------------------------------------------------

    def _reload_tree(self) -> None:
        with self.graph.read() as conn:
            scopes, parents = self.graph.scope_parents(conn)
        with self._tree_lock:
            self._scopes = set(scopes)
            self._parents = {ScopeId.parse(c): ScopeId.parse(p) for c, p in parents.items()}

    def _tree(self) -> dict[ScopeId, ScopeId]:
        with self._tree_lock:
            return dict(self._parents)

    def _require_scope(self, scope: ScopeId) -> None:
        if str(scope) not in self._scopes:
            raise NotFound(f"no scope {scope}", hint="call list_scopes to see the scopes that exist")

    def _authorize(
        self,
        principal: Principal,
        scopes: Sequence[ScopeId],
        need: Level,
        action: str,
        tree: Mapping[ScopeId, ScopeId] | None = None,
    ) -> None:
        """The one access check: raise ScopeDenied unless ``principal`` holds ``need`` on every scope.

        A grant covers its scope's subtree, so the check reads the scope tree. It never depends on whether a
        scope exists, so a denial tells a curious caller nothing about other principals' scopes.
        """
        if principal.unrestricted:
            return
        parents = self._tree() if tree is None else tree
        for sid in scopes:
            if not principal.may(need, sid, parents):
                raise ScopeDenied(
                    f"{principal.name} may not {action} in {sid}",
                    hint=f"this needs a '{need.label}' grant on {sid} or on a scope it sits inside; "
                    "call list_scopes to see the scopes you can use",
                )

    def _can_read(self, principal: Principal, m: Memory, tree: Mapping[ScopeId, ScopeId]) -> bool:
        return principal.unrestricted or any(
            principal.may(Level.READ, ScopeId.parse(s), tree) for s in m.scopes
        )

    def _seen_by(self, principal: Principal, m: Memory, tree: Mapping[ScopeId, ScopeId]) -> Memory:
        """``m`` as ``principal`` sees it: only the scopes it may read are named."""
        return self._seen_all(principal, [m], tree)[0]

    def _seen_all(
        self, principal: Principal, ms: Sequence[Memory], tree: Mapping[ScopeId, ScopeId]
    ) -> builtins.list[Memory]:
        """The memories as ``principal`` sees them: only the scopes it may read are named, and a link to a
        version it may not read (``supersedes``, ``superseded_by``) is blanked to "" (the status still says
        superseded), so a memory reached by writing the same words does not lead to its other versions."""
        if principal.unrestricted:
            return list(ms)
        by_id = {m.id: m for m in ms}
        links = {i for m in ms for i in (m.supersedes, m.superseded_by) if i}
        missing = sorted(links - by_id.keys())
        if missing:
            with self.graph.read() as conn:
                by_id.update(self.graph.fetch(conn, missing))
        seen = {i for i in links if i in by_id and self._can_read(principal, by_id[i], tree)}
        out = []
        for m in ms:
            shown = tuple(s for s in m.scopes if principal.may(Level.READ, ScopeId.parse(s), tree))
            older = m.supersedes if m.supersedes in seen or m.supersedes is None else ""
            newer = m.superseded_by if m.superseded_by in seen or m.superseded_by is None else ""
            out.append(dataclasses.replace(m, scopes=shown, supersedes=older, superseded_by=newer))
        return out

    def _require_writable(
        self, principal: Principal, m: Memory | None, mid: str, action: str, hint: str
    ) -> Memory:
        """The memory, if ``principal`` may change it: write access on every scope it belongs to.

        A memory the principal cannot read at all is reported as not found, so its existence is not confirmed.
        """
        tree = self._tree()
        if m is None or not self._can_read(principal, m, tree):
            raise NotFound(f"no memory with id {mid}", hint=hint)
        if not principal.unrestricted and not all(
            principal.may(Level.WRITE, ScopeId.parse(s), tree) for s in m.scopes
        ):
            raise ScopeDenied(
                f"{principal.name} may not {action} memory {mid}: it belongs to scopes you cannot write",
                hint="changing a shared memory needs a 'w' grant on every scope it is in; write a new memory "
                "in your own scope instead",
            )
        return m

    def reserve_scopes(self, holders: Callable[[], Mapping[str, frozenset[str]]]) -> None:
        """Name the scopes that belong to someone: ``holders()`` maps a scope id to the principals holding it
        (token names, or "" for the local user's default scopes). A principal with grants may not create a
        scope another principal holds, so placing a name under a parent it administers never gives it rights
        over memories others will write there. The owner installs this from its token file and settings."""
        self._holders = holders

    def create_scope(
        self, scope: str, parent: str | None = None, *, principal: Principal = LOCAL_PRINCIPAL
    ) -> ScopeInfo:
        """Create ``scope`` under ``parent`` (the parent too, if missing). Never moves a scope (``move_scope``).

        Needs ``admin`` on the parent (on the scope itself when it has no parent). Creating a scope that
        already sits there changes nothing; one that exists elsewhere is refused with a pointer to
        ``move_scope``. A principal with grants may only create a scope that does not exist yet and that no
        one else holds (see ``reserve_scopes``): ``user:`` scopes other than its own, scopes granted to
        another token and the local user's default scopes are refused, with the same answer as a scope that
        exists where it cannot read, so the refusal reveals neither.
        """
        sid = v.scope(scope)
        pid = v.scope(parent) if parent is not None else None
        self._authorize(principal, [pid or sid], Level.ADMIN, "create scopes")

        def refuse_taken() -> ScopeDenied:
            return ScopeDenied(
                f"{principal.name} may not create {sid}: the name is in use or reserved for another principal",
                hint="pick another name (e.g. one that starts with your team's or agent's name); the local "
                "user can place reserved scopes with `mnemograph scope create` or `scope move`",
            )

        def check(tree: Mapping[ScopeId, ScopeId], exists: bool) -> bool:
            """True when there is something to do; raises when the call must be refused."""
            if not exists:
                if not principal.unrestricted and self._held_by_others(sid, principal):
                    raise refuse_taken()
                return True
            where = tree.get(sid)
            if where == pid:
                return False
            if not principal.unrestricted and not principal.may(Level.READ, sid, tree):
                raise refuse_taken()
            shown = str(where) if where is not None and principal.may(Level.READ, where, tree) else None
            place = f"inside {shown}" if shown else ("at the top level" if where is None else "elsewhere")
            raise Conflict(
                f"{sid} already exists {place}; create_scope never moves a scope",
                hint=f"call move_scope to place {sid} under {pid or 'the top level'} (from a shell: mnemograph "
                "scope move); a move needs admin where the scope is now and on the new parent",
            )

        with self._tree_lock:
            known = str(sid) in self._scopes
        check(self._tree(), known)

        def intent(tx: Tx) -> bool:
            scopes, parents = self.graph.scope_parents(tx.conn)
            tree = {ScopeId.parse(c): ScopeId.parse(p) for c, p in parents.items()}
            if not check(tree, str(sid) in scopes):
                return False
            if pid is not None and would_cycle(sid, pid, tree):
                raise InvalidInput(
                    f"placing {sid} under {pid} would make a scope its own ancestor",
                    hint=f"move {pid} elsewhere first, or pick another parent",
                )
            self.graph.ensure_scopes(tx.conn, [str(s) for s in (sid, pid) if s is not None], tx.now)
            self.graph.set_parent(tx.conn, str(sid), str(pid) if pid else None)
            return True

        return self._placed(sid, pid, principal, self.reconciler.submit(intent), "scope_create")

    def move_scope(
        self, scope: str, parent: str | None, *, principal: Principal = LOCAL_PRINCIPAL
    ) -> ScopeInfo:
        """Move an existing scope under ``parent`` (None: to the top level).

        Needs ``admin`` where the scope is now (on its current parent, or on the scope itself at the top
        level) *and* where it goes (the new parent, or the scope itself): whoever administers either side
        must agree, since everyone granted on the new parent then reaches the scope's memories, and the
        scope's readers then read the new parent's. The checks do not depend on whether the scope exists.
        """
        sid = v.scope(scope)
        pid = v.scope(parent) if parent is not None else None
        tree = self._tree()
        self._authorize(principal, [tree.get(sid) or sid], Level.ADMIN, "move scopes", tree)
        self._authorize(principal, [pid or sid], Level.ADMIN, "move scopes", tree)
        self._require_scope(sid)

        def intent(tx: Tx) -> bool:
            scopes, parents = self.graph.scope_parents(tx.conn)
            now = {ScopeId.parse(c): ScopeId.parse(p) for c, p in parents.items()}
            if str(sid) not in scopes:
                raise NotFound(f"no scope {sid}", hint="call list_scopes to see the scopes that exist")
            if now.get(sid) != tree.get(sid):  # moved meanwhile: the grants were checked on the old place
                raise Conflict(f"{sid} was moved by someone else meanwhile", hint="call move_scope again")
            if now.get(sid) == pid:
                return False
            if pid is not None and would_cycle(sid, pid, now):
                raise InvalidInput(
                    f"placing {sid} under {pid} would make a scope its own ancestor",
                    hint=f"move {pid} elsewhere first, or pick another parent",
                )
            if pid is not None:
                self.graph.ensure_scopes(tx.conn, [str(pid)], tx.now)
            self.graph.set_parent(tx.conn, str(sid), str(pid) if pid else None)
            return True

        return self._placed(sid, pid, principal, self.reconciler.submit(intent), "scope_move")

    def _held_by_others(self, sid: ScopeId, principal: Principal) -> bool:
        """True when ``sid`` belongs to someone other than ``principal``: a ``user:`` scope it does not
        administer by a grant on it, or a scope granted to another token or used by the local user by default."""
        own = {g.scope for g in principal.grants or () if g.level is Level.ADMIN}
        if sid.kind is ScopeKind.USER and sid not in own:
            return True
        try:
            holders = self._holders().get(str(sid), frozenset())
        except Exception:  # a damaged token file: fail closed, every name counts as held
            return True
        return bool(holders - {principal.name})

    def _placed(
        self, sid: ScopeId, pid: ScopeId | None, principal: Principal, changed: bool, op: str
    ) -> ScopeInfo:
        self._reload_tree()
        if changed:
            self.audit.record(
                op,
                principal=principal.name,
                client=principal.client,
                scopes=[str(sid)],
                parent=str(pid or ""),
            )
        counts = self._counts()
        return ScopeInfo(str(sid), str(pid) if pid else None, counts.get(str(sid), 0))

    def list_scopes(
        self, root: str | None = None, *, principal: Principal = LOCAL_PRINCIPAL
    ) -> builtins.list[ScopeInfo]:
        """The scopes ``principal`` may read (every scope when unrestricted), with their parents and their
        numbers of current memories; with ``root``, only that scope and its subtree. A parent the principal
        may not read is shown as None."""
        tree = self._tree()
        with self._tree_lock:
            known = sorted(self._scopes)
        chosen = [ScopeId.parse(s) for s in known]
        if root is not None:
            rid = v.scope(root)
            self._authorize(principal, [rid], Level.READ, "list scopes")
            self._require_scope(rid)
            chosen = [rid, *subtree(rid, tree)]
        seen = {s for s in chosen if principal.may(Level.READ, s, tree)}
        counts = self._counts()
        out = []
        for s in sorted(seen):
            parent = tree.get(s)
            shown = str(parent) if parent is not None and principal.may(Level.READ, parent, tree) else None
            out.append(ScopeInfo(str(s), shown, counts.get(str(s), 0)))
        return out

    def _counts(self) -> dict[str, int]:
        with self.graph.read() as conn:
            return self.graph.scope_counts(conn)

    def visible(
        self,
        scopes: Sequence[ScopeId],
        *,
        descendants: bool = False,
        principal: Principal = LOCAL_PRINCIPAL,
    ) -> builtins.list[str]:
        """The scopes a recall in ``scopes`` reads: each, its ancestors and (with ``descendants``) its subtree,
        keeping only those ``principal`` may read. Inheritance never widens a grant."""
        tree = self._tree()
        found = visible_scopes(scopes, tree, include_descendants=descendants)
        return [str(s) for s in found if principal.may(Level.READ, s, tree)]

    def link(self, id: str, scope: str, *, principal: Principal = LOCAL_PRINCIPAL) -> LinkReceipt:
        """Add a current memory to another scope (no copy: the same memory then belongs to both).

        Needs ``w`` on ``scope``; the memory must be one the principal can read. Linking it where it already
        is changes nothing (``changed`` is False).
        """
        mid = self._resolve_id(v.memory_id(id), principal)
        sid = v.scope(scope)
        self._authorize(principal, [sid], Level.WRITE, "link memories")

        def intent(tx: Tx) -> LinkReceipt:
            m = self.graph.fetch(tx.conn, [mid]).get(mid)
            if m is None or not self._can_read(principal, m, self._tree()):
                raise NotFound(f"no memory with id {mid}", hint="call recall to find the memory to link")
            self._require_current(m, "link", principal, tx.conn)
            if str(sid) in m.scopes:
                return LinkReceipt(mid, m.scopes, changed=False)
            self.graph.ensure_scopes(tx.conn, [str(sid)], tx.now)
            self.graph.link(tx.conn, mid, [str(sid)], tx.now)
            tx.record("link", mid)
            return LinkReceipt(mid, tuple(sorted({*m.scopes, str(sid)})), changed=True)

        receipt = self.reconciler.submit(intent)
        self._after_write([str(sid)], ())
        if receipt.changed:
            self.audit.record(
                "link", principal=principal.name, client=principal.client, ids=[mid], scopes=[str(sid)]
            )
        return self._shown_receipt(receipt, principal)

    def unlink(self, id: str, scope: str, *, principal: Principal = LOCAL_PRINCIPAL) -> LinkReceipt:
        """Remove a memory from one of its scopes; it stays in the others. Needs ``w`` on ``scope``.

        Refused for the memory's last scope: use ``retire`` (or ``purge`` the scope) to drop it.
        """
        mid = self._resolve_id(v.memory_id(id), principal)
        sid = v.scope(scope)
        self._authorize(principal, [sid], Level.WRITE, "unlink memories")

        def intent(tx: Tx) -> LinkReceipt:
            m = self.graph.fetch(tx.conn, [mid]).get(mid)
            if m is None or not self._can_read(principal, m, self._tree()):
                raise NotFound(f"no memory with id {mid}", hint="call recall to find the memory to unlink")
            if str(sid) not in m.scopes:
                raise NotFound(
                    f"memory {mid} is not in {sid}", hint="memory_read shows the scopes a memory belongs to"
                )
            if len(m.scopes) == 1:
                raise Conflict(
                    f"{sid} is the only scope of memory {mid}; a memory must belong to at least one scope",
                    hint="retire the memory to drop it from recall, or purge the scope to erase it",
                )
            self.graph.unlink(tx.conn, mid, str(sid))
            tx.record("unlink", mid)
            return LinkReceipt(mid, tuple(s for s in m.scopes if s != str(sid)), changed=True)

        receipt = self.reconciler.submit(intent)
        self.audit.record(
            "unlink", principal=principal.name, client=principal.client, ids=[mid], scopes=[str(sid)]
        )
        return self._shown_receipt(receipt, principal)

    def _shown_receipt(self, receipt: LinkReceipt, principal: Principal) -> LinkReceipt:
        if principal.unrestricted:
            return receipt
        tree = self._tree()
        shown = tuple(s for s in receipt.scopes if principal.may(Level.READ, ScopeId.parse(s), tree))
        return dataclasses.replace(receipt, scopes=shown)

    # -- writes ------------------------------------------------------------------------------------

    def write(
        self,
        content: str,
        scopes: Sequence[str],
        *,
        kind: str = "note",
        event_time: datetime | None = None,
        valid_from: datetime | None = None,
        valid_to: datetime | None = None,
        entities: Sequence[EntityIn] | None = None,
        relations: Sequence[RelationIn] | None = None,
        metadata: Mapping[str, Any] | None = None,
        principal: Principal = LOCAL_PRINCIPAL,
        source: str = "",
    ) -> WriteReceipt:
        """Store a memory. Identical content already current in every target scope -> ``duplicate``; in some
        of them -> ``linked`` (the same memory gains the other scopes); otherwise ``added``.

        Returns once the canonical store has committed it (acknowledged = durable).
        """
        item = WriteItem(
            content, scopes, kind, event_time, valid_from, valid_to, entities, relations, metadata, source
        )
        return self.write_many([item], principal=principal)[0]

    def write_many(
        self, items: Sequence[WriteItem], *, principal: Principal = LOCAL_PRINCIPAL
    ) -> list[WriteReceipt]:
        """Write several memories: validated together (one bad item rejects the call and writes nothing),
        embedded in batches, committed in group transactions. Receipts come back in order."""
        now = _now()
        prepared = []
        for n, item in enumerate(items):
            try:
                prepared.append(self._prepare(item, now, principal))
            except InvalidInput as exc:
                if len(items) == 1:
                    raise
                raise InvalidInput(
                    f"item {n}: {exc.message}", hint=exc.hint or "nothing was written"
                ) from None
        with self.graph.read() as conn:
            known = self.graph.fetch(conn, [p.id for p in prepared if p.vector is None])
        todo = [p for p in prepared if p.vector is None and p.id not in known]
        if todo:
            vectors = self.embedder.embed([p.content for p in todo])
            for p, vec in zip(todo, vectors, strict=True):
                p.vector = [float(x) for x in vec]
        receipts = self.reconciler.submit_many([self._write_intent(p, principal) for p in prepared])
        if self.enricher is not None:
            for p, r in zip(prepared, receipts, strict=True):
                if r.status == "added":
                    self.enricher.submit(self._llm_job(r, p, now, principal))
        self._after_write([s for p in prepared for s in p.scopes], [e for p in prepared for e in p.entities])
        changed = [r for r in receipts if r.status != "duplicate"]
        if changed:
            self.audit.record(
                "write",
                principal=principal.name,
                client=principal.client,
                ids=[r.id for r in changed],
                scopes=sorted({s for p in prepared for s in p.scopes}),
                added=sum(r.status == "added" for r in changed),
                linked=sum(r.status == "linked" for r in changed),
            )
        return [self._shown_write(r, p.scopes, principal) for r, p in zip(receipts, prepared, strict=True)]

    def _shown_write(
        self, receipt: WriteReceipt, targets: Sequence[str], principal: Principal
    ) -> WriteReceipt:
        """The receipt as ``principal`` may see it: scopes it cannot read are left out, and content that was
        only stored where it cannot read is reported as ``added`` (not confirming someone else wrote it)."""
        if principal.unrestricted:
            return receipt
        tree = self._tree()
        shown = tuple(s for s in receipt.scopes if principal.may(Level.READ, ScopeId.parse(s), tree))
        status = receipt.status
        if status == "linked" and set(shown) <= set(targets):
            status = "added"
        return dataclasses.replace(receipt, scopes=shown, status=status)

    def _prepare(self, item: WriteItem, now: datetime, principal: Principal) -> _Prepared:
        text = v.content(item.content)
        target_ids = v.scope_list(item.scopes)
        self._authorize(principal, target_ids, Level.WRITE, "write")
        targets = [str(s) for s in target_ids]
        mkind = v.kind(item.kind)
        ev = v.when(item.event_time, "event_time")
        vf, vt = v.when(item.valid_from, "valid_from"), v.when(item.valid_to, "valid_to")
        given = v.entities(item.entities)
        rels = v.relations(item.relations)
        meta = v.metadata(item.metadata)
        src = v.text(item.source, "source", limit=200, allow_empty=True)
        vector = v.vector(item.vector, self.embedder.dim) if item.vector is not None else None
        if vt is not None and vt <= (vf or now):
            raise InvalidInput(
                "valid_to must be after valid_from (or after now when valid_from is not given)"
            )
        for r in rels:
            for end in (r.subject, r.object):
                if all(e.name.casefold() != end.casefold() for e in given):
                    given.append(EntityIn(name=end))
        try:
            found = enrich(
                text,
                written_at=now,
                lexicon=self.lexicon,
                given=given,
                relations=rels,
                event_time=ev,
                speaker=speaker_of(meta, targets, principal.name),
            )
        except Exception:
            # Extraction is a best effort on top of the write: a fault in it must cost the memory its derived
            # statements, never the write itself. The caller's own entities and relations still count.
            log.exception("offline extraction failed; storing the memory with the caller's entities only")
            basic = extract(text, written_at=now, lexicon=self.lexicon, given=given, times=ev is None)
            found = Enriched(basic.entities, basic.times, tuple(rels), (), ())
        entities = self._known_to(principal, text, found.entities, given)
        # A relation whose end the principal may not learn (an alias matched from another team's memories)
        # goes with that entity: the receipt would name it.
        hidden = {e.name.casefold() for e in found.entities} - {e.name.casefold() for e in entities}
        relations = [
            r
            for r in found.relations
            if r.subject.casefold() not in hidden and r.object.casefold() not in hidden
        ]
        if ev is not None:
            event, source_of_time = ev, "caller"
        elif found.times:
            event, source_of_time = found.times[0].when.astimezone(UTC), "content"
        else:
            event, source_of_time = now, "recorded"
        return _Prepared(
            id=content_id(text),
            content=text,
            scopes=targets,
            kind=mkind,
            event_time=event,
            event_time_source=source_of_time,
            valid_from=vf or now,
            valid_to=vt,
            entities=entities,
            relations=relations,
            metadata=meta,
            provenance=Provenance(principal.name, principal.client, src),
            vector=vector,
            facts=found.facts,
        )

    def _known_to(
        self, principal: Principal, text: str, found: Sequence[EntityIn], given: Sequence[EntityIn]
    ) -> builtins.list[EntityIn]:
        """The extracted entities a principal with grants may see: an entity the known-entity lexicon matched
        by an alias (its name is not in the text) is kept only when a memory in a scope the principal may
        read mentions it. Otherwise the write receipt, and the memory's entities, would reveal a name learnt
        from another team's memories."""
        if principal.unrestricted:
            return list(found)
        named = {e.name.casefold() for e in given}
        # Spelled exactly as in the text (case included), a name tells the writer nothing it did not write;
        # matched any other way (an alias, another capitalisation), it is the spelling someone else stored.
        suspects = [e for e in found if e.name.casefold() not in named and e.name not in text]
        if not suspects:
            return list(found)
        tree = self._tree()
        scopes = [str(s) for s in readable(principal.grants or (), tree)]
        hidden = set()
        with self.graph.read() as conn:
            for e in suspects:
                if not scopes or not self.graph.mentioning(
                    conn, entity_key(e.name), scopes=scopes, live_only=False, limit=1
                ):
                    hidden.add(e.name)
        return [e for e in found if e.name not in hidden]

    def _write_intent(self, p: _Prepared, principal: Principal) -> Callable[[Tx], WriteReceipt]:
        def intent(tx: Tx) -> WriteReceipt:
            cur, existing = self._resolve_content(tx, p.content, p.id)
            if (
                existing is not None
                and not principal.unrestricted
                and not self._can_read(principal, existing, self._tree())
            ):
                # The same words are someone else's memory, in scopes this principal may not read. Joining it
                # would show the writer that memory's metadata, relations, writer and history (a guessed
                # sentence would open them), so the principal gets a memory of its own: its id is salted by
                # the target scopes, so writing it again there is still a duplicate.
                own = content_id(p.content, salt=_SEPARATE + ",".join(sorted(p.scopes)))
                cur, existing = self._resolve_content(tx, p.content, own)
            if existing is not None:
                missing = [s for s in p.scopes if s not in existing.scopes]
                if not missing:
                    return WriteReceipt(
                        cur, "duplicate", existing.scopes, existing.entities, existing.event_time
                    )
                self.graph.ensure_scopes(tx.conn, missing, tx.now)
                self.graph.link(tx.conn, cur, missing, tx.now)
                tx.record("link", cur)
                all_scopes = tuple(sorted({*existing.scopes, *missing}))
                return WriteReceipt(cur, "linked", all_scopes, existing.entities, existing.event_time)
            vec = p.vector if p.vector is not None else self.graph.vector_of(tx.conn, p.id)
            if vec is None:  # the content vanished (purged) between our check and now: embed after all
                vec = [float(x) for x in self.embedder.embed([p.content])[0]]
            new = NewMemory(
                cur,
                p.content,
                p.kind,
                p.provenance,
                p.metadata,
                p.event_time,
                p.event_time_source,
                p.valid_from,
                p.valid_to,
                tx.now,
                vec,
            )
            since = {(f.subject, f.predicate, f.object): f.at for f in p.facts if f.dated}
            self._insert(tx, new, p.scopes, p.entities, p.relations, since)
            names = tuple(sorted(e.name for e in p.entities))
            receipt = WriteReceipt(cur, "added", tuple(sorted(p.scopes)), names, p.event_time)
            return self._reconcile(tx, receipt, p, principal) if p.facts else receipt

        return intent

    def use_llm(self, extractor: llm.Extractor) -> None:
        """Enrich every newly added memory with ``extractor`` (Claude) after its commit, in the background."""
        if self.enricher is None:
            self.enricher = llm.Enricher(extractor, self._apply_llm)

    def wait_enriched(self, timeout: float = 30.0) -> bool:
        """Block until the LLM pass has handled every memory written so far (True; False on timeout)."""
        return self.enricher is None or self.enricher.wait_idle(timeout)

    def _llm_job(self, r: WriteReceipt, p: _Prepared, now: datetime, principal: Principal) -> llm.Job:
        speaker = speaker_of(p.metadata, p.scopes, principal.name)
        return llm.Job(r.id, p.content, now, p.event_time, tuple(p.scopes), speaker, self._access(principal))

    def _apply_llm(
        self, job: llm.Job, result: llm.LlmResult | None, error: llm.ExtractionFailed | None
    ) -> None:
        model = self.enricher.extractor.model if self.enricher is not None else ""
        self.reconciler.submit(
            lambda tx: llm.apply(self.graph, tx, job, result, error, functional=self.functional, model=model)
        )

    def _access(self, principal: Principal, tree: Mapping[ScopeId, ScopeId] | None = None) -> Access:
        """What reconciliation may see and change on ``principal``'s behalf: in ``tree``, else in the scope
        tree as it is at each check (a background job runs later, after scopes may have moved)."""

        def may(level: Level) -> Callable[[Sequence[str]], bool]:
            def check(scopes: Sequence[str]) -> bool:
                if principal.unrestricted:
                    return True
                parents = self._tree() if tree is None else tree
                test = any if level is Level.READ else all
                return test(principal.may(level, ScopeId.parse(s), parents) for s in scopes)

            return check

        return Access(may(Level.READ), may(Level.WRITE))

    def _reconcile(self, tx: Tx, receipt: WriteReceipt, p: _Prepared, principal: Principal) -> WriteReceipt:
        """Updates, contradictions and duplicates of the new memory's facts (``storage.enrich.reconcile``)."""
        own: dict[str, int] = {}  # relations this memory itself just counted, per name
        for r in p.relations:
            for end in (r.subject, r.object):
                own[_norm(end)] = own.get(_norm(end), 0) + 1
        out, changed = reconcile(
            self.graph,
            tx.conn,
            new_id=receipt.id,
            scopes=p.scopes,
            facts=p.facts,
            functional=self.functional,
            access=self._access(principal, self._tree()),
            now=tx.now,
            related=lambda name: self.lexicon.relations(name) > own.get(_norm(name), 0),
        )
        for mid in changed:
            tx.record("supersede", mid)
        return dataclasses.replace(
            receipt,
            relations=tuple(out.recorded),
            supersedes=tuple(out.supersedes),
            superseded_by=out.superseded_by,
            contradicts=tuple(out.contradicts),
            duplicates=tuple(out.duplicates),
        )

    def _resolve_content(self, tx: Tx, text: str, mid: str) -> tuple[str, Memory | None]:
        """The id this content gets now, and the current memory that already has it (if any).

        Content that was retired or superseded and is written again is a new assertion: it gets a new id
        derived from the previous one, so history keeps both.
        """
        cur = mid
        for _ in range(1000):
            live = self.graph.live_state(tx.conn, cur)
            if live is None:
                return cur, None
            if live:
                return cur, self.graph.fetch(tx.conn, [cur])[cur]
            cur = content_id(text, salt=cur)
        raise Conflict("this content has been re-asserted too many times")

    def _insert(
        self,
        tx: Tx,
        new: NewMemory,
        scopes: Sequence[str],
        entities: Sequence[EntityIn],
        rels: Sequence[RelationIn],
        since: Mapping[tuple[str, str, str], datetime] | None = None,
    ) -> None:
        self.graph.ensure_scopes(tx.conn, scopes, tx.now)
        self.graph.insert_memory(tx.conn, new, scopes, entities)
        self.graph.link(tx.conn, new.id, scopes, tx.now)
        if entities:
            self.graph.mention(tx.conn, new.id, entities)
        for r in rels:
            vf = (since or {}).get((r.subject, r.predicate, r.object))
            self.graph.relate(tx.conn, new.id, r.subject, r.predicate, r.object, tx.now, valid_from=vf)
            # Counted now, not after the commit, so the next write of the same batch sees it (over-counting
            # when the transaction fails is harmless: the count only lets reconciliation skip queries).
            self.lexicon.related(r.subject)
            self.lexicon.related(r.object)
        tx.record("add", new.id)

    def _after_write(self, scopes: Sequence[str], entities: Sequence[EntityIn]) -> None:
        """Names into the lexicon once committed (relations are counted by ``_insert``, in the writer)."""
        for e in entities:
            self.lexicon.add(e.name, e.aliases)
            self.lexicon.mentioned(e.name)
        if any(s not in self._scopes for s in scopes):
            self._reload_tree()

    def amend(
        self,
        id: str,
        content: str,
        *,
        reason: str = "",
        effective_at: datetime | None = None,
        principal: Principal = LOCAL_PRINCIPAL,
    ) -> AmendReceipt:
        """Write a new version of a current memory; the old one is superseded and its validity closed.

        ``effective_at`` is when the change took effect in the world (default: now): the old version's
        validity ends and the new one's begins there, so ``recall(as_of=...)`` answers on valid time. The
        transaction time (``recorded_at``) is always now.
        """
        old_id = self._resolve_id(v.memory_id(id), principal)
        text = v.content(content)
        why = v.reason(reason)
        effective = v.when(effective_at, "effective_at")
        now = _now()
        found = extract(text, written_at=now, lexicon=self.lexicon)
        entities = self._known_to(principal, text, found.entities, ())
        mid = content_id(text)
        with self.graph.read() as conn:
            exists = self.graph.fetch(conn, [mid])
        vector = None if exists else [float(x) for x in self.embedder.embed([text])[0]]

        def intent(tx: Tx) -> AmendReceipt:
            old = self._require_writable(
                principal,
                self.graph.fetch(tx.conn, [old_id]).get(old_id),
                old_id,
                "amend",
                "call recall to find the memory to amend",
            )
            self._require_current(old, "amend", principal, tx.conn)
            start = effective or tx.now
            if start > tx.now:
                raise InvalidInput(
                    f"effective_at ({start.isoformat()}) is in the future",
                    hint="amend when the change happens, or write the plan as an event memory",
                )
            if start < old.valid_from:
                raise InvalidInput(
                    f"effective_at ({start.isoformat()}) is before the memory it amends became valid "
                    f"({old.valid_from.isoformat()})",
                    hint="pass a later effective_at, or write a separate memory for the earlier period",
                )
            if old.content == text:
                raise Conflict("the new content is identical to the current version", hint="nothing to amend")
            cur, existing = self._resolve_content(tx, text, mid)
            if existing is not None:
                missing = [s for s in old.scopes if s not in existing.scopes]
                if missing:
                    self.graph.link(tx.conn, cur, missing, tx.now)
                tx.record("link", cur)
            else:
                if found.times:
                    event, src = found.times[0].when.astimezone(UTC), "content"
                else:
                    event, src = tx.now, "recorded"
                vec = vector if vector is not None else self.graph.vector_of(tx.conn, mid)
                if vec is None:
                    vec = [float(x) for x in self.embedder.embed([text])[0]]
                prov = Provenance(principal.name, principal.client, old.provenance.source)
                new = NewMemory(
                    cur,
                    text,
                    old.kind,
                    prov,
                    old.metadata,
                    event,
                    src,
                    start,
                    None,
                    tx.now,
                    vec,
                    supersedes=old.id,
                )
                self._insert(tx, new, old.scopes, entities, ())
            self.graph.supersede(tx.conn, old.id, cur, reason=why, at=tx.now, close_valid_to=start)
            tx.record("supersede", old.id)
            return AmendReceipt(cur, old.id, old.scopes, existing.valid_from if existing else start)

        receipt = self.reconciler.submit(intent)
        self._after_write((), entities)
        self.audit.record(
            "amend",
            principal=principal.name,
            client=principal.client,
            ids=[receipt.id, receipt.supersedes],
            scopes=receipt.scopes,
        )
        return receipt

    def retire(
        self, id: str, *, reason: str = "", at: datetime | None = None, principal: Principal = LOCAL_PRINCIPAL
    ) -> RetireReceipt:
        """Close a memory's validity at ``at`` (default now). It leaves default recall; history keeps it."""
        mid = self._resolve_id(v.memory_id(id), principal)
        why = v.reason(reason)
        when = v.when(at, "at")

        def intent(tx: Tx) -> RetireReceipt:
            m = self._require_writable(
                principal,
                self.graph.fetch(tx.conn, [mid]).get(mid),
                mid,
                "retire",
                "call recall to find the memory to retire",
            )
            if m.retired_at is not None:
                raise Conflict(f"memory {mid} was already retired at {m.retired_at.isoformat()}")
            end = when or tx.now
            if end < m.valid_from:
                raise InvalidInput(
                    f"at ({end.isoformat()}) is before the memory became valid ({m.valid_from.isoformat()})"
                )
            self.graph.retire(tx.conn, mid, at=tx.now, valid_to=end, reason=why)
            tx.record("retire", mid)
            return RetireReceipt(mid, tx.now, min(end, m.valid_to) if m.valid_to else end)

        receipt = self.reconciler.submit(intent)
        self.audit.record("retire", principal=principal.name, client=principal.client, ids=[mid])
        return receipt

    def _require_current(self, m: Memory, action: str, principal: Principal, conn: Connection) -> None:
        if m.status is Status.SUPERSEDED and m.superseded_by and not principal.unrestricted:
            newer = self.graph.fetch(conn, [m.superseded_by]).get(m.superseded_by)
            if newer is None or not self._can_read(principal, newer, self._tree()):
                raise Conflict(f"memory {m.id} is superseded", hint="write a new memory instead")
        if m.status is Status.SUPERSEDED:
            raise Conflict(
                f"memory {m.id} is superseded by {m.superseded_by}",
                hint=f"{action} {m.superseded_by} instead",
            )
        if m.status is Status.RETIRED:
            raise Conflict(f"memory {m.id} is retired", hint="write a new memory instead")

    def purge(self, scope: str, *, confirm: str, principal: Principal = LOCAL_PRINCIPAL) -> PurgeReceipt:
        """Erase a scope for real: memories only in it are deleted from all three stores and their bytes
        removed from disk; memories shared with other scopes just lose this scope. Child scopes move up
        to the purged scope's parent."""
        sid = v.scope(scope)
        self._authorize(principal, [sid], Level.ADMIN, "purge")
        if confirm != str(sid):
            raise InvalidInput(f"confirm must equal the scope id {str(sid)!r}", hint="nothing was deleted")
        self._require_scope(sid)
        self.reconciler.wait_projected()
        before = {"lancedb": self.vectors.count(), "tantivy": self.text.count()}
        (self.data_dir / VACUUM_MARKER).touch()

        contents: list[str] = []

        def intent(tx: Tx) -> tuple[list[str], list[str], int]:
            only, shared = self.graph.memories_of_scope(tx.conn, str(sid))
            contents[:] = [m.content for m in self.graph.fetch(tx.conn, only).values()]
            self.graph.unlink_all(tx.conn, str(sid), shared)
            entities = self.graph.delete_scope(tx.conn, str(sid), only)
            for mid in only:
                tx.record("delete", mid)
            for mid in shared:
                tx.record("unlink", mid)
            return only, shared, entities

        only, shared, entities = self.reconciler.submit(intent)
        self._forget(contents)
        erasure = self._vacuum()
        per_store = self._after_erasure(before, len(only))
        # Counts only: the ids of erased memories are hashes of their content, which the log must not keep.
        self.audit.record(
            "purge",
            principal=principal.name,
            client=principal.client,
            scopes=[str(sid)],
            erasure=erasure,
            memories_deleted=len(only),
            memories_unlinked=len(shared),
            entities_deleted=entities,
        )
        return PurgeReceipt(str(sid), len(only), len(shared), entities, per_store)

    def erase(
        self, id: str, *, confirm: str, reason: str = "", principal: Principal = LOCAL_PRINCIPAL
    ) -> EraseReceipt:
        """Erase one memory for real (a right-to-be-forgotten request): the memory and every version of it
        (the amendments before and after it, and earlier or later re-assertions of the same content) are
        deleted from all three stores and their bytes removed from disk, as ``purge`` does for a scope.

        ``confirm`` must equal the memory's full id. A crash in the middle is finished at the next open.
        """
        mid = self._resolve_id(v.memory_id(id), principal)
        if confirm != mid:
            raise InvalidInput(f"confirm must equal the memory's full id {mid!r}", hint="nothing was erased")
        v.reason(reason)
        self._authorize_erase(principal, mid)
        self.reconciler.wait_projected()
        before = {"lancedb": self.vectors.count(), "tantivy": self.text.count()}
        (self.data_dir / VACUUM_MARKER).touch()

        contents: list[str] = []

        def intent(tx: Tx) -> tuple[list[str], int]:
            family = self._version_family(tx.conn, mid)
            if not family:
                raise NotFound(f"no memory with id {mid}", hint="it may have been erased already")
            contents[:] = [m.content for m in self.graph.fetch(tx.conn, family).values()]
            entities = self.graph.delete_memories(tx.conn, family)
            for gone in family:
                tx.record("delete", gone)
            return family, entities

        try:
            family, entities = self.reconciler.submit(intent)
        except BaseException:
            self._vacuum()  # also when nothing was deleted: the marker must not outlive this call
            raise
        self._forget(contents)
        erasure = self._vacuum()
        per_store = self._after_erasure(before, len(family))
        # Counts only: the ids of erased memories are hashes of their content, which the log must not keep.
        self.audit.record(
            "erase",
            principal=principal.name,
            client=principal.client,
            memories_deleted=len(family),
            erasure=erasure,
        )
        return EraseReceipt(mid, tuple(sorted(family)), entities, per_store)

    def _forget(self, contents: Sequence[str]) -> None:
        """Right after an erasure commits, before the files are rewritten: drop what this process holds in memory
        that came from the erased memories (their vectors in the embedding cache; their entity names, aliases
        and counts in the lexicon, which new writes and the graph lane match against), so neither a write
        racing the rewrite nor a later one picks them up again."""
        forget = getattr(self.embedder, "forget", None)
        if callable(forget):
            forget(contents)
        self._reload_lexicon()

    def _after_erasure(self, before: Mapping[str, int], deleted: int) -> dict[str, int]:
        """After a purge or an erase: reload the scope tree; the records removed per store. (``_forget`` dropped
        the rest of what this process held from the erased memories when the erasure committed.)"""
        self._reload_tree()
        return {
            "kuzu": deleted,
            "lancedb": before["lancedb"] - self.vectors.count(),
            "tantivy": before["tantivy"] - self.text.count(),
        }

    def _authorize_erase(self, principal: Principal, mid: str) -> None:
        """Erase is admin-only: ``admin`` on every scope any version of the memory belongs to. A memory the
        principal cannot read is reported as not found."""
        if principal.unrestricted:
            return
        tree = self._tree()
        with self.graph.read() as conn:
            members = self.graph.fetch(conn, self._version_family(conn, mid))
        target = members.get(mid)
        if target is None or not self._can_read(principal, target, tree):
            raise NotFound(f"no memory with id {mid}", hint="call recall to find it")
        scopes = sorted({ScopeId.parse(s) for m in members.values() for s in m.scopes})
        if all(principal.may(Level.ADMIN, s, tree) for s in scopes):
            return
        # Name the scope only when the caller may read it: the denial must not reveal where other versions
        # of the memory live.
        shown = [s for s in scopes if principal.may(Level.READ, s, tree)]
        self._authorize(principal, shown, Level.ADMIN, "erase", tree)
        raise ScopeDenied(
            f"{principal.name} may not erase memory {mid}: it or a version of it is in scopes you do not "
            "administer",
            hint="erasing needs an 'admin' grant on every scope that any version of the memory belongs to; "
            "ask the local user to run the erase, or retire the memory instead",
        )

    def _version_family(self, conn: Connection, mid: str) -> list[str]:
        """``mid`` and every memory holding a version of its content: the SUPERSEDES chain in both directions
        and, for each version, the re-assertions of the same content (ids salted by their predecessor)."""
        seen: dict[str, None] = {}
        todo = [mid]
        while todo:
            cur = todo.pop()
            if cur in seen:
                continue
            m = self.graph.fetch(conn, [cur]).get(cur)
            if m is None:
                continue
            seen[cur] = None
            todo.extend(self.graph.chain(conn, cur))
            again = content_id(m.content)
            for _ in range(1000):
                if self.graph.live_state(conn, again) is None:
                    break
                todo.append(again)
                again = content_id(m.content, salt=again)
        return list(seen)

    def _reload_lexicon(self) -> None:
        # Built aside and swapped in whole: a recall or write meanwhile sees the old lexicon or the new one,
        # never an empty or half-filled one.
        fresh = EntityLexicon()
        with self.graph.read() as conn:
            for known in self.graph.known_entities(conn):
                fresh.add(known.name, known.aliases)
                fresh.mentioned(known.name, known.mentions)
                fresh.related(known.name, known.relations)
        self.lexicon.replace_with(fresh)

    @property
    def failed(self) -> bool:
        """True once a commit failed to reach disk: the process must reopen the store (``close`` then ``open``)."""
        return self.graph.failed is not None

    def _vacuum(self) -> str:
        """Rewrite every store's files so erased content leaves no bytes behind, then drop the marker. Returns
        the random reference that replaced the erased ids in the audit log.

        The change log goes first: its entries name the erased ids (hashes of the content), and once both
        projections have applied them nothing needs them. Raises StorageUnavailable when a step failed; the
        marker then stays, and the next erasure (or the next start) runs the whole rewrite again.
        """
        if not self.reconciler.wait_projected():
            raise StorageUnavailable(
                "the erased memories are deleted, but the search indexes are behind, so their files were not "
                "rewritten yet",
                hint="the rewrite is retried at the next erase or purge and at the next start",
            )
        upto = self.reconciler.projected_seq
        self.reconciler.submit(lambda tx: self.graph.prune_changes(tx.conn, upto))
        self.reconciler.on_writer(self.graph.rebuild)

        def rewrite_projections() -> None:
            # Rewritten from the canonical rows, not compacted: Lance's compaction keeps a fragment with few
            # deleted rows (and the IVF index its copy of their vectors), so an erased vector stayed on disk.
            # Watermark 0 first: a crash in the middle leaves a projection the next start rebuilds.
            self.vectors.watermark.set(0)
            self._rebuild_projections()
            self.reconciler.rebuilt()

        try:
            self.reconciler.on_projector(rewrite_projections)
            with self.graph.read() as conn:
                present = self.graph.all_ids(conn)
            ref = self.audit.redact(present.__contains__)
        except (OSError, RuntimeError, ValueError) as exc:  # what Lance, Tantivy and the file system raise
            raise StorageUnavailable(
                f"the search indexes or the audit log could not be rewritten after an erasure: {exc}",
                hint="the erased memories are deleted and no longer found; the rewrite that removes their bytes "
                "is retried at the next erase or purge and at the next start (check free disk space)",
            ) from exc
        (self.data_dir / VACUUM_MARKER).unlink(missing_ok=True)
        return ref

    # -- backup ------------------------------------------------------------------------------------

    def export(
        self, out: IO[str], *, scope: str | None = None, vectors: bool = False
    ) -> snapshots.ExportSummary:
        """Write every memory (or those of ``scope`` and the scopes under it) as JSON Lines; see storage.engine.backup."""
        return snapshots.export(self, out, scope=scope, vectors=vectors)

    def backup(self, dest: Path | str) -> snapshots.SnapshotSummary:
        """Copy the stores into ``dest`` as they are at one change sequence (writes pause meanwhile)."""
        return snapshots.snapshot(self, dest)

    @classmethod
    def import_export(
        cls,
        data_dir: Path | str,
        source: IO[str],
        *,
        embedder: Embedder | None = None,
        progress: Callable[[str, int, int], None] | None = None,
    ) -> snapshots.ImportSummary:
        """Restore an export into a new (empty) data directory. The file is validated before anything is written."""
        path = Path(data_dir).expanduser().resolve()
        snapshots.require_empty(path)
        parsed = snapshots.parse(iter(source))
        with cls.open(path, embedder=embedder, warm=False) as engine:
            return snapshots.restore(engine, parsed, progress=progress)

    def merge_export(
        self, source: IO[str], *, progress: Callable[[str, int, int], None] | None = None
    ) -> snapshots.ImportSummary:
        """Merge an export into this store: memories it already holds are skipped (``already``), so it is
        idempotent. The whole file is validated before anything is written."""
        return snapshots.restore(self, snapshots.parse(iter(source)), progress=progress)

    # -- reads -------------------------------------------------------------------------------------

    def _resolve_id(self, id_or_prefix: str, principal: Principal) -> str:
        """The full id of the one memory ``principal`` may read whose id starts with ``id_or_prefix``.

        Memories it may not read are not candidates: a prefix of one answers exactly like an unknown id (the
        text repeats what was sent, never a full id), and does not make a readable match ambiguous.
        """
        with self.graph.read() as conn:
            matches = self.graph.ids_with_prefix(conn, id_or_prefix, limit=_PREFIX_CANDIDATES)
            if not principal.unrestricted and matches:
                tree = self._tree()
                found = self.graph.fetch(conn, matches)
                matches = [i for i in matches if i in found and self._can_read(principal, found[i], tree)]
        if not matches:
            raise NotFound(f"no memory with id {id_or_prefix}", hint="call recall to find it")
        if len(matches) > 1:
            raise InvalidInput(
                f"id prefix {id_or_prefix} matches several memories", hint="send more characters"
            )
        return matches[0]

    def read(self, id: str, *, principal: Principal = LOCAL_PRINCIPAL) -> MemoryRecord:
        """The full record and its version chain (oldest first). Accepts a unique prefix of >= 8 hex chars.

        A memory the principal may not read is reported as not found; so are versions of it, which are left
        out of the chain.
        """
        mid = self._resolve_id(v.memory_id(id), principal)
        with self.graph.read() as conn:
            ids = [mid, *self.graph.chain(conn, mid)]
            records = self.graph.fetch(conn, ids)
            relations = self.graph.relation_history(conn, [mid])
            conflicting = self.graph.contradictions(conn, mid)
            enders = [r.ended_by for r in relations if r.ended_by]
            others = self.graph.fetch(conn, list(dict.fromkeys([*conflicting, *enders])))
            enrichment = self.graph.enrichment_of(conn, mid)
        tree = self._tree()
        if mid not in records or not self._can_read(principal, records[mid], tree):
            raise NotFound(f"no memory with id {mid}", hint="call recall to find it")
        shown = self._seen_all(
            principal, [m for m in records.values() if self._can_read(principal, m, tree)], tree
        )
        versions = sorted(shown, key=lambda m: (m.recorded_at, m.id))
        readable = {m.id for m in shown} | {
            i for i, m in others.items() if self._can_read(principal, m, tree)
        }
        return MemoryRecord(
            next(m for m in shown if m.id == mid),
            tuple(versions),
            relations=tuple(_relation_line(r, readable) for r in relations),
            contradicts=tuple(i for i in conflicting if i in readable),
            enrichment=llm.describe(enrichment, self.enricher is not None and self.enricher.pending(mid)),
        )

    def list(
        self,
        scope: str,
        *,
        cursor: str | None = None,
        include_retired: bool = False,
        limit: int = 50,
        principal: Principal = LOCAL_PRINCIPAL,
    ) -> Page:
        """Memories directly in ``scope``, oldest first, ``limit`` at a time; pass ``next_cursor`` back."""
        sid = v.scope(scope)
        self._authorize(principal, [sid], Level.READ, "list memories")
        self._require_scope(sid)
        if not 1 <= limit <= 500:
            raise InvalidInput("limit must be from 1 to 500")
        after = _decode_cursor(cursor) if cursor else None
        with self.graph.read() as conn:
            ids = self.graph.list_scope(
                conn, str(sid), after=after, live_only=not include_retired, limit=limit + 1
            )
            records = self.graph.fetch(conn, ids[:limit])
        tree = self._tree()
        items = tuple(self._seen_all(principal, [records[i] for i in ids[:limit] if i in records], tree))
        nxt = _encode_cursor(items[-1]) if len(ids) > limit and items else None
        return Page(items, nxt)

    def recall(
        self,
        query: str,
        scopes: Sequence[str] | None,
        *,
        k: int = 10,
        as_of: datetime | None = None,
        include_history: bool = False,
        kinds: Sequence[str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        descendants: bool = False,
        recipe: str | Recipe = "default",
        now: datetime | None = None,
        token_budget: int | None = None,
        group_by: str | None = None,
        known_at: datetime | None = None,
        cut_chars: int | None = None,
        principal: Principal = LOCAL_PRINCIPAL,
    ) -> Recalled:
        """The best ``k`` memories for ``query`` in ``scopes`` and their ancestors (and subtrees with
        ``descendants``). Current memories only, unless ``include_history`` or an ``as_of`` time is given,
        or the query asks about change ("used to", "previously", "what did I use before"): then superseded
        versions come too, each chain oldest first.

        ``now`` is the caller's present (default: the clock), with its UTC offset: time expressions in the
        query ("last Tuesday", "in May", "two weeks ago") are resolved against it, in its time zone, and boost
        memories whose event time falls in that window. It does not move validity (that is ``as_of``).
        ``recipe`` is a name from ``RECIPES`` or a ``Recipe``. ``token_budget`` keeps results, best first,
        while their estimated tokens (characters / 4, counting at most ``cut_chars`` of each when the caller
        shows only that much) fit.

        ``group_by`` names a metadata key (``"session"``): memories sharing its value are ranked as one
        conversation (``Recipe.group``). Only this call groups; nothing stored switches grouping on.
        ``as_of`` answers on valid time (what was true then, as we know it now); ``known_at`` on transaction
        time (what the store believed at that instant: memories recorded by then and not yet superseded or
        retired by then). Both may be combined.

        Naming a scope the principal may not read is refused (ScopeDenied); ancestors and descendants it may
        not read are skipped. ``scopes=None`` reads every scope the principal may read.

        Writes acknowledged before the call are found, unless the projections are stalled: then recall waits
        for them once (``Reconciler.read_wait``), answers from what they hold, and the result's ``behind``
        counts the changes it could not see (see ``Recalled``).
        """
        text = v.query(query)
        chosen = resolve(recipe)
        if group_by is not None:
            chosen = chosen.with_(group={"key": v.group_key(group_by)})
        ref = v.reference_time(now)
        budget = v.token_budget(token_budget)
        tree = self._tree()
        if scopes is None:
            if principal.grants is None:
                with self._tree_lock:
                    requested = [ScopeId.parse(s) for s in sorted(self._scopes)]
            else:
                requested = readable(principal.grants, tree)
        else:
            requested = v.scope_list(scopes)
            self._authorize(principal, requested, Level.READ, "recall", tree)
        intent = analyse(text, ref or _now(), chosen.time)
        history = bool(include_history) or (chosen.history_questions and intent.change is not None)
        q = recall_path.Query(
            text=text,
            scopes=tuple(self.visible(requested, descendants=descendants, principal=principal)),
            k=v.k(k),
            now=_now(),
            as_of=v.when(as_of, "as_of"),
            include_history=history,
            kinds=tuple(v.kinds(kinds) or ()) or None,
            since=v.when(since, "since"),
            until=v.when(until, "until"),
            search_text=intent.search_text,
            intervals=intent.intervals,
            token_budget=budget,
            known_at=v.when(known_at, "known_at"),
            cut_chars=cut_chars,
        )
        # Read-your-writes, within reason: a stalled projection costs one wait, then answers say how stale.
        behind = self.reconciler.wait_fresh()
        if not q.scopes:
            return Recalled(behind=behind)
        hits = recall_path.run(q, self._lanes, self.graph, chosen, self._lane_pool)
        if principal.unrestricted:
            return Recalled(hits, behind=behind)
        seen = self._seen_all(principal, [h.memory for h in hits], tree)
        return Recalled(
            [
                dataclasses.replace(
                    h,
                    memory=m,
                    # Earlier versions the query matched: only those the caller may read, as it may see them.
                    via=tuple(
                        self._seen_all(
                            principal, [o for o in h.via if self._can_read(principal, o, tree)], tree
                        )
                    ),
                )
                for h, m in zip(hits, seen, strict=True)
            ],
            behind=behind,
        )

    # -- consistency -------------------------------------------------------------------------------

    def verify(self) -> VerifyReport:
        """Compare the projections with the canonical store, id by id, once they have caught up."""
        self.reconciler.wait_projected()
        with self.graph.read() as conn:
            canonical = self.graph.all_ids(conn)
        drift: dict[str, list[str]] = {}
        counts = {"kuzu": len(canonical)}
        for name, live in (("lancedb", self.vectors.live_status()), ("tantivy", self.text.live_status())):
            counts[name] = len(live)
            missing = sorted(set(canonical) - set(live))
            extra = sorted(set(live) - set(canonical))
            stale = sorted(i for i in set(canonical) & set(live) if canonical[i] != live[i])
            drift[f"{name}_missing"] = missing
            drift[f"{name}_extra"] = extra
            drift[f"{name}_stale"] = stale
        return VerifyReport(
            canonical_memories=len(canonical),
            live_memories=sum(canonical.values()),
            counts=counts,
            watermarks={"lancedb": self.vectors.watermark.value, "tantivy": self.text.watermark.value},
            canonical_seq=self.reconciler.committed_seq,
            drift=drift,
        )

    def reindex(self) -> VerifyReport:
        """Rebuild LanceDB and Tantivy from the canonical store (writes wait meanwhile)."""

        def rebuild() -> None:
            self._rebuild_projections()
            self.reconciler.rebuilt()

        self.reconciler.on_writer(lambda: self.reconciler.on_projector(rebuild))
        return self.verify()

    def _rebuild_projections(self) -> None:
        with self.graph.read() as conn:
            seq = self.graph.max_seq(conn)
            rows = list(self.graph.projection_rows(conn).values())
        self.vectors.replace_all(rows)
        self.vectors.watermark.set(seq)
        self.text.rebuild(rows)
        self.text.watermark.set(seq)

    def _projection_behind_log(self) -> bool:
        """True when a projection cannot be repaired by replay: it was lost (watermark 0 while memories
        exist) or it lags behind the oldest change the log still keeps."""
        with self.graph.read() as conn:
            oldest = self.graph.oldest_change(conn)
            has_memories = bool(self.graph.ids_with_prefix(conn, "", limit=1))
        for mark in (self.vectors.watermark.value, self.text.watermark.value):
            if mark == 0 and has_memories and (oldest is None or oldest > 1):
                return True
            if oldest is not None and mark < oldest - 1:
                return True
        return False


def _encode_cursor(m: Memory) -> str:
    return base64.urlsafe_b64encode(f"{m.recorded_at.isoformat()}|{m.id}".encode()).decode()


def _decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        ts, mid = base64.urlsafe_b64decode(cursor.encode()).decode().split("|")
        return datetime.fromisoformat(ts), v.memory_id(mid)
    except (ValueError, UnicodeDecodeError):
        raise InvalidInput(
            "cursor is not one this server issued", hint="start again without a cursor"
        ) from None
