"""The UI's read pages: search, scopes, a memory, the timeline, the entity graph, the audit log."""

from __future__ import annotations

import json
from typing import Any

from starlette.responses import Response

from scopes import Level, ScopeId
from server.ui._svg import layout
from server.ui._web import Ctx, Refused, Web, parent_map
from storage import Hit, Memory, MemoryRecord, ScopeInfo, Status
from storage.engine.audit import AuditLog
from storage.engine.explore import neighbourhood, timeline

PAGE = 50


class Pages:
    def __init__(self, web: Web, audit: AuditLog) -> None:
        self.web = web
        self.audit = audit

    async def search(self, ctx: Ctx) -> Response:
        params = ctx.request.query_params
        query = params.get("q", "").strip()
        scope = params.get("scope", "").strip() or None
        history = params.get("history") == "1"
        me = ctx.user
        scopes = await ctx.run(lambda e: e.list_scopes(principal=me))
        hits: list[Hit] = []
        if query:
            hits = await ctx.run(
                lambda e: e.recall(
                    query, [scope] if scope else None, k=20, include_history=history, principal=me
                )
            )
        rows = [(h, explain(h)) for h in hits]
        return self.web.page(
            ctx, "search.html", query=query, scope=scope, history=history, scopes=scopes, rows=rows
        )

    async def scopes(self, ctx: Ctx) -> Response:
        me = ctx.user
        chosen = ctx.request.query_params.get("scope") or None
        cursor = ctx.request.query_params.get("cursor") or None
        scopes = await ctx.run(lambda e: e.list_scopes(principal=me))
        listing = None
        if chosen:
            listing = await ctx.run(lambda e: e.list(chosen, cursor=cursor, limit=PAGE, principal=me))
        return self.web.page(
            ctx, "scopes.html", tree=tree_rows(scopes), chosen=chosen, listing=listing, cursor=cursor
        )

    async def memory(self, ctx: Ctx) -> Response:
        me = ctx.user
        mid = ctx.request.path_params["id"]
        record: MemoryRecord = await ctx.run(lambda e: e.read(mid, principal=me))
        scopes = await ctx.run(lambda e: e.list_scopes(principal=me))
        tree = parent_map(scopes)
        m = record.memory
        sids = [ScopeId.parse(s) for s in m.scopes]
        current = m.status is Status.CURRENT
        # What the page offers; the Engine checks again on every post (a hidden control is not a defence).
        can_write = current and bool(sids) and all(me.may(Level.WRITE, s, tree) for s in sids)
        can_erase = bool(sids) and all(me.may(Level.ADMIN, s, tree) for s in sids)
        done = ctx.request.query_params.get("done", "")
        return self.web.page(
            ctx,
            "memory.html",
            m=m,
            versions=record.versions,
            can_write=can_write,
            can_erase=can_erase,
            done=_DONE.get(done, ""),
            metadata=json.dumps(m.metadata, indent=2, ensure_ascii=False, default=str) if m.metadata else "",
        )

    async def timeline(self, ctx: Ctx) -> Response:
        me = ctx.user
        scope = ctx.request.query_params.get("scope") or None
        page = _int(ctx.request.query_params.get("page"), 0)
        found = await ctx.run(
            lambda e: timeline(e, scope=scope, offset=page * PAGE, limit=PAGE, principal=me)
        )
        days: dict[str, list[Memory]] = {}
        for m in found.items:
            days.setdefault(m.event_time.strftime("%Y-%m-%d"), []).append(m)
        more = (page + 1) * PAGE < found.total
        return self.web.page(ctx, "timeline.html", days=days, found=found, page=page, more=more, scope=scope)

    async def graph(self, ctx: Ctx) -> Response:
        me = ctx.user
        params = ctx.request.query_params
        memory, entity = params.get("memory") or None, params.get("entity") or None
        if memory is None and entity is None:
            raise Refused(
                400, "the graph is drawn around a memory or an entity", "open it from a memory's page"
            )
        hood = await ctx.run(lambda e: neighbourhood(e, memory=memory, entity=entity, principal=me))
        return self.web.page(ctx, "graph.html", hood=hood, drawing=layout(hood), memory=memory, entity=entity)

    async def audit_log(self, ctx: Ctx) -> Response:
        me = ctx.user
        page = _int(ctx.request.query_params.get("page"), 0)
        scopes = await ctx.run(lambda e: e.list_scopes(principal=me))
        tree = parent_map(scopes)
        events = list(reversed(self.audit.events()))

        def shown(event: dict[str, Any]) -> bool:
            # The local user sees everything; others see their own actions and what happened in scopes they
            # administer (every scope the event names), never other principals' private business.
            if me.unrestricted or event.get("principal") == me.name:
                return True
            named = event.get("scopes") or []
            return bool(named) and all(_admin_on(me, s, tree) for s in named)

        visible = [e for e in events if shown(e)]
        rows = visible[page * PAGE : (page + 1) * PAGE]
        more = (page + 1) * PAGE < len(visible)
        return self.web.page(ctx, "audit.html", rows=rows, page=page, more=more, total=len(visible))


def explain(hit: Hit) -> list[str]:
    """Why a result is here, in words: the lanes that found it (with ranks), the time rule, graph paths."""
    names = {"bm25": "words", "text": "words", "vector": "meaning", "graph": "entity graph"}
    out = [
        f"{names.get(lane, lane)} #{rank}" for lane, rank in sorted(hit.lanes.items(), key=lambda kv: kv[1])
    ]
    if not hit.lanes:
        out.append("an earlier version, shown to complete the history")
    if hit.time is not None:
        out.append(f"time: {hit.time.rule.replace('_', ' ')} “{hit.time.expression}” ×{hit.time.factor:g}")
    out.extend(f"path: {p}" for p in hit.paths)
    if hit.collapsed:
        out.append(f"{len(hit.collapsed)} near-duplicate(s) folded in")
    return out


def tree_rows(scopes: list[ScopeInfo]) -> list[tuple[int, ScopeInfo, int]]:
    """Scopes in tree order with their depth and their subtree's total of current memories."""
    children: dict[str | None, list[ScopeInfo]] = {}
    for s in scopes:
        children.setdefault(s.parent, []).append(s)

    def total(s: ScopeInfo) -> int:
        return s.memories + sum(total(c) for c in children.get(s.id, []))

    out: list[tuple[int, ScopeInfo, int]] = []

    def walk(s: ScopeInfo, depth: int) -> None:
        out.append((depth, s, total(s)))
        for c in sorted(children.get(s.id, []), key=lambda x: x.id):
            walk(c, depth + 1)

    for root in sorted(children.get(None, []), key=lambda x: x.id):
        walk(root, 0)
    return out


def _admin_on(me: Any, scope: str, tree: dict[ScopeId, ScopeId]) -> bool:
    try:
        return bool(me.may(Level.ADMIN, ScopeId.parse(scope), tree))
    except ValueError:
        return False


def _int(raw: str | None, default: int) -> int:
    return int(raw) if raw is not None and raw.isdigit() and len(raw) < 7 else default


_DONE = {
    "amended": "Amended: this is the new version; the old one is kept in the chain below.",
    "retired": "Retired: this memory no longer appears in recall; history keeps it.",
}
