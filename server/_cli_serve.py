"""``mnemograph serve``, ``status`` and ``stop``: serving a store, and seeing and stopping what serves it.

Standard library at import time: ``serve`` over stdio runs on the MCP handshake path.
"""

from __future__ import annotations

import argparse
import dataclasses
import errno
import json
import shlex
import sys

from server._cli_parser import package_version
from server._runtime import RuntimePaths
from server.settings import Settings, _is_loopback


def serve(args: argparse.Namespace, settings: Settings, paths: RuntimePaths) -> int:
    from server._owner import canonical_conflict, owner_accepting

    conflict = canonical_conflict(paths)
    if conflict is not None and owner_accepting(paths):
        # Relaying to it would read and write another store than the one asked for, without a word.
        print(f"mnemograph serve: {conflict}", file=sys.stderr)
        return 2
    _note_owner_settings(settings, paths)
    if args.transport == "stdio":
        from server._shim import run_stdio

        if sys.stdin.isatty():  # a person, not a client, started it: say what it expects
            print(
                "mnemograph serve speaks MCP on standard input and output, for a client that starts it; to "
                "connect one, run `mnemograph setup claude-desktop|claude-code|cursor|vscode`. For a server you "
                "start yourself: mnemograph serve --transport http",
                file=sys.stderr,
            )
        banner(settings, paths, "stdio")
        return run_stdio(
            paths,
            settings.default_scopes,
            spawn_timeout=settings.spawn_timeout,
            principal=settings.principal,
            sampling=settings.sampling_timeout if settings.sampling else None,
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
    from server.http_front import bind

    # Bind before saying anything: a busy port is one sentence, not a "serving at" banner and a traceback.
    try:
        sock = bind(settings.host, settings.port)
    except OSError as exc:
        print(f"mnemograph serve: {_bind_error(settings, exc)}", file=sys.stderr)
        return 2
    if not settings.port:  # --port 0: the port the system picked, for the banner and the front's URL
        settings = dataclasses.replace(settings, port=sock.getsockname()[1])
    _start_owner_early(paths, settings)
    banner(settings, paths, "http")
    import anyio

    from server.http_front import run_front

    try:
        anyio.run(run_front, settings, paths, sock)
    except KeyboardInterrupt:
        return 130
    finally:
        sock.close()
    return 0


def _note_owner_settings(settings: Settings, paths: RuntimePaths) -> None:
    """Say on stderr which of this process's settings the server already running on the store does not have:
    it was started by another client (or by hand) with its own, and keeps them for every client it serves."""
    from server._owner import owner_accepting, settings_differences
    from server.settings import owner_settings

    differ = settings_differences(paths, owner_settings(settings))
    if not differ or not owner_accepting(paths):
        return
    listed = "; ".join(
        f"{name} is {running} there (this client: {wanted})" for name, running, wanted in differ
    )
    print(
        f"mnemograph serve: note: the server already running on {settings.data_dir} was started with other "
        f"settings and keeps them for every client: {listed}. To apply this client's, stop it (`mnemograph stop "
        f"--data-dir {shlex.quote(str(settings.data_dir))}`): the next call starts it again with the settings of the client that "
        "makes it; or give every client the same settings.",
        file=sys.stderr,
    )


def _bind_error(settings: Settings, exc: OSError) -> str:
    where = f"{settings.host}:{settings.port}"
    if exc.errno == errno.EADDRINUSE:
        from server._status import describe_front, running_owners

        for owner in running_owners(settings.runtime_dir):
            for front in owner.fronts:
                if _port_of(str(front.get("url", ""))) == settings.port:
                    return (
                        f"port {settings.port} is already served by {describe_front(front)} for "
                        f"{owner.data_dir}; use that server, stop it (`mnemograph stop`), or pass --port N"
                    )
        return (
            f"port {settings.port} on {settings.host} is already in use (by another `mnemograph serve "
            f"--transport http`, which `mnemograph status` lists, or another program); pass --port N to use "
            "another port"
        )
    if exc.errno == errno.EACCES:
        return (
            f"not allowed to listen on {where} (ports below 1024 need privileges); pass --port N above 1023"
        )
    if exc.errno == errno.EADDRNOTAVAIL:
        return f"{settings.host} is not an address of this machine; pass --host with one of its addresses"
    return f"cannot listen on {where}: {exc.strerror or exc}"


def _port_of(url: str) -> int | None:
    from urllib.parse import urlsplit

    try:
        return urlsplit(url).port
    except ValueError:
        return None


def banner(settings: Settings, paths: RuntimePaths, transport: str) -> None:
    """What this process serves, on stderr (a client's log for stdio, the terminal for HTTP)."""
    # No version over stdio: looking it up (package metadata) costs time on the MCP handshake path.
    name = "mnemograph" if transport == "stdio" else f"mnemograph {package_version()}"
    lines = [
        f"{name}: data {settings.data_dir}"
        + (f", canonical store {settings.canonical}" if settings.canonical else ""),
        f"  log: {paths.log_file} (the process that owns the store)",
    ]
    if transport == "stdio":
        sampling = ", MCP sampling on (this client's model reads what it writes)" if settings.sampling else ""
        lines.insert(1, f"  MCP over stdio, default scope {','.join(settings.default_scopes)}{sampling}")
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
        if not _is_loopback(settings.host):
            # Clients must reach it by a name it accepts (DNS-rebinding protection): say which, and how to add.
            lines.insert(
                3,
                f"  answers to the host names {allowed_names(settings)}; add the names other machines use with "
                "MNEMOGRAPH_ALLOWED_HOSTS=name,name2",
            )
    print("\n".join(lines), file=sys.stderr, flush=True)


def allowed_names(settings: Settings) -> str:
    """The allowed Host values for people: ``name:*`` shown as ``name`` (any port), exact ports as given."""
    names = [h[:-2] if h.endswith(":*") else h for h in settings.allowed_hosts]
    return ", ".join(dict.fromkeys(names))


def _start_owner_early(paths: RuntimePaths, settings: Settings) -> None:
    # Start (or find) the owner in a thread while this process imports the web stack: both take a while.
    import contextlib
    import threading

    from server._owner import OwnerUnavailable, ensure_owner

    def start() -> None:
        with contextlib.suppress(OwnerUnavailable):  # the front retries, and reports the reason on requests
            ensure_owner(paths, timeout=settings.spawn_timeout)

    threading.Thread(target=start, name="mnemograph-start-owner", daemon=True).start()


def status(args: argparse.Namespace, settings: Settings, paths: RuntimePaths) -> int:
    from server._status import as_json, describe, running_owners

    owners = running_owners(settings.runtime_dir)
    # Every store of this user by default; with --data-dir, that store's server only.
    only = getattr(args, "data_dir", None) is not None
    if only:
        owners = [o for o in owners if o.data_dir == str(settings.data_dir)]
    if args.json:
        print(json.dumps([as_json(o) for o in owners], indent=2))
    elif not owners:
        where = f"on {settings.data_dir}" if only else f"for this user (default store: {settings.data_dir})"
        print(f"no Mnemograph server is running {where}")
    else:
        print("\n".join(describe(o) for o in owners))
    return 0


def stop(args: argparse.Namespace, settings: Settings, paths: RuntimePaths) -> int:
    """Stop the owner, and first the HTTP fronts holding it up: a front would start a new owner at once."""
    from server._status import NOT_ANSWERING, describe_front, running_owners, stop_owner, stop_process

    owners = running_owners(settings.runtime_dir)
    if not args.all:
        owners = [o for o in owners if o.data_dir == str(settings.data_dir)]
    if not owners:
        if args.json:
            print("[]")
        print(f"mnemograph stop: no server is running on {settings.data_dir}", file=sys.stderr)
        return 1
    code = 0
    report = []
    for owner in owners:
        done: dict[str, object] = {
            "data_dir": owner.data_dir,
            "pid": owner.pid,
            "fronts": [],
            "stopped": False,
        }
        for front in owner.fronts:
            pid = front.get("pid")
            if not isinstance(pid, int):
                continue
            if stop_process(pid, timeout=args.timeout):
                print(
                    f"stopped {describe_front(front)}, which would have restarted the server", file=sys.stderr
                )
                done["fronts"].append(front)  # type: ignore[attr-defined]
            else:
                print(
                    f"mnemograph stop: {describe_front(front)} did not exit in {args.timeout:g}s",
                    file=sys.stderr,
                )
                code = 1
        if stop_owner(owner, timeout=args.timeout):
            done["stopped"] = True
            print(f"stopped the server of {owner.data_dir} (pid {owner.pid})", file=sys.stderr)
            if owner.sessions:
                print(
                    f"{owner.sessions} stdio client session(s) stay connected and start a new server on their next "
                    "call; quit those clients to stop for good",
                    file=sys.stderr,
                )
        elif owner.problem == NOT_ANSWERING:
            # Hung: it may never act on SIGTERM (a stopped process, a blocked event loop). Acknowledged writes are
            # durable (docs/reliability.md), so ending it is safe; the next call starts a new owner.
            print(
                f"mnemograph stop: the server of {owner.data_dir} (pid {owner.pid}) does not answer and did not "
                f"exit within {args.timeout:g}s of SIGTERM; end it with `kill -9 {owner.pid}` (acknowledged "
                f"writes are kept, and the next call starts a new server); see {owner.log_file}",
                file=sys.stderr,
            )
            code = 1
        else:
            print(
                f"mnemograph stop: the server of {owner.data_dir} (pid {owner.pid}) is still finishing after "
                f"{args.timeout:g}s; see {owner.log_file}",
                file=sys.stderr,
            )
            code = 1
        report.append(done)
    if args.json:
        print(json.dumps(report, indent=2))
    return code
