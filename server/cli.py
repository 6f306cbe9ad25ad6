"""The ``mnemograph`` command.

- ``mnemograph serve``: MCP over stdio, for clients that launch their server (Claude Desktop, Claude Code,
  Cursor, VS Code). ``--transport http`` serves streamable HTTP at /mcp (and /healthz) instead.
- ``mnemograph ui``: the web UI (docs/ui.md) on loopback, opened in a browser with a one-time sign-in link.
- ``mnemograph verify`` / ``reindex``: check the stores agree / rebuild the derived ones, with or without a
  server running.
- ``mnemograph erase ID --confirm ID``: forget one memory and every version of it, for real.
- ``mnemograph export [--scope S] [--vectors] [-o FILE]`` / ``import FILE``: JSON Lines out of a store / into a
  new, empty one. ``mnemograph backup DIR``: a consistent copy of the stores, taken while a server serves.
- ``mnemograph scope create|move|list``: manage the scope tree (as the local principal), same.
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
import sys
from collections.abc import Sequence
from typing import Any

from server._runtime import RuntimeDirError, RuntimePaths
from server.settings import Settings, SettingsError, load_settings


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    # Everything this process and the owners it starts create (stores, logs, tokens, backups, exports) is
    # private to this user from birth: the data directory is the boundary against other local accounts.
    # (The literal, not storage._private's constant: the stdio fast path imports no storage module.)
    os.umask(0o077)
    args = _parser().parse_args(argv)
    try:
        settings = load_settings(
            data_dir=args.data_dir,
            default_scopes=getattr(args, "default_scope", None),
            host=getattr(args, "host", None),
            port=getattr(args, "port", None),
            idle_timeout=getattr(args, "idle_timeout", None),
            no_auth=getattr(args, "no_auth", None) or None,
        )
        paths = RuntimePaths.of(settings.runtime_dir, settings.data_dir)
    except (SettingsError, RuntimeDirError) as exc:
        print(f"mnemograph: {exc}", file=sys.stderr)
        return 2
    command: Any = args.command
    status: int = command(args, settings, paths)
    return status


def _serve(args: argparse.Namespace, settings: Settings, paths: RuntimePaths) -> int:
    if args.transport == "stdio":
        from server._shim import run_stdio

        return run_stdio(
            paths, settings.default_scopes, spawn_timeout=settings.spawn_timeout, principal=settings.principal
        )
    from server._front_guard import peer_check_available

    if settings.no_auth and not peer_check_available():
        print(
            "mnemograph: --no-auth needs the kernel's TCP table (/proc/net/tcp, Linux) to check that each client "
            "runs as this OS user, and this system has none; create a token with `mnemograph token create` and "
            "drop --no-auth",
            file=sys.stderr,
        )
        return 2
    _start_owner_early(paths, settings)
    import anyio

    from server.http_front import run_front

    try:
        anyio.run(run_front, settings, paths)
    except KeyboardInterrupt:
        return 130
    return 0


def _ui(args: argparse.Namespace, settings: Settings, paths: RuntimePaths) -> int:
    from server._ui_launch import run_ui

    return run_ui(settings, paths, open_browser=not args.no_browser)


def _daemon(args: argparse.Namespace, settings: Settings, paths: RuntimePaths) -> int:
    from server._daemon import ReadyPipe, detach, take_owner_lock

    if args.detach:
        detach()  # before any import that could start a thread
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

    op_args: dict[str, Any] = {}
    to_stdout = False
    if args.op == "erase":
        op_args = {"id": args.id, "confirm": args.confirm, "reason": args.reason}
    elif args.op == "backup":
        op_args = {"path": str(Path(args.dir).expanduser().resolve())}
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
        report = run_admin(args.op, paths, timeout=settings.spawn_timeout, args=op_args)
        if to_stdout:
            with open(op_args["path"], encoding="utf-8") as exported:
                for line in exported:
                    sys.stdout.write(line)
            sys.stdout.flush()
    except AdminError as exc:
        print(f"mnemograph {args.op}: {exc}", file=sys.stderr)
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
        print(_format_report(report))
    else:
        print(_summary(report))
    return 0 if report["ok"] else 1


def _import(args: argparse.Namespace, settings: Settings, paths: RuntimePaths) -> int:
    from storage import Engine, MnemographError

    try:
        with open(args.file, encoding="utf-8") if args.file != "-" else sys.stdin as source:
            summary = Engine.import_export(settings.data_dir, source)
    except (OSError, MnemographError) as exc:
        print(f"mnemograph import: {exc}", file=sys.stderr)
        return 2
    print(
        f"imported {summary.memories} memories, {summary.scopes} scopes, {summary.entities} entities and "
        f"{summary.relations} relations into {summary.data_dir} ({summary.reembedded} embedded again)"
    )
    return 0


def _summary(report: dict[str, Any]) -> str:
    skip = {"ok", "per_store"}
    return ", ".join(
        f"{key}: {len(value) if isinstance(value, list) else value}"
        for key, value in report.items()
        if key not in skip
    )


def _scope(args: argparse.Namespace, settings: Settings, paths: RuntimePaths) -> int:
    from server._admin import AdminError, run_scope

    request = {
        "op": args.op,
        "scope": getattr(args, "scope", None),
        "parent": getattr(args, "parent", None),
        "principal": settings.principal,
    }
    try:
        result = run_scope(paths, request, timeout=settings.spawn_timeout)
    except AdminError as exc:
        print(f"mnemograph scope {args.op}: {exc}", file=sys.stderr)
        return 2
    if args.json:
        import json

        print(json.dumps(result["scopes"], indent=2))
        return 0
    for s in result["scopes"]:
        inside = f"  (inside {s['parent']})" if s["parent"] else ""
        print(f"{s['id']:<40} {s['memories']:>7} memories{inside}")
    return 0


def _token(args: argparse.Namespace, settings: Settings, paths: RuntimePaths) -> int:
    from server._tokens import TokenError, TokenStore
    from storage._private import make_private
    from storage.audit import AUDIT_FILE, AuditLog

    make_private(settings.data_dir)
    tokens = TokenStore(settings.data_dir)
    audit = AuditLog(settings.data_dir / AUDIT_FILE)
    try:
        if args.op == "create":
            value, info = tokens.create(args.name, args.grant or [])
            grants = [str(g) for g in info.grants]
            audit.record(
                "token_create", principal=settings.principal, client="cli", token=info.name, grants=grants
            )
            print(value)  # the only time the token is shown; stdout carries nothing else
            print(f"token {info.name!r} created with {', '.join(grants)}; store it now", file=sys.stderr)
        elif args.op == "revoke":
            info = tokens.revoke(args.name)
            audit.record("token_revoke", principal=settings.principal, client="cli", token=info.name)
            print(f"token {info.name!r} revoked", file=sys.stderr)
        else:
            for info in tokens.all():
                state = f"revoked {info.revoked}" if info.revoked else "active"
                print(f"{info.name:<24} {state:<32} {' '.join(str(g) for g in info.grants)}")
    except TokenError as exc:
        print(f"mnemograph token {args.op}: {exc}", file=sys.stderr)
        return 2
    return 0


def _format_report(report: dict[str, Any]) -> str:
    lines = [f"{'store':<10} {'memories':>9}  {'watermark':>9}"]
    for store, count in sorted(report["counts"].items()):
        watermark = report["watermarks"].get(store, report["canonical_seq"])
        lines.append(f"{store:<10} {count:>9}  {watermark:>9}")
    lines.append(f"canonical: {report['canonical_memories']} memories ({report['live_memories']} live)")
    drift = {name: ids for name, ids in report["drift"].items() if ids}
    for name, ids in sorted(drift.items()):
        lines.append(f"drift {name}: {len(ids)} ({', '.join(ids[:5])}{', …' if len(ids) > 5 else ''})")
    lines.append("ok" if report["ok"] else "DRIFT: run `mnemograph reindex` to rebuild the derived stores")
    return "\n".join(lines)


def _start_owner_early(paths: RuntimePaths, settings: Settings) -> None:
    # Start (or find) the owner in a thread while this process imports the web stack: both take a while.
    import contextlib
    import threading

    from server._owner import OwnerUnavailable, ensure_owner

    def start() -> None:
        with contextlib.suppress(OwnerUnavailable):  # the front retries, and reports the reason on requests
            ensure_owner(paths, timeout=settings.spawn_timeout)

    threading.Thread(target=start, name="mnemograph-start-owner", daemon=True).start()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mnemograph", description="Long-term memory for AI agents, over MCP."
    )
    sub = parser.add_subparsers(dest="name", required=True)
    data_dir = argparse.ArgumentParser(add_help=False)
    data_dir.add_argument("--data-dir", help="the store (default: $MNEMOGRAPH_DATA_DIR or the user data dir)")

    serve = sub.add_parser("serve", parents=[data_dir], help="serve MCP over stdio (default) or HTTP")
    serve.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    serve.add_argument("--host", help="HTTP: address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="HTTP: port (default 8765)")
    serve.add_argument(
        "--default-scope", help="scope(s) used when a call names none, comma-separated (default user:<login>)"
    )
    serve.add_argument(
        "--no-auth",
        action="store_true",
        help="HTTP: accept requests without a bearer token (refused unless the host is loopback)",
    )
    serve.set_defaults(command=_serve)

    ui = sub.add_parser("ui", parents=[data_dir], help="open the web UI in a browser, signed in as you")
    ui.add_argument("--port", type=int, help="loopback port (default 8765, or a free one when taken)")
    ui.add_argument("--no-browser", action="store_true", help="print the sign-in link without opening it")
    ui.set_defaults(command=_ui)

    for op, text in (("verify", "check that the stores agree"), ("reindex", "rebuild the derived stores")):
        cmd = sub.add_parser(op, parents=[data_dir], help=text)
        cmd.add_argument("--json", action="store_true", help="print the report as JSON")
        cmd.set_defaults(command=_admin, op=op)

    erase = sub.add_parser(
        "erase", parents=[data_dir], help="forget one memory and all its versions, leaving no trace on disk"
    )
    erase.add_argument("id", help="the memory's id (or its first 8+ characters)")
    erase.add_argument("--confirm", required=True, help="the memory's full id again, to confirm")
    erase.add_argument("--reason", default="", help="why (e.g. the request it fulfils)")
    erase.add_argument("--json", action="store_true", help="print the result as JSON")
    erase.set_defaults(command=_admin, op="erase")

    export = sub.add_parser("export", parents=[data_dir], help="write the memories as JSON Lines")
    export.add_argument("--scope", help="only this scope and the scopes under it")
    export.add_argument(
        "--vectors", action="store_true", help="include the embeddings (else import re-embeds)"
    )
    export.add_argument("-o", "--output", help="file to write (default: standard output)")
    export.add_argument("--json", action="store_true", help="print the summary as JSON")
    export.set_defaults(command=_admin, op="export")

    imp = sub.add_parser("import", parents=[data_dir], help="load an export into a new, empty data directory")
    imp.add_argument("file", help="a file written by `mnemograph export` ('-' for standard input)")
    imp.set_defaults(command=_import)

    snap = sub.add_parser(
        "backup", parents=[data_dir], help="copy the stores consistently, even while serving"
    )
    snap.add_argument("dir", help="a new or empty directory; it opens as a data directory")
    snap.add_argument("--json", action="store_true", help="print the summary as JSON")
    snap.set_defaults(command=_admin, op="backup")

    scope = sub.add_parser("scope", help="manage the scope tree").add_subparsers(dest="op", required=True)
    for op, text in (
        ("create", "create a scope, under PARENT"),
        ("move", "move a scope under PARENT or to the top"),
    ):
        cmd = scope.add_parser(op, parents=[data_dir], help=text)
        cmd.add_argument("scope", help="kind:name, e.g. project:site")
        cmd.add_argument("--parent", help="the scope to place it inside (move: omit for the top level)")
        cmd.add_argument("--json", action="store_true", help="print the result as JSON")
        cmd.set_defaults(command=_scope)
    listing = scope.add_parser("list", parents=[data_dir], help="list scopes (the subtree of SCOPE)")
    listing.add_argument("scope", nargs="?", help="list only this scope and what it contains")
    listing.add_argument("--json", action="store_true", help="print the result as JSON")
    listing.set_defaults(command=_scope)

    token = sub.add_parser("token", help="bearer tokens for HTTP clients").add_subparsers(
        dest="op", required=True
    )
    create = token.add_parser("create", parents=[data_dir], help="create a token and print it once on stdout")
    create.add_argument("--name", required=True, help="who the token is for; recorded as the writer")
    create.add_argument(
        "--grant",
        action="append",
        metavar="SCOPE=r|w|admin",
        help="a grant (repeat for several), e.g. team:t=w",
    )
    create.set_defaults(command=_token)
    token.add_parser("list", parents=[data_dir], help="list tokens (never their values)").set_defaults(
        command=_token
    )
    revoke = token.add_parser(
        "revoke", parents=[data_dir], help="revoke a token; running servers refuse it at once"
    )
    revoke.add_argument("name")
    revoke.set_defaults(command=_token)

    daemon = sub.add_parser("daemon", parents=[data_dir], help="run the owner process (normally automatic)")
    daemon.add_argument("--idle-timeout", type=float, help="seconds to stay up without clients (default 600)")
    daemon.add_argument("--detach", action="store_true", help=argparse.SUPPRESS)
    daemon.add_argument("--ready-fd", type=int, help=argparse.SUPPRESS)
    daemon.set_defaults(command=_daemon)
    return parser
