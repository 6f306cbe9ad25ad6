"""Access: the scope tree as this process holds it, and who may read or write what."""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Mapping, Sequence

from scopes import (
    LOCAL_PRINCIPAL,
    Level,
    Principal,
    ScopeId,
    visible_scopes,
)
from storage.domain.errors import Conflict, NotFound, ScopeDenied
from storage.domain.models import (
    EntityIn,
    Memory,
    Status,
)
from storage.engine.state import (
    _State,
)
from storage.language.extraction import EntityLexicon
from storage.ports.canonical import Session


class _Access(_State):
    # -- scopes and access ------------------------------------------------------------------------

    def _reload_tree(self) -> None:
        with self.graph.read() as conn:
            scopes, parents = self.graph.scope_parents(conn)
        with self._tree_lock:
            self._scopes = set(scopes)
            self._parents = {ScopeId.parse(c): ScopeId.parse(p) for c, p in parents.items()}

    _tree_head = -1  # the shared log's head when the tree was last read (shared stores only)

    def _tree(self) -> dict[ScopeId, ScopeId]:
        if self.graph.shared:
            self._fresh_tree()
        with self._tree_lock:
            return dict(self._parents)

    def _fresh_tree(self) -> None:
        """A shared store: reload the scope tree when the change log's head moved since it was read. Every
        access decision goes through ``_tree``, and another node may have moved a scope out of a subtree (so
        its former readers must lose it here too, at once: 0328284 kept granting them until this node next
        applied a change) or purged one. One head read per decision; a reload only after a change."""
        with self.graph.read() as conn:
            head = self.graph.max_seq(conn)
        if head != self._tree_head:
            self._reload_tree()
            self._tree_head = head

    def _require_scope(self, scope: ScopeId) -> None:
        if self.graph.shared:
            self._fresh_tree()
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
                    hint=f"this needs {'an' if need.label[:1] in 'aeiou' else 'a'} '{need.label}' grant on {sid} or on a scope it sits inside; "
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

    def _reload_lexicon(self) -> None:
        # Built aside and swapped in whole: a recall or write meanwhile sees the old lexicon or the new one,
        # never an empty or half-filled one.
        fresh = EntityLexicon()
        with self.graph.read() as conn:
            for known in self.graph.known_entities(conn):
                fresh.add(known.name, known.aliases)
                fresh.mentioned(known.name, known.mentions)
                for scope, n in known.mentions_in:
                    fresh.mentioned_in(known.name, scope, n)
                fresh.related(known.name, known.relations)
            for p in self.graph.same_as(conn):
                fresh.paired(p.a, p.b, p.scopes, add=True)
                if p.status == "accepted":
                    fresh.join(p.a, p.b, p.scopes)
        self.lexicon.replace_with(fresh)

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

    def _require_current(self, m: Memory, action: str, principal: Principal, conn: Session) -> None:
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

    def _after_write(
        self,
        scopes: Sequence[str],
        entities: Sequence[EntityIn],
        per_memory: Sequence[tuple[Sequence[str], Sequence[EntityIn]]] | None = None,
    ) -> None:
        """Names into the lexicon once committed (relations are counted by ``_insert``, in the writer).
        Mentions are counted per memory in each of its scopes: ``per_memory`` (its scopes, its entities) when
        the memories went to different scopes, else each of ``entities`` once in each of ``scopes``."""
        for e in entities:
            self.lexicon.add(e.name, e.aliases)
        for where, named in per_memory if per_memory is not None else [(scopes, entities)]:
            for e in named:
                self.lexicon.mentioned(e.name, scopes=set(where))
        if any(s not in self._scopes for s in scopes):
            self._reload_tree()
