"""``mnemograph import``: a Mnemograph export (into a new store, or merged), or another tool's memory.

Another tool's memory goes into one scope. Where that scope sits decides which clients recall it, so the command
says so: a new ``project:`` scope is placed inside the personal scope, as ``setup --project`` places it (a
client of that project then recalls it with the personal memory); any other new scope is top-level, which the
personal clients do not read, and the output says how to change that. An import that recognises nothing in the
file is an error, not "0 imported".
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from server._runtime import RuntimePaths
from server.settings import Settings

_NOTHING = {
    "mem0": "a Mem0 export is what get_all() returns: items with a `memory` field (the MCP memory server's "
    "memory.jsonl is --from mcp-memory)",
    "mcp-memory": "the MCP memory server's memory.jsonl holds entity and relation lines (a Mem0 export is "
    "--from mem0)",
    "markdown": "give a folder holding .md notes",
    "jsonl": 'each line is a memory: {"content": "...", "scopes": ["user:ana"]} (see docs/cli.md)',
}


def run_import(args: argparse.Namespace, settings: Settings, paths: RuntimePaths) -> int:
    if args.source != "mnemograph":
        return _import_other(args, settings, paths)
    data_dir = settings.data_dir
    if data_dir.exists() and (not data_dir.is_dir() or any(data_dir.iterdir())):
        return _merge_export(args, settings, paths)
    from server._progress import Progress
    from storage import Engine, MnemographError

    bar = Progress("mnemograph import")
    try:
        with open(args.file, encoding="utf-8") if args.file != "-" else sys.stdin as source:
            summary = Engine.import_export(data_dir, source, progress=bar.callback())
    except (OSError, MnemographError) as exc:
        bar.close()
        print(f"mnemograph import: {exc}", file=sys.stderr)
        return 2
    bar.close()
    if args.json:
        print(json.dumps({"memories": summary.memories, "scopes": summary.scopes, "entities": summary.entities,
                          "relations": summary.relations, "reembedded": summary.reembedded,
                          "proposals": summary.proposals, "data_dir": str(summary.data_dir)}))  # fmt: skip
        return 0
    print(
        f"imported {summary.memories} memories, {summary.scopes} scopes, {summary.entities} entities, "
        f"{summary.relations} relations and {summary.proposals} entity proposals into {summary.data_dir} "
        f"({summary.reembedded} embedded again)"
    )
    return 0


def _merge_export(args: argparse.Namespace, settings: Settings, paths: RuntimePaths) -> int:
    """An export into a store that already holds memories: merged through its owner (or directly if none runs)."""
    from server._admin import AdminError

    if args.file == "-":
        print(
            "mnemograph import: merging into an existing store reads a file, not standard input; "
            "save the export to a file and pass its path",
            file=sys.stderr,
        )
        return 2
    source = Path(args.file).expanduser().resolve()
    if not source.is_file():
        print(f"mnemograph import: {args.file} is not a file; pass a file written by mnemograph export",
              file=sys.stderr)  # fmt: skip
        return 2
    body = {"format": "mnemograph", "path": str(source)}
    try:
        report = _run_import(body, settings, paths)
    except AdminError as exc:
        print(f"mnemograph import: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report))
        return 0
    print(
        f"imported {report['memories'] + report['already']} memories from {args.file} into {report['data_dir']}: "
        f"{report['memories']} new, {report['already']} already there ({report['reembedded']} embedded again)"
    )
    return 0


def _import_other(args: argparse.Namespace, settings: Settings, paths: RuntimePaths) -> int:
    from server._admin import AdminError
    from server.cli import is_store

    personal = settings.default_scopes[0]
    scope = args.scope or personal
    body = {"format": args.source, "path": str(Path(args.file).expanduser().resolve()), "scope": scope}
    try:
        before = _scopes(settings, paths) if is_store(settings.data_dir) else {}
        report = _run_import(body, settings, paths)
        if not report["read"]:
            print(
                f"mnemograph import: found nothing to import in {args.file} as --from {args.source}; "
                f"{_NOTHING.get(args.source, 'check the file and --from')}. Nothing was changed.",
                file=sys.stderr,
            )
            return 2
        parent = _place(scope, personal, before, settings, paths)
        # Lines of a jsonl file may name their own scopes: say where each went, as for the one given.
        targets = list(report.get("scopes") or ()) or [scope]
        others = [s for s in targets if s != scope]
        after = _scopes(settings, paths) if others else {}
    except AdminError as exc:
        print(f"mnemograph import: {exc}", file=sys.stderr)
        return 2
    where = _where(scope, parent, personal, new=scope not in before)
    notes = [where if scope in targets else ""]
    notes += [_where(s, after.get(s), personal, new=s not in before) for s in others]
    notes = [n for n in notes if n]
    if args.json:
        print(json.dumps({**report, "scope_parent": parent, "note": " ".join(notes)}))
        return 0
    into = ", ".join(targets)
    print(
        f"imported {report['read']} {'memory' if report['read'] == 1 else 'memories'} from {args.file} "
        f"({args.source}) into {into}: {report['added']} new, {report['duplicate']} already there, "
        f"{report['linked']} linked from other scopes"
    )
    for note in notes:
        print(note)
    return 0


def _run_import(body: dict[str, str], settings: Settings, paths: RuntimePaths) -> dict[str, Any]:
    """Hand an import to the store's owner (started if none runs), with the store options this CLI was given."""
    from server._admin import run_admin
    from server._engine import store_options

    return run_admin(
        "import",
        paths,
        timeout=settings.spawn_timeout,
        args=body,
        label="mnemograph import",
        setup=store_options(settings.functional_predicates, settings.transitive_predicates),
    )


def _scopes(settings: Settings, paths: RuntimePaths) -> dict[str, str | None]:
    from server._admin import run_scope

    request = {"op": "list", "scope": None, "parent": None, "principal": settings.principal}
    listed = run_scope(paths, request, timeout=settings.spawn_timeout)["scopes"]
    return {s["id"]: s["parent"] for s in listed}


def _place(
    scope: str, personal: str, before: dict[str, str | None], settings: Settings, paths: RuntimePaths
) -> str | None:
    """The scope's parent after the import; a project scope the import created goes inside the personal one."""
    from server._admin import run_scope

    if scope in before:
        return before[scope]
    if scope.startswith("project:") and scope != personal:
        request = {"op": "move", "scope": scope, "parent": personal, "principal": settings.principal}
        run_scope(paths, request, timeout=settings.spawn_timeout)
        return personal
    return _scopes(settings, paths).get(scope)


def _where(scope: str, parent: str | None, personal: str, *, new: bool) -> str:
    """Which clients recall the imported memories: the line a person needs after importing into a scope."""
    if scope == personal:
        return ""  # your personal scope: every client set up without --project recalls it
    name = scope.split(":", 1)[1]
    if parent == personal:
        return (
            f"{scope} is {'a new scope placed ' if new else ''}inside {personal}: clients set up with "
            f"`mnemograph setup CLIENT --project {name}` recall it together with your personal memory; your "
            f"other clients recall it only when a call names {scope} (or asks for the scopes inside {personal})"
        )
    if parent is None:
        return (
            f"note: {scope} is {'a new ' if new else 'a '}top-level scope, which your clients (default scope "
            f"{personal}) do not recall. To have them recall it, place it inside your personal scope: "
            f"`mnemograph scope move {scope} --parent {personal}`, or import into {personal} (omit --scope)"
        )
    return f"{scope} is inside {parent}: clients whose default scope is {scope} or inside it recall it"
