"""The ``mnemograph`` command.

- ``mnemograph serve``: MCP over stdio, for clients that launch their server (Claude Desktop, Claude Code,
  Cursor, VS Code). ``--transport http`` serves streamable HTTP at /mcp (and /healthz) instead.
- ``mnemograph ui``: the web UI (docs/ui.md) on loopback, opened in a browser with a one-time sign-in link.
- ``mnemograph verify`` / ``reindex``: check the stores agree / rebuild the derived ones, with or without a
  server running.
- ``mnemograph erase ID --confirm ID``: forget one memory and every version of it, for real.
- ``mnemograph export [--scope S] [--vectors] [-o FILE]`` / ``import FILE``: JSON Lines out of a store / into a
  new, empty one. ``mnemograph backup DIR``: a consistent copy of the stores, taken while a server serves.
- ``mnemograph scope create|move|list|zone``: manage the scope tree and a scope's time zone (as the local
  principal), same.
- ``mnemograph token create|list|revoke``: bearer tokens for HTTP clients; they work on the token file, so
  with or without a server running, and a revoke reaches a running server at once.
- ``mnemograph daemon``: the owner process itself; front-ends start it on demand, so you rarely run it.

Each command imports what it needs when it runs, not at the top of this module: ``serve`` over stdio must
answer the MCP handshake fast and needs only the standard library, while the owner needs the SDK and the
HTTP front needs the web stack.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from server._cli_parser import command_name, parse
from server._runtime import RuntimeDirError, RuntimePaths
from server.settings import Settings, SettingsError, load_settings

_BROKEN_PIPE = 128 + 13  # SIGPIPE's number on Linux and macOS: the status `git log | head` leaves


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    # Everything this process and the owners it starts create (stores, logs, tokens, backups, exports) is
    # private to this user from birth: the data directory is the boundary against other local accounts.
    # (The literal, not storage.engine.private_files's constant: the stdio fast path imports no storage module.)
    os.umask(0o077)
    args = parse(list(argv) if argv is not None else None)
    data_dir = getattr(args, "data_dir", None)
    try:
        settings = load_settings(
            data_dir=data_dir,
            default_scopes=getattr(args, "default_scope", None),
            host=getattr(args, "host", None),
            port=getattr(args, "port", None),
            idle_timeout=getattr(args, "idle_timeout", None),
            no_auth=getattr(args, "no_auth", None) or None,
            canonical=getattr(args, "canonical", None),
        )
        paths = RuntimePaths.of(settings.runtime_dir, settings.data_dir)
    except (SettingsError, RuntimeDirError) as exc:
        print(f"mnemograph: {exc}", file=sys.stderr)
        return 2
    if settings.canonical:
        # storage.compose opens the canonical store it names, in this process and in the owner it may start.
        os.environ["MNEMOGRAPH_CANONICAL"] = settings.canonical
    if getattr(args, "needs_store", False) and not is_store(settings.data_dir):
        print(
            f"{command_name(args)}: {_no_store(settings.data_dir, given=data_dir is not None)}",
            file=sys.stderr,
        )
        return 2
    try:
        status: int = _COMMANDS[args.command](args, settings, paths)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`mnemograph list | head`): stop quietly, as commands killed by SIGPIPE do. The
        # output still buffered would fail again when Python flushes it at exit, so stdout goes nowhere now.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return _BROKEN_PIPE
    return status


def is_store(data_dir: Path) -> bool:
    """True when ``data_dir`` holds a Mnemograph store: the canonical graph (a backup has only the stores), the
    lock file of one ever opened, or the token file `token create` makes before a first serve."""
    return (data_dir / "graph").exists() or any(
        (data_dir / f).is_file() for f in ("owner.lock", "tokens.json")
    )


def _no_store(data_dir: Path, *, given: bool) -> str:
    where = "--data-dir" if given else "the data directory"
    return (
        f"no Mnemograph store at {data_dir} ({where}); check the path for a typo. A store is created by "
        "`mnemograph serve` (a client's first connection) or `mnemograph import`; "
        "`mnemograph status` lists the stores being served"
    )


def _ui(args: argparse.Namespace, settings: Settings, paths: RuntimePaths) -> int:
    from server._ui_launch import run_ui

    return run_ui(settings, paths, open_browser=not args.no_browser)


def _daemon(args: argparse.Namespace, settings: Settings, paths: RuntimePaths) -> int:
    from server._daemon import ReadyPipe, detach, limit_malloc_arenas, take_owner_lock

    if args.detach:
        detach()  # before any import that could start a thread
    limit_malloc_arenas()  # likewise before any thread: glibc settles its arena limit as threads first allocate
    pipe = ReadyPipe(args.ready_fd)
    lock = take_owner_lock(paths, timeout=settings.spawn_timeout)
    if lock is None:
        print(f"mnemograph: another process owns {paths.data_dir}", file=sys.stderr)
        pipe.busy()
        return 0
    try:
        import anyio

        from server import owner

        owner.configure_logging(settings.log_level)
        anyio.run(owner.serve, settings, paths, pipe)
    except BaseException as exc:
        pipe.failed(f"{type(exc).__name__}: {exc}")  # a no-op once ready was reported
        raise
    finally:
        paths.info_file.unlink(missing_ok=True)
        os.close(lock)
    return 0


def _admin(args: argparse.Namespace, settings: Settings, paths: RuntimePaths) -> int:
    import json
    import tempfile
    from pathlib import Path

    from server._admin import AdminError, run_admin
    from server._engine import store_options

    op_args: dict[str, Any] = {}
    to_stdout = False
    if args.op == "erase":
        op_args = {"id": args.id, "confirm": args.confirm, "reason": args.reason}
    elif args.op == "entities":
        op_args = {
            "action": args.action,
            "id": args.id,
            "status": args.status,
            "limit": args.limit,
            "cursor": args.cursor,
        }
    elif args.op == "backup":
        op_args = {"path": str(Path(args.dir).expanduser().resolve())}
    elif args.op == "export" and args.format == "markdown":
        if args.output in (None, "-"):
            print("mnemograph export: markdown needs a folder: -o DIR", file=sys.stderr)
            return 2
        args.op = "export_markdown"
        op_args = {
            "path": str(Path(args.output).expanduser().resolve()),
            "scope": args.scope,
            "all": args.all,
        }
    elif args.op == "export":
        to_stdout = args.output in (None, "-")
        if to_stdout:  # the owner writes a private file in the runtime directory; we stream it out
            paths.ensure()
            fd, name = tempfile.mkstemp(prefix="export-", suffix=".jsonl", dir=paths.root)
            os.close(fd)
            target = Path(name)
        else:
            target = Path(args.output).expanduser().resolve()
        op_args = {"path": str(target), "scope": args.scope, "vectors": args.vectors}
    try:
        long_running = args.op in ("export", "export_markdown", "reindex", "backup", "digests", "sweep")
        report = run_admin(
            args.op,
            paths,
            timeout=settings.spawn_timeout,
            args=op_args,
            label=f"mnemograph {args.op.replace('_markdown', '')}" if long_running else None,
            setup=store_options(settings.functional_predicates, settings.transitive_predicates),
        )
        if to_stdout:
            with open(op_args["path"], encoding="utf-8") as exported:
                for line in exported:
                    sys.stdout.write(line)
            sys.stdout.flush()
    except AdminError as exc:
        from server._cli_memory import for_terminal

        print(f"mnemograph {args.op}: {for_terminal(str(exc))}", file=sys.stderr)
        return 2
    finally:
        if to_stdout:
            os.unlink(op_args["path"])
    if args.op == "export":
        print(
            json.dumps(report) if args.json else _summary(report),
            file=sys.stderr if to_stdout else sys.stdout,
        )
    elif args.json:
        print(json.dumps(report, indent=2))
    elif args.op in ("verify", "reindex"):
        print(_format_report(report, args.data_dir))
    elif args.op == "digests":
        print(f"{report['digests_built']} conversation digest(s) rebuilt")
    elif args.op == "sweep":
        print(f"{report['contradictions_linked']} contradiction(s) linked")
    elif args.op == "entities":
        from server._cli_memory import for_terminal

        for p in report["proposals"]:
            print(
                for_terminal(
                    f"{p['id'][:12]}  {p['status']:<8}  {p['a']!r} same as {p['b']!r}  "
                    f"({p['tier']}, {p['score']:.2f}; memory {p['memory_id'][:12]})"
                )
            )
        if not report["proposals"]:
            print("no proposals")
        if report.get("next_cursor"):
            print(
                "more: mnemograph entities list "
                + (f"--data-dir {shlex.quote(str(args.data_dir))} " if args.data_dir else "")
                + f"--status {args.status} --limit {args.limit} "
                f"--cursor {report['next_cursor']}"
            )
    elif args.op == "erase":
        print(
            f"erased {report['id']}: {len(report['erased'])} version(s) removed from every store and its history; "
            f"{report['entities_deleted']} entities it alone mentioned deleted"
        )
    else:
        print(_summary(report))
    return 0 if report["ok"] else 1


def _import(args: argparse.Namespace, settings: Settings, paths: RuntimePaths) -> int:
    from server._cli_import import run_import

    return run_import(args, settings, paths)


def _memory(args: argparse.Namespace, settings: Settings, paths: RuntimePaths) -> int:
    from server._cli_memory import run_memory_command

    return run_memory_command(args, settings, paths)


def _summary(report: dict[str, Any]) -> str:
    skip = {"ok", "per_store"}
    return ", ".join(
        f"{key}: {len(value) if isinstance(value, list) else value}"
        for key, value in report.items()
        if key not in skip and value is not None  # e.g. no --scope: not "scope: None"
    )


def _scope(args: argparse.Namespace, settings: Settings, paths: RuntimePaths) -> int:
    from server._admin import AdminError, run_scope

    request = {
        "op": args.op,
        "scope": getattr(args, "scope", None),
        "parent": getattr(args, "parent", None),
        "zone": getattr(args, "zone", None),
        "principal": settings.principal,
    }
    try:
        result = run_scope(paths, request, timeout=settings.spawn_timeout)
    except AdminError as exc:
        print(f"mnemograph scope {args.op}: {exc}", file=sys.stderr)
        return 2
    if args.op == "zone":
        if args.json:
            import json

            print(json.dumps({"scope": args.scope, "zone": result["zone"]}))
        else:
            print(f"{args.scope}: days and weeks in {result['zone']}")
        return 0
    if args.json:
        import json

        print(json.dumps(result["scopes"], indent=2))
        return 0
    for s in result["scopes"]:
        inside = f"  (inside {s['parent']})" if s["parent"] else ""
        print(f"{s['id']:<40} {s['memories']:>7} memories{inside}")
    return 0


def _token(args: argparse.Namespace, settings: Settings, paths: RuntimePaths) -> int:
    import json

    from server._tokens import TokenError, TokenStore
    from storage.engine.audit import AUDIT_FILE, AuditLog
    from storage.engine.private_files import make_private

    tokens = TokenStore(settings.data_dir)
    audit = AuditLog(settings.data_dir / AUDIT_FILE)
    try:
        if args.op == "create":
            TokenStore.check(args.token_name, args.grant or [])  # a refused token creates no directory
            make_private(settings.data_dir)
            value, info = tokens.create(args.token_name, args.grant or [])
            grants = [str(g) for g in info.grants]
            audit.record(
                "token_create", principal=settings.principal, client="cli", token=info.name, grants=grants
            )
            # The only time the token is shown; stdout carries nothing else.
            print(json.dumps({"name": info.name, "token": value, "grants": grants}) if args.json else value)
            print(f"token {info.name!r} created with {', '.join(grants)}; store it now", file=sys.stderr)
        elif args.op == "revoke":
            info = tokens.revoke(args.token_name)
            audit.record("token_revoke", principal=settings.principal, client="cli", token=info.name)
            if args.json:
                print(json.dumps({"name": info.name, "revoked": info.revoked}))
            print(f"token {info.name!r} revoked", file=sys.stderr)
        elif args.json:
            listed = [
                {
                    "name": i.name,
                    "grants": [str(g) for g in i.grants],
                    "created": i.created,
                    "revoked": i.revoked,
                }
                for i in tokens.all()
            ]
            print(json.dumps(listed, indent=2))
        else:
            if not tokens.all():
                # On stderr: stdout stays the list (empty), for a script reading it.
                print(
                    "no tokens yet; create one with `mnemograph token create --name NAME --grant SCOPE=r|w|admin` "
                    "(or `mnemograph setup http`)",
                    file=sys.stderr,
                )
            for info in tokens.all():
                state = f"revoked {info.revoked}" if info.revoked else "active"
                print(f"{info.name:<24} {state:<32} {' '.join(str(g) for g in info.grants)}")
    except TokenError as exc:
        print(f"mnemograph token {args.op}: {exc}", file=sys.stderr)
        return 2
    return 0


def _format_report(report: dict[str, Any], data_dir: str | None = None) -> str:
    """A verify (or reindex) report for the terminal: rows per store (a projection holding a memory twice
    counts both), the ids each disagrees on, and the command that repairs any drift."""
    lines = [f"{'store':<10} {'memories':>9}  {'watermark':>9}"]
    for store, count in sorted(report["counts"].items()):
        watermark = report["watermarks"].get(store, report["canonical_seq"])
        lines.append(f"{store:<10} {count:>9}  {watermark:>9}")
    lines.append(f"canonical: {report['canonical_memories']} memories ({report['live_memories']} live)")
    drift = {name: ids for name, ids in report["drift"].items() if ids}
    for name, ids in sorted(drift.items()):
        lines.append(f"drift {name}: {len(ids)} ({', '.join(ids[:5])}{', …' if len(ids) > 5 else ''})")
    where = f" --data-dir {shlex.quote(str(data_dir))}" if data_dir else ""
    lines.append(
        "ok"
        if report["ok"]
        else f"DRIFT: run `mnemograph reindex{where}` to rebuild the search indexes from the canonical store "
        "(it holds every memory: nothing is lost)"
    )
    return "\n".join(lines)


def _setup(args: argparse.Namespace, settings: Settings, paths: RuntimePaths) -> int:
    from server._client_files import ClientFileError
    from server._setup import SetupError, SetupRequest, run_setup

    request = SetupRequest(
        client=args.client,
        project=args.project,
        project_dir=Path(args.project_dir).expanduser().absolute() if args.project_dir else None,
        config=Path(args.config) if args.config else None,
        name=args.server_name or "",
        dry_run=args.print,
        data_dir_given=getattr(args, "data_dir", None) is not None,
        target=args.for_client,
        url=args.url,
        grants=args.grant or [],
        token_name=args.token_name,
    )
    try:
        return run_setup(request, settings, sys.stdout, sys.stderr)
    except (SetupError, ClientFileError, OSError) as exc:
        print(f"mnemograph setup: {exc}", file=sys.stderr)
        return 2


def _serve(args: argparse.Namespace, settings: Settings, paths: RuntimePaths) -> int:
    from server._cli_serve import serve

    return serve(args, settings, paths)


def _status(args: argparse.Namespace, settings: Settings, paths: RuntimePaths) -> int:
    from server._cli_serve import status

    return status(args, settings, paths)


def _stop(args: argparse.Namespace, settings: Settings, paths: RuntimePaths) -> int:
    from server._cli_serve import stop

    return stop(args, settings, paths)


Handler = Callable[[argparse.Namespace, Settings, RuntimePaths], int]
_COMMANDS: dict[str, Handler] = {
    "serve": _serve,
    "setup": _setup,
    "ui": _ui,
    "status": _status,
    "stop": _stop,
    "admin": _admin,
    "import": _import,
    "scope": _scope,
    "memory": _memory,
    "token": _token,
    "daemon": _daemon,
}
