"""Admin operations from the CLI (``verify``, ``reindex``, ``erase``, ``export``, ``backup``, ``list``, ``show``,
``search``, ``forget`` and ``scope create|move|list``), whether or not an owner is serving the data directory.

With an owner running, the operation goes to it (over its private HTTP socket), since only it may open the
stores. Without one, the CLI opens the Engine itself for the duration. If an owner appears in between (a client
started one), the direct open fails on the directory lock and the operation goes to the new owner instead.
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import os
import shlex
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal, cast

from server._runtime import RuntimePaths
from storage.domain.errors import MnemographError, StorageUnavailable
from storage.engine.private_files import make_private

if TYPE_CHECKING:
    from storage import Engine, ScopeInfo, VerifyReport

Operation = Literal[
    "verify", "reindex", "erase", "export", "backup", "list", "show", "search", "forget", "import",
    "export_markdown", "digests", "entities", "sweep",
]  # fmt: skip
OPERATIONS: tuple[Operation, ...] = (
    "verify", "reindex", "erase", "export", "backup", "list", "show", "search", "forget", "import",
    "export_markdown", "digests", "entities", "sweep",
)  # fmt: skip


class AdminError(RuntimeError):
    """The operation could not run; the message says why."""


PROGRESS_PATH = "/-/progress"
# The phase and counts of the admin operation running in this process (the owner, or a CLI with no owner):
# the CLI polls it to draw its progress bar. One at a time is enough: admin operations are rare and short-lived.
_progress: dict[str, Any] = {}


def _publish(phase: str, done: int, total: int | None) -> None:
    _progress.update(phase=phase, done=done, total=total)


def progress_state() -> dict[str, Any]:
    """The running admin operation's ``{"phase", "done", "total"}`` (empty when none reports any)."""
    return dict(_progress)


def run_admin(
    op: Operation,
    paths: RuntimePaths,
    *,
    timeout: float,
    args: dict[str, Any] | None = None,
    label: str | None = None,
    setup: Callable[[Engine], None] | None = None,
) -> dict[str, Any]:
    """Run ``op`` on ``paths.data_dir`` and return its report as JSON (with an ``ok`` verdict).

    With ``label``, a progress bar is drawn on stderr while it runs, if stderr is a terminal. ``setup`` is
    applied to the engine when no owner runs and the command opens the directory itself (``store_options``:
    the predicate lists the environment sets, which the owner applies to its own engine).
    """
    from server._progress import while_waiting

    body = args or {}

    # A reindex without a running server deletes the search indexes before it opens the store, so that it
    # repairs also indexes too damaged to open; the open then builds them anew (a second rebuild would only
    # repeat it: the report is the verify that follows).
    fresh = op == "reindex"

    def work() -> dict[str, Any]:
        return _run(
            paths,
            f"/-/{op}",
            body,
            lambda engine: perform(engine, "verify" if fresh else op, body),
            timeout=timeout,
            setup=setup,
            fresh_projections=fresh,
        )

    if label is None:
        return work()
    return while_waiting(label, work, lambda: _poll_progress(paths))


def _poll_progress(paths: RuntimePaths) -> dict[str, Any] | None:
    if _progress:  # the operation runs here (no owner)
        return progress_state()
    conn = _UnixHTTPConnection(os.fspath(paths.http_socket))
    try:
        conn.request("GET", PROGRESS_PATH)
        response = conn.getresponse()
        state = json.loads(response.read()) if response.status == 200 else None
    except (OSError, http.client.HTTPException, ValueError):
        return None
    finally:
        conn.close()
    return state if isinstance(state, dict) and state else None


def run_scope(paths: RuntimePaths, request: dict[str, Any], *, timeout: float) -> dict[str, Any]:
    """Create, move or list scopes as the local principal (``request``: see ``scope_op``)."""
    return _run(paths, "/-/scope", request, lambda engine: scope_op(engine, request), timeout=timeout)


def scope_op(engine: Engine, request: dict[str, Any]) -> dict[str, Any]:
    """``{"op": "create"|"move"|"list"|"zone", "scope": ..., "parent": ..., "zone": ..., "principal": ...}`` on
    ``engine`` (``zone``: the scope's time zone, set when given)."""
    from scopes import Principal

    principal = Principal(str(request.get("principal") or "local"))
    op, scope, parent = request.get("op"), request.get("scope"), request.get("parent")
    if op == "list":
        infos = engine.list_scopes(scope, principal=principal)
    elif op == "create":
        infos = [engine.create_scope(str(scope), parent, principal=principal)]
    elif op == "move":
        infos = [engine.move_scope(str(scope), parent, principal=principal)]
    elif op == "zone":
        zone = request.get("zone")
        if zone is None:
            return {"ok": True, "zone": engine.scope_time_zone(str(scope), principal=principal)}
        return {"ok": True, "zone": engine.set_scope_time_zone(str(scope), str(zone), principal=principal)}
    else:
        raise AdminError(f"unknown scope operation {op!r}")
    return {"ok": True, "scopes": [_scope_json(s) for s in infos]}


def _scope_json(info: ScopeInfo) -> dict[str, Any]:
    return {"id": info.id, "parent": info.parent, "memories": info.memories}


def _run(
    paths: RuntimePaths,
    route: str,
    body: dict[str, Any],
    direct: Callable[[Engine], dict[str, Any]],
    *,
    timeout: float,
    setup: Callable[[Engine], None] | None = None,
    fresh_projections: bool = False,
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        report = _via_owner(paths, route, body)
        if report is not None:
            return report
        try:
            return _direct(paths, direct, setup, fresh_projections=fresh_projections)
        except StorageUnavailable as exc:  # an owner is starting up, or another CLI holds the directory
            if time.monotonic() > deadline:
                raise AdminError(str(exc)) from exc
            time.sleep(0.2)
        except MnemographError as exc:
            raise AdminError(str(exc)) from exc


REPAIR = "mnemograph reindex"  # what rebuilds the search indexes from the canonical store


def report_json(report: VerifyReport, data_dir: Path | None = None) -> dict[str, Any]:
    """A verify report as JSON, with its ``ok`` verdict, and when it is not ok the ``repair`` command: for the
    store at ``data_dir`` when given (shell-quoted), since a bare ``mnemograph reindex`` repairs the default one."""
    repair = REPAIR if data_dir is None else f"{REPAIR} --data-dir {shlex.quote(str(data_dir))}"
    return {**dataclasses.asdict(report), "ok": report.ok} | ({} if report.ok else {"repair": repair})


def perform(engine: Engine, op: Operation, args: dict[str, Any]) -> dict[str, Any]:
    """Run one admin operation on an open engine (in the owner, or in the CLI when no owner runs)."""
    from server._memories import MEMORY_OPS, perform_memory_op

    if op in MEMORY_OPS:
        return perform_memory_op(engine, op, args)
    _progress.clear()
    try:
        return _perform(engine, op, args)
    finally:
        _progress.clear()


def _perform(engine: Engine, op: Operation, args: dict[str, Any]) -> dict[str, Any]:
    from storage.engine.backup import to_json

    if op == "verify":
        return report_json(engine.verify(), engine.data_dir)
    if op == "reindex":
        return report_json(engine.reindex(), engine.data_dir)
    if op == "digests":
        return {"digests_built": engine.rebuild_digests(), "ok": True}
    if op == "sweep":
        linked = engine.sweep_all()
        return {"contradictions_linked": len(linked), "pairs": [list(p) for p in linked], "ok": True}
    if op == "entities":
        action = str(args.get("action", "list"))
        if action == "list":
            cursor = args.get("cursor")
            page = engine.entity_proposal_page(
                str(args.get("status") or "pending"),
                limit=int(args.get("limit") or 50),
                cursor=None if cursor is None else str(cursor),
            )
            found, more = list(page.items), page.next_cursor
        else:
            found, more = [engine.decide_proposal(str(args.get("id") or ""), action)], None
        return {"proposals": [_proposal_json(p) for p in found], "next_cursor": more, "ok": True}
    if op == "erase":
        receipt = engine.erase(
            str(args.get("id", "")), confirm=str(args.get("confirm", "")), reason=str(args.get("reason", ""))
        )
        return {**dataclasses.asdict(receipt), "ok": True}
    if op == "export":
        path = Path(str(args["path"]))
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # it holds every memory: private
        with open(fd, "w", encoding="utf-8") as out:
            make_private(path)  # O_CREAT's mode does not apply to a file that was already there
            summary = engine.export(
                cast(IO[str], _Counting(out)), scope=args.get("scope"), vectors=bool(args.get("vectors"))
            )
        return {**to_json(summary), "path": str(path), "ok": True}
    if op == "backup":
        copied = to_json(engine.backup(str(args["path"])))
        make_private(Path(str(args["path"])))  # a copy of the stores, as private as they are
        return {**copied, "ok": True}
    if op == "import" and args.get("format") == "mnemograph":
        with open(str(args["path"]), encoding="utf-8") as source:
            merged = engine.merge_export(source, progress=_publish)
        return {**dataclasses.asdict(merged), "ok": True}
    if op == "import":
        from storage.importers import import_into

        report = import_into(
            engine,
            str(args.get("format")),
            Path(str(args["path"])),
            str(args["scope"]),
            progress=lambda n: _publish("importing", n, None),
        )
        return {**dataclasses.asdict(report), "ok": True}
    raise AdminError(f"unknown operation {op!r}")


def _proposal_json(p: Any) -> dict[str, Any]:
    return {
        **dataclasses.asdict(p),
        "created_at": p.created_at.isoformat(),
        "decided_at": p.decided_at.isoformat() if p.decided_at else None,
    }


class _Counting:
    """The export's output, publishing how many records were written so far (the CLI's progress bar)."""

    def __init__(self, out: IO[str]) -> None:
        self._out, self._lines = out, 0
        self.name = getattr(out, "name", "-")  # the export summary names the file

    def write(self, text: str) -> int:
        self._lines += text.count("\n")
        if self._lines % 100 == 0:
            _publish("exporting records", self._lines, None)
        return self._out.write(text)


def _direct(
    paths: RuntimePaths,
    fn: Callable[[Engine], dict[str, Any]],
    setup: Callable[[Engine], None] | None = None,
    *,
    fresh_projections: bool = False,
) -> dict[str, Any]:
    from storage import Engine, MnemographError  # the store libraries load only on this path

    with Engine.open(paths.data_dir, warm=False, fresh_projections=fresh_projections) as engine:
        if setup is not None:
            setup(engine)
        try:
            return fn(engine)
        except StorageUnavailable:
            raise
        except MnemographError as exc:
            raise AdminError(str(exc)) from exc


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("mnemograph-owner")  # no timeout: a reindex of a large store takes a while
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


def _owner_stopped(paths: RuntimePaths, route: str, why: str) -> str:
    data = shlex.quote(str(paths.data_dir))
    return (
        f"the Mnemograph server of {paths.data_dir} stopped or failed before it answered {route} ({why}); "
        f"its log is {paths.log_file}. Run the command again (it starts a new server, or opens the store "
        f"itself); if it fails again, `mnemograph stop --data-dir {data}` then `mnemograph reindex --data-dir "
        f"{data}` rebuilds the search indexes from the canonical store"
    )


def _via_owner(paths: RuntimePaths, route: str, body: dict[str, Any]) -> dict[str, Any] | None:
    from server._owner import canonical_conflict

    conflict = canonical_conflict(paths)
    if conflict is not None and paths.http_socket.exists():
        raise AdminError(conflict)  # its answer would be about another store than the one asked for
    conn = _UnixHTTPConnection(os.fspath(paths.http_socket))
    try:
        conn.request("POST", route, body=json.dumps(body), headers={"content-type": "application/json"})
        response = conn.getresponse()
        raw = response.read()
    except (FileNotFoundError, ConnectionRefusedError):
        return None  # no owner
    except (OSError, http.client.HTTPException) as exc:
        raise AdminError(_owner_stopped(paths, route, f"{type(exc).__name__}: {exc}")) from exc
    finally:
        conn.close()
    try:
        answer = json.loads(raw)
    except ValueError:
        # Not a JSON parse error for the user to decode: the server went away (or failed) mid-answer.
        raise AdminError(
            _owner_stopped(paths, route, f"it answered {len(raw)} bytes that are not JSON")
        ) from None
    if response.status != 200:
        raise AdminError(answer.get("message", f"the owner answered {response.status}"))
    result: dict[str, Any] = answer
    return result
