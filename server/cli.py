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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from server._cli_parser import package_version, parse
from server._runtime import RuntimeDirError, RuntimePaths
from server.settings import Settings, SettingsError, load_settings


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
        )
        paths = RuntimePaths.of(settings.runtime_dir, settings.data_dir)
    except (SettingsError, RuntimeDirError) as exc:
        print(f"mnemograph: {exc}", file=sys.stderr)
        return 2
    if getattr(args, "needs_store", False) and not is_store(settings.data_dir):
        print(
            f"mnemograph {args.name}: {_no_store(settings.data_dir, given=data_dir is not None)}",
            file=sys.stderr,
        )
        return 2
    status: int = _COMMANDS[args.command](args, settings, paths)
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


def _serve(args: argparse.Namespace, settings: Settings, paths: RuntimePaths) -> int:
    if args.transport == "stdio":
        from server._shim import run_stdio

        if sys.stdin.isatty():  # a person, not a client, started it: say what it expects
            print(
                "mnemograph serve speaks MCP on standard input and output, for a client that starts it; to "
                "connect one, run `mnemograph setup claude-desktop|claude-code|cursor|vscode`. For a server you "
                "start yourself: mnemograph serve --transport http",
                file=sys.stderr,
            )
        _banner(settings, paths, "stdio")
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
    _banner(settings, paths, "http")
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


def _banner(settings: Settings, paths: RuntimePaths, transport: str) -> None:
    """What this process serves, on stderr (a client's log for stdio, the terminal for HTTP)."""
    # No version over stdio: looking it up (package metadata) costs time on the MCP handshake path.
    name = "mnemograph" if transport == "stdio" else f"mnemograph {package_version()}"
    lines = [
        f"{name}: data {settings.data_dir}",
        f"  log: {paths.log_file} (the process that owns the store)",
    ]
    if transport == "stdio":
        lines.insert(1, f"  MCP over stdio, default scope {','.join(settings.default_scopes)}")
    else:
        host = f"[{settings.host}]" if ":" in settings.host else settings.host
        auth = (
            "none (--no-auth: only processes of this OS user may connect)"
            if settings.no_auth
            else "bearer token required (`mnemograph setup http` or `mnemograph token create`)"
        )
        lines[1:1] = [
            f"  MCP over streamable HTTP at http://{host}:{settings.port}/mcp",
            f"  auth: {auth}",
            f"  default scope {','.join(settings.default_scopes)}; stop with Ctrl-C",
        ]
    print("\n".join(lines), file=sys.stderr, flush=True)


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
        long_running = args.op in ("export", "export_markdown", "reindex", "backup")
        report = run_admin(
            args.op,
            paths,
            timeout=settings.spawn_timeout,
            args=op_args,
            label=f"mnemograph {args.op.replace('_markdown', '')}" if long_running else None,
        )
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
    print(
        f"imported {summary.memories} memories, {summary.scopes} scopes, {summary.entities} entities and "
        f"{summary.relations} relations into {summary.data_dir} ({summary.reembedded} embedded again)"
    )
    return 0


def _merge_export(args: argparse.Namespace, settings: Settings, paths: RuntimePaths) -> int:
    """An export into a store that already holds memories: merged through its owner (or directly if none runs)."""
    from server._admin import AdminError, run_admin

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
        report = run_admin(
            "import", paths, timeout=settings.spawn_timeout, args=body, label="mnemograph import"
        )
    except AdminError as exc:
        print(f"mnemograph import: {exc}", file=sys.stderr)
        return 2
    print(
        f"imported {report['memories'] + report['already']} memories from {args.file} into {report['data_dir']}: "
        f"{report['memories']} new, {report['already']} already there ({report['reembedded']} embedded again)"
    )
    return 0


def _memory(args: argparse.Namespace, settings: Settings, paths: RuntimePaths) -> int:
    from server._cli_memory import run_memory_command

    return run_memory_command(args, settings, paths)


def _import_other(args: argparse.Namespace, settings: Settings, paths: RuntimePaths) -> int:
    from server._admin import AdminError, run_admin

    scope = args.scope or settings.default_scopes[0]
    body = {"format": args.source, "path": str(Path(args.file).expanduser().resolve()), "scope": scope}
    try:
        report = run_admin(
            "import", paths, timeout=settings.spawn_timeout, args=body, label="mnemograph import"
        )
    except AdminError as exc:
        print(f"mnemograph import: {exc}", file=sys.stderr)
        return 2
    print(
        f"imported {report['read']} memories from {args.file} ({args.source}) into {scope}: {report['added']} "
        f"new, {report['duplicate']} already there, {report['linked']} linked from other scopes"
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
    from storage.engine.audit import AUDIT_FILE, AuditLog
    from storage.engine.private_files import make_private

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


def _setup(args: argparse.Namespace, settings: Settings, paths: RuntimePaths) -> int:
    from server._client_files import ClientFileError
    from server._setup import SetupError, SetupRequest, run_setup

    request = SetupRequest(
        client=args.client,
        project=args.project,
        project_dir=Path(args.project_dir).expanduser().absolute() if args.project_dir else None,
        config=Path(args.config) if args.config else None,
        name=args.server_name,
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


def _status(args: argparse.Namespace, settings: Settings, paths: RuntimePaths) -> int:
    import json

    from server._status import as_json, describe, running_owners

    owners = running_owners(settings.runtime_dir)
    if args.json:
        print(json.dumps([as_json(o) for o in owners], indent=2))
    elif not owners:
        print(f"no Mnemograph server is running for this user (default store: {settings.data_dir})")
    else:
        print("\n".join(describe(o) for o in owners))
    return 0


def _stop(args: argparse.Namespace, settings: Settings, paths: RuntimePaths) -> int:
    from server._status import running_owners, stop_owner

    owners = running_owners(settings.runtime_dir)
    if not args.all:
        owners = [o for o in owners if o.data_dir == str(settings.data_dir)]
    if not owners:
        print(f"mnemograph stop: no server is running on {settings.data_dir}", file=sys.stderr)
        return 1
    status = 0
    for owner in owners:
        if stop_owner(owner, timeout=args.timeout):
            print(f"stopped the server of {owner.data_dir} (pid {owner.pid})", file=sys.stderr)
        else:
            print(
                f"mnemograph stop: the server of {owner.data_dir} (pid {owner.pid}) is still finishing after "
                f"{args.timeout:g}s; see {owner.log_file}",
                file=sys.stderr,
            )
            status = 1
    return status


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
