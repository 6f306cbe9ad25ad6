"""Erasure: purge a scope, erase a memory, and the rewrite that leaves no byte of it on disk."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from scopes import (
    LOCAL_PRINCIPAL,
    Level,
    Principal,
    ScopeId,
)
from storage.domain import validation as v
from storage.domain.errors import Closed, InvalidInput, NotFound, ScopeDenied, StorageUnavailable
from storage.domain.models import (
    EraseReceipt,
    PurgeReceipt,
)
from storage.engine.consistency import _Consistency
from storage.engine.state import (
    VACUUM_MARKER,
    content_id,
    log,
)
from storage.ports.canonical import Session
from storage.ports.projection import StagedProjection
from storage.sync.reconciler import PROJECT_BATCH, Tx

# Changes past the staged projections' catch-up that may be left for the switch, which recalls wait for.
SWITCH_BACKLOG = 8


class _Erasure(_Consistency):
    # Seconds per phase of the last rewrite after an erasure (the caller's wait, and the pauses others saw).
    last_rewrite: dict[str, float] = {}  # noqa: RUF012  (replaced whole, never mutated)

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
        before = {p.name: p.count() for p in self.stores.projections}
        self._erasure_begins()

        contents: list[str] = []

        def intent(tx: Tx) -> tuple[list[str], list[str], int]:
            only, shared = self.graph.memories_of_scope(tx.conn, str(sid))
            derived, touched = self._derived_from(tx, only)  # digests built from them go with them
            only = list(dict.fromkeys([*only, *derived]))
            shared = [m for m in shared if m not in only]
            deleted = self.graph.fetch(tx.conn, only).values()
            contents[:] = [m.content for m in deleted]
            # A planned change deleted with the scope ends nothing, as when erased: what it was to replace (in a
            # scope that stays) holds again past its start. Only plans (valid from after their writing) ended
            # a memory that is still current; the relations the deleted ended reopen in ``delete_scope``.
            for m in deleted:
                if m.valid_from > m.recorded_at:
                    self._cancel_plan(tx, m, gone=only)
            self.graph.unlink_all(tx.conn, str(sid), shared)
            # Their conversations changed scopes: a digest built from what was read before this commit would
            # land in the purged scope again (the consolidator commits it only if nothing changed since).
            self._sources_changed(tx, shared, withdraw=False)
            entities = self.graph.delete_scope(tx.conn, str(sid), only)
            self._sources_erased(tx, touched)
            self._scope_purged(tx, str(sid))
            self._erased_here.update(only)  # before the commit: the projector may see the delete at once
            for mid in only:
                tx.record("delete", mid)
            for mid in shared:
                tx.record("unlink", mid)
            self._announce_tree(tx)  # its children moved up: other nodes' trees must follow
            return only, shared, entities

        try:
            only, shared, entities = self.reconciler.submit(intent)
            self._forget(contents)
            erasure = self._vacuum()
        finally:
            self._erasure_ends()
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
        before = {p.name: p.count() for p in self.stores.projections}
        pending = (self.data_dir / VACUUM_MARKER).exists()  # an earlier erasure's rewrite still owed
        self._erasure_begins()

        contents: list[str] = []

        def intent(tx: Tx) -> tuple[list[str], int]:
            family = self._version_family(tx.conn, mid)
            if not family:
                raise NotFound(f"no memory with id {mid}", hint="it may have been erased already")
            derived, touched = self._derived_from(tx, family)  # digests built from them go with them
            # with every version of them: a digest amended by hand still quotes the messages it was built from
            derived = [x for d in derived for x in self._version_family(tx.conn, d)]
            family = list(dict.fromkeys([*family, *derived]))
            erased = self.graph.fetch(tx.conn, family).values()
            contents[:] = [m.content for m in erased]
            # An erased planned change ended what it was to replace at its start: with it unknown, that end
            # goes too, as the relations it ended open again (``delete_memories``).
            for m in erased:
                self._cancel_plan(tx, m, gone=family)
            entities = self.graph.delete_memories(tx.conn, family)
            self._sources_erased(tx, touched)
            self._erased_here.update(family)  # before the commit: the projector may see the delete at once
            for gone in family:
                tx.record("delete", gone)
            return family, entities

        try:
            try:
                family, entities = self.reconciler.submit(intent)
            except BaseException:
                # Nothing was deleted: the marker must not outlive this call, and a rewrite is owed only when
                # an earlier erasure left one.
                if pending:
                    self._vacuum()
                else:
                    self._drop_marker()
                raise
            self._forget(contents)
            erasure = self._vacuum()
        finally:
            self._erasure_ends()
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

    def _derived_from(self, tx: Tx, ids: Sequence[str]) -> tuple[list[str], list[str]]:
        """Hook (``storage.engine.conversations``): ids of memories derived from ``ids`` that must be erased
        with them, and the keys of what to settle afterwards (``_sources_erased``)."""
        return [], []

    def _sources_erased(self, tx: Tx, keys: Sequence[str]) -> None:
        """Hook: after ``_derived_from``'s memories were deleted in the same transaction."""

    def _scope_purged(self, tx: Tx, scope: str) -> None:
        """Hook: ``scope`` is deleted in this transaction (what is kept about it goes too, before the rewrite)."""

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
        removed = {self.graph.name: deleted}
        removed.update({p.name: before[p.name] - p.count() for p in self.stores.projections})
        return removed

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

    def _version_family(self, conn: Session, mid: str) -> list[str]:
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

    @property
    def failed(self) -> bool:
        """True once a commit failed to reach disk: the process must reopen the store (``close`` then ``open``)."""
        return self.graph.failed is not None

    def _erasure_begins(self) -> None:
        """Mark a rewrite as owed (on disk, for a crash) before an erasure deletes anything, and count the
        erasure as in flight until it has had its own rewrite (``_erasure_ends``)."""
        with self._owed_lock:
            self._owed += 1
        (self.data_dir / VACUUM_MARKER).touch()

    def _erasure_ends(self) -> None:
        with self._owed_lock:
            self._owed -= 1
            if not self._owed:  # every delete of this node's erasures was projected before its rewrite
                self._erased_here.clear()

    def _drop_marker(self) -> None:
        """Remove the marker unless another erasure is in flight: its delete may have committed after this
        rewrite's snapshot, and until its own rewrite ends a crash must still find the marker (review)."""
        with self._owed_lock:
            if self._owed <= 1:
                (self.data_dir / VACUUM_MARKER).unlink(missing_ok=True)

    def _vacuum(self) -> str:
        """Rewrite every store's files so erased content leaves no bytes behind, then drop the marker. Returns
        the random reference that replaced the erased ids in the audit log.

        Beside live traffic (docs/reliability.md, "Erasure"): each store is rewritten from a snapshot into new
        files while reads and writes go on, caught up with what committed meanwhile, and switched in during a
        pause of a few milliseconds; only the caller waits for the whole rewrite. The change log goes first: its
        entries name the erased ids (hashes of the content), and once both projections have applied them
        nothing needs them. Raises StorageUnavailable when a step failed; the marker then stays, and the next
        erasure (or the next start) runs the whole rewrite again.
        """
        with self._erasure_lock:
            (self.data_dir / VACUUM_MARKER).touch()  # owed from here until the rewrite is done, crash or not
            if not self.reconciler.wait_projected():
                raise StorageUnavailable(
                    "the erased memories are deleted, but the search indexes are behind, so their files were "
                    "not rewritten yet",
                    hint="the rewrite is retried at the next erase or purge and at the next start",
                )
            upto = self.reconciler.projected_seq
            self.reconciler.submit(lambda tx: self.graph.prune_changes(tx.conn, upto))
            phases: dict[str, float] = {}
            started = time.perf_counter()
            self.graph.rebuild(lambda fn: self._timed(phases, "writer paused", self.reconciler.on_writer, fn))
            phases["canonical rewrite"] = time.perf_counter() - started
            try:
                self._rewrite_projections(phases)
                with self.graph.read() as conn:
                    present = self.graph.all_ids(conn)
                ref = self.audit.redact(present.__contains__)
                # Access counts name memories by id: the erased ones leave the file (rewritten) now.
                self.reconciler.on_writer(lambda: self.accesses.retain(present.__contains__))
            except (
                OSError,
                RuntimeError,
                ValueError,
            ) as exc:  # what Lance, Tantivy and the file system raise
                raise StorageUnavailable(
                    f"the search indexes or the audit log could not be rewritten after an erasure: {exc}",
                    hint="the erased memories are deleted and no longer found; the rewrite that removes their "
                    "bytes is retried at the next erase or purge and at the next start (check free disk space)",
                ) from exc
            self._drop_marker()
            self.last_rewrite = phases
            log.info("erasure rewrite: %s", ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in phases.items()))
            return ref

    @staticmethod
    def _timed(
        phases: dict[str, float],
        name: str,
        run: Callable[[Callable[[], None]], None],
        fn: Callable[[], None],
    ) -> None:
        """``run(fn)``, keeping how long ``fn`` itself ran (the pause others see, less the wait for a turn) as
        ``phases["<name> <n>"]``, n counting the calls."""

        def timed() -> None:
            t = time.perf_counter()
            try:
                fn()
            finally:
                n = 1 + sum(k.startswith(f"{name} ") for k in phases)
                phases[f"{name} {n}"] = time.perf_counter() - t

        run(timed)

    def _rewrite_projections(self, phases: dict[str, float]) -> None:
        """Rebuild every projection from the canonical rows beside live traffic, then switch them in.

        Rewritten from the rows, not compacted: Lance's compaction keeps a fragment with few deleted rows (and
        the IVF index its copy of their vectors), and Tantivy keeps a deleted document until a merge it decides
        on its own. The rows are read after the change sequence they start from, so re-applying the changes
        past it (idempotent, from the current canonical rows) can only bring the new files up to date."""
        t = time.perf_counter()
        with self.graph.read() as conn:
            start = self.graph.max_seq(conn)
            rows = list(self.graph.projection_rows(conn).values())
        staged: list[StagedProjection] = []
        switched = False
        with self.reconciler.keeping_changes_after(start):
            try:
                for projection in self.stores.projections:
                    staged.append(projection.build(rows))
                del rows
                # Beside live traffic: what committed up to now, again while the build took long enough for many
                # commits to follow, so the switch (recalls wait for it) applies only a few. Writes go on: a
                # bounded number of rounds, not "until none is left".
                done = start
                for _ in range(16):
                    done = self._catch_up_staged(staged, done, self.reconciler.committed_seq)
                    if self.reconciler.committed_seq - done <= SWITCH_BACKLOG:
                        break
                phases["projections rebuilt"] = time.perf_counter() - t
                # The last changes reach the new files in the projector thread, right after it applies them to
                # the live ones (and wakes their readers), so that the switch itself applies none: a staged
                # commit inside the switch (50-100 ms of Tantivy, 20-40 of Lance) made every recall wait.
                followed = _Follow(self, staged, done)
                self.reconciler.on_projector(lambda: self.reconciler.follow(followed))
                following = True

                def switch() -> None:
                    nonlocal switched, following
                    # In the projector thread: the live projections have applied every commit, nothing applies
                    # meanwhile, and the next catch-up re-applies what these files may already hold.
                    self.reconciler.follow(None)
                    following = False
                    followed.check()
                    # Nothing left unless no batch came since following began (then nobody waits for one).
                    self._catch_up_staged(staged, followed.done, self.reconciler.projected_seq)
                    for new in staged:
                        new.switch()
                    switched = True
                    self.reconciler.rebuilt()

                self._timed(phases, "projector paused", self.reconciler.on_projector, switch)
                phases["projector followed (in its batches)"] = followed.seconds
            finally:
                if following:
                    self._stop_following()
                if not switched:
                    for new in staged:
                        new.discard()
        # Here, not in the switch: recalls wait for the projector, and deleting a store's files takes a while.
        t = time.perf_counter()
        for new in staged:
            new.drop_old()
        phases["old files dropped"] = time.perf_counter() - t

    def _stop_following(self) -> None:
        """Stop the projector applying batches to staged files about to be discarded; from its own thread, so
        that no batch is being applied to them when they go (directly if the projector is gone)."""
        try:
            self.reconciler.on_projector(lambda: self.reconciler.follow(None))
        except Closed:
            self.reconciler.follow(None)

    def _catch_up_staged(self, staged: Sequence[StagedProjection], after: int, upto: int) -> int:
        """Apply the changes past ``after`` up to ``upto`` to the staged projections; returns the last applied."""
        while after < upto:
            with self.graph.read() as conn:
                changes = [
                    c for c in self.graph.changes_since(conn, after, limit=PROJECT_BATCH) if c.seq <= upto
                ]
                if not changes:
                    return after
                ids = list(dict.fromkeys(c.memory_id for c in changes))
                rows = self.graph.projection_rows(conn, ids)
            upserts = [rows[i] for i in ids if i in rows]
            deletes = [i for i in ids if i not in rows]
            for new in staged:
                new.apply(upserts, deletes)
            after = changes[-1].seq
        return after


class _Follow:
    """What the projector calls after each batch while an erasure's rebuilt projections wait for their switch:
    apply the changes they lack, up to the batch. A failure is kept for the switch to raise (the erasure then
    reports it and retries later); the live projections are never held up by it."""

    def __init__(self, owner: _Erasure, staged: Sequence[StagedProjection], done: int) -> None:
        self.owner, self.staged, self.done = owner, staged, done
        self.error: BaseException | None = None
        self.seconds = 0.0

    def __call__(self, upto: int) -> None:
        if self.error is not None:
            return
        t = time.perf_counter()
        try:
            self.done = self.owner._catch_up_staged(self.staged, self.done, upto)
        except Exception as exc:  # what Lance, Tantivy or the store raise: reported by ``check``
            self.error = exc
        self.seconds += time.perf_counter() - t

    def check(self) -> None:
        if self.error is not None:
            raise self.error
