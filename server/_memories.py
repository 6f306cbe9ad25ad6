"""Looking at memory from the terminal: ``list``, ``show``, ``search`` and ``forget``, as the local principal.

These run where the store is open: in the owner when one serves the data directory (``server._admin`` sends
them over its private socket), else in the CLI itself. Each returns plain JSON, which ``server._cli_memory``
prints for people.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from storage.domain.errors import InvalidInput
from storage.domain.records import entity_key

if TYPE_CHECKING:
    from storage import Engine
    from storage.domain.models import Hit, Memory

MEMORY_OPS = ("list", "show", "search", "forget", "export_markdown")
MAX_PAGE = 500
_SCAN = 500  # memories per Engine.list page while collecting


def perform_memory_op(engine: Engine, op: str, args: dict[str, Any]) -> dict[str, Any]:
    if op == "list":
        return _list(engine, args)
    if op == "show":
        return _show(engine, str(args.get("id", "")))
    if op == "search":
        return _search(engine, args)
    if op == "export_markdown":
        return _export_markdown(engine, args)
    if op == "forget":
        receipt = engine.retire(
            str(args.get("id", "")), reason=str(args.get("reason") or "forgotten from the CLI")
        )
        return {"ok": True, "id": receipt.id, "retired_at": receipt.retired_at.isoformat()}
    raise InvalidInput(f"unknown operation {op!r}")


def memory_json(m: Memory) -> dict[str, Any]:
    return {
        "id": m.id,
        "content": m.content,
        "kind": str(m.kind),
        "status": str(m.status),
        "scopes": list(m.scopes),
        "entities": list(m.entities),
        "provenance": {
            "principal": m.provenance.principal,
            "client": m.provenance.client,
            "source": m.provenance.source,
        },
        "metadata": m.metadata,
        "event_time": m.event_time.isoformat(),
        "valid_from": m.valid_from.isoformat(),
        "valid_to": m.valid_to.isoformat() if m.valid_to else None,
        "recorded_at": m.recorded_at.isoformat(),
        "retired_at": m.retired_at.isoformat() if m.retired_at else None,
        "retire_reason": m.retire_reason,
        "supersedes": m.supersedes,
        "superseded_by": m.superseded_by,
    }


def _list(engine: Engine, args: dict[str, Any]) -> dict[str, Any]:
    """Memories in a scope (and the scopes inside it) or everywhere, newest first, one page at a time."""
    limit, offset = int(args.get("limit") or 20), int(args.get("offset") or 0)
    if not 1 <= limit <= MAX_PAGE or offset < 0:
        raise InvalidInput(f"--limit must be from 1 to {MAX_PAGE} and --offset at least 0")
    scope = args.get("scope")
    scopes = [s.id for s in engine.list_scopes(scope)]
    kinds = set(args.get("kinds") or ())
    since, until = _time(args.get("since"), "--since"), _time(args.get("until"), "--until")
    include_retired = bool(args.get("all"))
    found: dict[str, Memory] = {}
    for sid in scopes:
        cursor = None
        while True:
            page = engine.list(sid, cursor=cursor, include_retired=include_retired, limit=_SCAN)
            for m in page.items:
                if kinds and str(m.kind) not in kinds:
                    continue
                if (since and m.recorded_at < since) or (until and m.recorded_at >= until):
                    continue
                found[m.id] = m
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
    ordered = sorted(found.values(), key=lambda m: (m.recorded_at, m.id), reverse=True)
    chosen = ordered[offset : offset + limit]
    more = offset + limit < len(ordered)
    return {
        "ok": True,
        "total": len(ordered),
        "offset": offset,
        "next_offset": offset + limit if more else None,
        "memories": [memory_json(m) for m in chosen],
    }


def _show(engine: Engine, mid: str) -> dict[str, Any]:
    record = engine.read(mid)
    m = record.memory
    relations = []
    with engine.graph.read() as conn:
        for entity in m.entities:
            for r in engine.graph.relations(conn, entity_key(entity), limit=50):
                if r.memory_id == m.id and r.outgoing:
                    relations.append({"subject": entity, "predicate": r.predicate, "object": r.other_name})
    return {
        "ok": True,
        "memory": memory_json(m),
        "versions": [memory_json(v) for v in record.versions],
        "relations": relations,
    }


def _search(engine: Engine, args: dict[str, Any]) -> dict[str, Any]:
    scopes = args.get("scopes") or None
    hits = engine.recall(
        str(args.get("query", "")),
        scopes,
        k=int(args.get("k") or 10),
        include_history=bool(args.get("history")),
        descendants=bool(args.get("descendants")),
    )
    return {"ok": True, "results": [_hit_json(h) for h in hits]}


def _hit_json(hit: Hit) -> dict[str, Any]:
    return {
        **memory_json(hit.memory),
        "score": hit.score,
        "lanes": hit.lanes,
        "time": f"{hit.time.rule} ({hit.time.expression})" if hit.time else None,
        "paths": list(hit.paths),
        "collapsed": list(hit.collapsed),
    }


def _export_markdown(engine: Engine, args: dict[str, Any]) -> dict[str, Any]:
    """One ``ID.md`` per memory in ``path`` (private: 0700 folder, 0600 files), its metadata as front matter."""
    folder = Path(str(args["path"]))
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    written = 0
    page: dict[str, Any] = {"next_offset": 0}
    while page["next_offset"] is not None:
        query = {
            "scope": args.get("scope"),
            "all": args.get("all"),
            "limit": MAX_PAGE,
            "offset": page["next_offset"],
        }
        page = _list(engine, query)
        for m in page["memories"]:
            fd = os.open(folder / f"{m['id']}.md", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with open(fd, "w", encoding="utf-8") as out:
                out.write(markdown_of(m))
            written += 1
    return {"ok": True, "path": str(folder), "memories": written}


def markdown_of(m: dict[str, Any]) -> str:
    """A memory as markdown: YAML front matter (every value JSON-encoded, which YAML reads as-is), then its text."""
    keys = ("id", "kind", "status", "scopes", "entities", "event_time", "valid_from", "valid_to", "recorded_at",
            "retired_at", "retire_reason", "supersedes", "superseded_by", "provenance", "metadata")  # fmt: skip
    lines = [
        "---",
        *(f"{k}: {json.dumps(m[k], ensure_ascii=False)}" for k in keys if m[k] not in (None, "")),
        "---",
    ]
    return "\n".join(lines) + "\n\n" + m["content"] + "\n"


def _time(value: object, flag: str) -> datetime | None:
    if not value:
        return None
    try:
        when = datetime.fromisoformat(str(value))
    except ValueError:
        raise InvalidInput(f"{flag} must be an ISO date or time, e.g. 2026-05-01, got {value!r}") from None
    return when if when.tzinfo else when.astimezone()
