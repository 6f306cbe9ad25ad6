"""``mnemograph list|show|search|forget``: memory from the terminal, for people (or ``--json``).

The operations themselves are in ``server._memories``; they run in the owner when one serves the directory.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from typing import Any

from server._runtime import RuntimePaths
from server.settings import Settings


def run_memory_command(args: argparse.Namespace, settings: Settings, paths: RuntimePaths) -> int:
    from server._admin import AdminError, run_admin

    op = args.name
    if op == "list":
        body: dict[str, Any] = {
            "scope": args.scope,
            "kinds": args.kind or [],
            "since": args.since,
            "until": args.until,
            "limit": args.limit,
            "offset": (args.page - 1) * args.limit,
            "all": args.all,
        }
    elif op == "show":
        body = {"id": args.id}
    elif op == "search":
        body = {
            "query": " ".join(args.query),
            "scopes": args.scope or None,
            "k": args.k,
            "history": args.history,
            "descendants": args.descendants,
        }
    else:
        body = {"id": args.id, "reason": args.reason}
    try:
        result = run_admin(op, paths, timeout=settings.spawn_timeout, args=body)
    except AdminError as exc:
        print(f"mnemograph {op}: {for_terminal(str(exc))}", file=sys.stderr)
        return 2
    if args.json:
        result.pop("ok", None)
        print(json.dumps(result, indent=2, ensure_ascii=False))
        return 0
    print({"list": _list, "show": _show, "search": _search, "forget": _forget}[op](result, args))
    return 0


# The owner's messages speak to agents, in MCP tool names; in a terminal, name the commands instead.
_TERMINAL_WORDS = (
    ("call recall", "run `mnemograph search`"),
    ("call list_scopes", "run `mnemograph scope list`"),
    ("call memory_read", "run `mnemograph show ID`"),
)


def for_terminal(message: str) -> str:
    for tool, command in _TERMINAL_WORDS:
        message = message.replace(tool, command)
    return message


def _line(m: dict[str, Any]) -> str:
    when = m["recorded_at"][:16].replace("T", " ")
    status = "" if m["status"] == "current" else f" [{m['status']}]"
    text = " ".join(m["content"].split())
    if len(text) > 90:
        text = text[:89] + "…"
    return f"{m['id'][:12]}  {when}  {m['kind']:<10} {','.join(m['scopes'])}{status}\n    {text}"


def _list(result: dict[str, Any], args: argparse.Namespace) -> str:
    memories = result["memories"]
    if not memories:
        return "no memories" + (" on this page" if result["offset"] else " match")
    first = result["offset"] + 1
    lines = [_line(m) for m in memories]
    lines.append(f"{first}-{first + len(memories) - 1} of {result['total']}, newest first")
    if result["next_offset"] is not None:
        lines[-1] += f"; next: --page {args.page + 1}"
    return "\n".join(lines)


def _show(result: dict[str, Any], args: argparse.Namespace) -> str:
    m = result["memory"]
    p = m["provenance"]
    lines = [
        f"{m['id']}  ({m['kind']}, {m['status']})",
        textwrap.fill(m["content"], width=100, initial_indent="  ", subsequent_indent="  "),
        f"scopes:    {', '.join(m['scopes'])}",
        f"written by {p['principal']}"
        + (f" via {p['client']}" if p["client"] else "")
        + (f" ({p['source']})" if p["source"] else ""),
        f"recorded   {m['recorded_at']}",
        f"event time {m['event_time']}",
        f"valid      {m['valid_from']} – {m['valid_to'] or 'now'}",
    ]
    if m["retired_at"]:
        lines.append(
            f"retired    {m['retired_at']}" + (f": {m['retire_reason']}" if m["retire_reason"] else "")
        )
    if m["entities"]:
        lines.append(f"entities:  {', '.join(m['entities'])}")
    for r in result["relations"]:
        lines.append(f"relation:  {r['subject']} —{r['predicate']}→ {r['object']}")
    if m["metadata"]:
        lines.append(f"metadata:  {json.dumps(m['metadata'], ensure_ascii=False)}")
    if len(result["versions"]) > 1:
        lines.append("versions (oldest first):")
        for v in result["versions"]:
            mark = "→" if v["id"] == m["id"] else " "
            lines.append(
                f" {mark} {v['id'][:12]}  {v['recorded_at'][:19]}  {v['status']:<10} {v['content'][:60]}"
            )
    return "\n".join(lines)


def _search(result: dict[str, Any], args: argparse.Namespace) -> str:
    hits = result["results"]
    if not hits:
        return "nothing found"
    lines = []
    for n, h in enumerate(hits, 1):
        lanes = (
            ", ".join(f"{lane} #{rank}" for lane, rank in sorted(h["lanes"].items())) or "added for history"
        )
        lines.append(f"{n:>2}. {_line(h)}\n    score {h['score']:.4f}; found by {lanes}")
        lines.extend(f"    via {path}" for path in h["paths"])
        if h["time"]:
            lines.append(f"    time: {h['time']}")
    return "\n".join(lines)


def _forget(result: dict[str, Any], args: argparse.Namespace) -> str:
    return (
        f"retired {result['id']} at {result['retired_at']}: recall no longer returns it (history does); "
        f"to remove it from disk entirely: mnemograph erase {result['id']} --confirm {result['id']}"
    )
