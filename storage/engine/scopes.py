"""Scopes: create, move, list, link and unlink (a memory's membership)."""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Callable, Mapping

from scopes import (
    LOCAL_PRINCIPAL,
    Level,
    Principal,
    ScopeId,
    ScopeKind,
    would_cycle,
)
from scopes import descendants as subtree
from storage.domain import validation as v
from storage.domain.errors import Conflict, InvalidInput, NotFound, ScopeDenied
from storage.domain.models import (
    LinkReceipt,
    ScopeInfo,
)
from storage.engine.reads import _Reads
from storage.sync.reconciler import Tx


class _Scopes(_Reads):
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
            self._announce_tree(tx)
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
            self._announce_tree(tx)
            return True

        return self._placed(sid, pid, principal, self.reconciler.submit(intent), "scope_move")

    def _announce_tree(self, tx: Tx) -> None:
        """A shared store: the scope tree changed in ``tx`` (who reads what), and other nodes check it against
        the change log's head before every access decision (``_tree``). A move, a creation or a purge that
        re-parents children may touch no memory, so it records one change (re-projecting a memory changes
        nothing) to move the head. With no memory at all nobody can read anything through the old tree, and
        the first write moves the head."""
        if not self.graph.shared or tx.changes:
            return
        some = self.graph.ids_with_prefix(tx.conn, "", limit=1)
        if some:
            tx.record("scope", some[0])

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

    def missing_scopes(
        self, names: builtins.list[str], *, principal: Principal = LOCAL_PRINCIPAL
    ) -> builtins.list[str]:
        """Of ``names``, those no scope has (nothing was ever written or linked there) among the ones
        ``principal`` may read: for a read that found nothing, the likely typo. A name it may not read is never
        said to exist or not."""
        tree = self._tree()
        with self._tree_lock:
            known = set(self._scopes)
        out = []
        for name in names:
            try:
                sid = v.scope(name)
            except InvalidInput:
                continue
            if str(sid) not in known and principal.may(Level.READ, sid, tree):
                out.append(str(sid))
        return out

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
            self._sources_changed(tx, [mid], withdraw=False)  # a digest may now be in this scope too
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
            self._sources_changed(tx, [mid], withdraw=True)  # its digest must not stay readable there
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
