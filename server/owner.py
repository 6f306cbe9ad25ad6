"""The owner: the one process that opens a data directory's Engine and serves every client of it.

It listens on two Unix sockets in the runtime directory (``server._runtime``): MCP sessions as newline-delimited
JSON-RPC for the stdio front-ends, and HTTP for the HTTP front and the CLI. The Engine opens in the background
after the sockets listen, so handshakes never wait for it. The owner stops after ``idle_timeout`` seconds with
no session, lease or request, or on SIGTERM/SIGINT/SIGHUP: it stops listening first (so new front-ends start a
successor, which waits for the owner lock), lets requests in flight finish, closes the Engine (draining
queued writes) and releases the lock.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import uvicorn

from server._activity import Activity
from server._auth import FileTokenVerifier
from server._daemon import ReadyPipe
from server._engine import EngineHolder, WriteTimeOptions, write_time
from server._owner import canonical_in_use
from server._owner_http import owner_app
from server._protocol import OWNER_KEEP_ALIVE
from server._runtime import RuntimePaths
from server._sampling import SamplingPolicy
from server._tokens import TokenStore, scope_holders
from server._uds import serve_sessions
from server.app import VERSION, build_server
from server.settings import Settings, owner_settings

if TYPE_CHECKING:
    from storage import Engine

log = logging.getLogger(__name__)

_GRACE = 10  # seconds requests in flight get to finish when the owner stops


class _Uvicorn(uvicorn.Server):
    """uvicorn without its own signal handling: the owner decides when to stop, and closes the Engine after."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


_DIR_CHECK = 0.2  # seconds between two checks that the data directory is still the one this owner opened


async def serve(settings: Settings, paths: RuntimePaths, pipe: ReadyPipe) -> None:
    """Serve ``paths.data_dir`` until idle or signalled. The caller holds the owner lock."""
    tokens = TokenStore(paths.data_dir)
    # Names tokens are granted on and the local user's default scopes are theirs: no token may create them.
    holders = scope_holders(tokens, settings.default_scopes)
    enrich = write_time(
        WriteTimeOptions(
            settings.functional_predicates,
            settings.anthropic_api_key,
            settings.anthropic_model,
            settings.llm_min_interval,
            settings.digest_quiet,
            settings.digests,
            # Always: a stdio front-end configured with MNEMOGRAPH_SAMPLING=on may reach this owner although
            # the client that started it was not (server.app._sampling_for); the worker idles until then.
            True,
            settings.llm_reconcile,
            day_digest_quiet=settings.day_digest_quiet,
            llm_timeout=settings.llm_timeout,
            transitive=settings.transitive_predicates,
            resolve_by_meaning=settings.resolve_by_meaning,
            recall_salience=settings.recall_salience,
            salience_half_life=settings.salience_half_life,
            access_counts=settings.access_counts,
        )
    )

    def configure(engine: Engine) -> None:
        engine.reserve_scopes(holders)
        # Work that runs after a call (the LLM pass, the reconcile decision) stops acting for a revoked token.
        engine.principal_live = tokens.stands
        enrich(engine)

    holder = EngineHolder(
        paths.data_dir, wait=settings.engine_wait, configure=configure, embedder=settings.embedder
    )
    home = _Home(paths.data_dir)
    activity = Activity()
    stopping, http_started, http_done = anyio.Event(), anyio.Event(), anyio.Event()
    sampling = (
        SamplingPolicy(settings.sampling_timeout, fallback_llm=bool(settings.anthropic_api_key))
        if settings.sampling
        else None
    )
    server = build_server(
        holder.get,
        default_scopes=settings.default_scopes,
        sampling=sampling,
        llm_fallback=bool(settings.anthropic_api_key),
    )
    verifier = FileTokenVerifier(tokens)
    app = owner_app(
        server,
        holder,
        activity,
        data_dir=paths.data_dir,
        stopping=stopping,
        started=http_started,
        verifier=verifier,
    )
    http = _Uvicorn(
        uvicorn.Config(
            app,
            log_level=settings.log_level.lower(),
            access_log=False,
            timeout_graceful_shutdown=_GRACE,
            timeout_keep_alive=int(OWNER_KEEP_ALIVE),
        )
    )
    listener = await anyio.create_unix_listener(paths.mcp_socket, mode=0o600)
    http_socket = _bind_unix(paths.http_socket)

    async def serve_http() -> None:
        try:
            await http.serve([http_socket])
        finally:
            http_done.set()
        if not http_started.is_set():
            raise RuntimeError("the owner's HTTP server stopped during start-up (see the log above)")

    failed = False
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(holder.run)
            tg.start_soon(serve_sessions, listener, server, activity, settings.default_scopes)
            tg.start_soon(serve_http)
            await http_started.wait()
            _write_info(paths, settings)
            pipe.ready()
            log.info("owner %d serving %s", os.getpid(), paths.data_dir)

            reason = await _until_stop(activity, settings.idle_timeout, holder, home)
            log.info("stopping: %s", reason)
            # New clients must not reach a closing owner: unlinking the socket paths makes them unreachable (new
            # front-ends start a successor, which waits for our lock), while sessions already connected go on.
            for path in (paths.mcp_socket, paths.http_socket, paths.info_file):
                path.unlink(missing_ok=True)
            stopping.set()  # ends the HTTP fronts' leases
            http.should_exit = True  # uvicorn lets requests in flight finish, for up to _GRACE seconds
            with anyio.move_on_after(_GRACE + 5):
                await http_done.wait()
            tg.cancel_scope.cancel()  # the remaining socket sessions: stdio clients reconnect to a successor
    finally:
        with anyio.CancelScope(shield=True):
            await listener.aclose()
            failed = holder.failed or home.gone()
            if not failed:
                await holder.close()
    log.info("owner %d stopped", os.getpid())
    if failed:
        # Exit without running Kùzu's destructor, which would checkpoint what the failed commit left in memory,
        # and without closing the stores, which would write into a data directory removed or replaced meanwhile
        # (re-creating part of it, which the next owner would then take for a damaged store).
        paths.info_file.unlink(missing_ok=True)
        logging.shutdown()
        os._exit(75)


class _Home:
    """The data directory this owner opened, to tell when it is removed or replaced. Held open: a directory
    removed while a descriptor holds it keeps its inode (and shows no links), so a directory made at the path
    afterwards can never reuse its inode number and pass for it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._unsure = False  # the last check could not tell (said once in the log, not every 0.2 s)
        self._hold()  # not there yet: held once the store creates it (an owner started on a new directory)

    def _hold(self) -> None:
        with contextlib.suppress(OSError):
            self._fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY)

    def gone(self) -> bool:
        if self._fd is None:
            self._hold()
            return False
        try:
            # The held descriptor too: fstat on a network file system's directory can fail with ESTALE or EIO.
            held = os.fstat(self._fd)
            if held.st_nlink == 0:
                return True  # removed, whatever the path now shows
            now = os.stat(self.path)
        except (FileNotFoundError, NotADirectoryError):
            return True  # nothing at the path (or a file where a parent directory was)
        except OSError as exc:
            # Any other error (EIO, ESTALE on a network file system, EACCES on a parent) says nothing about the
            # directory's being gone: stopping without closing the stores on it would be the harm. Checked again.
            if not self._unsure:
                log.warning(
                    "cannot check the data directory %s (%s); still serving it", self.path, exc.strerror
                )
            self._unsure = True
            return False
        self._unsure = False
        return (now.st_dev, now.st_ino) != (held.st_dev, held.st_ino)


async def _until_stop(
    activity: Activity,
    idle_timeout: float,
    holder: EngineHolder,
    home: _Home,
) -> str:
    reason = "idle"
    async with anyio.create_task_group() as tg:

        async def on_data_dir_gone() -> None:
            # A person who removes (or replaces) the data directory to start afresh while this owner idles: it
            # must not go on writing into files no longer there, nor re-create part of the directory. Stop; the
            # next call starts an owner on whatever is at the path now.
            nonlocal reason
            while not home.gone():  # noqa: ASYNC110 (the file system sends no event)
                await anyio.sleep(_DIR_CHECK)
            reason = f"the data directory {home.path} was removed or replaced"
            tg.cancel_scope.cancel()

        tg.start_soon(on_data_dir_gone)

        async def on_store_failure() -> None:
            # A commit that did not reach disk leaves Kùzu's memory ahead of its files: stop, and let the next
            # request start a successor, which recovers exactly the acknowledged writes from the WAL.
            nonlocal reason
            while not holder.failed:  # noqa: ASYNC110 (set by the writer thread, not by a task)
                await anyio.sleep(0.5)
            reason = "the canonical store failed a commit (disk full or read-only?)"
            tg.cancel_scope.cancel()

        tg.start_soon(on_store_failure)

        async def on_signal() -> None:
            nonlocal reason
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
                async for signum in signals:
                    reason = signal.Signals(signum).name
                    tg.cancel_scope.cancel()
                    return

        tg.start_soon(on_signal)
        await activity.wait_idle(idle_timeout)
        tg.cancel_scope.cancel()
    return reason if reason != "idle" else f"no client for {idle_timeout:g}s"


def _bind_unix(path: Path) -> socket.socket:
    path.unlink(missing_ok=True)  # a stale socket of a dead owner; we hold the owner lock
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)  # born 0600: no window in which another user could connect
    try:
        sock.bind(os.fspath(path))
    finally:
        os.umask(old)
    sock.listen(1024)
    return sock


def _write_info(paths: RuntimePaths, settings: Settings) -> None:
    info = {
        "pid": os.getpid(),
        "data_dir": str(paths.data_dir),
        "version": VERSION,
        "canonical": canonical_in_use(),  # a front started on another store must not relay to this owner
        "started_at": time.time(),
        "mcp_socket": str(paths.mcp_socket),
        "http_socket": str(paths.http_socket),
        "settings": owner_settings(settings),  # what a front started with other ones cannot change
    }
    tmp = paths.info_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(info))
    tmp.replace(paths.info_file)


def configure_logging(level: str) -> None:
    """The owner logs to stderr, which its starter points at the runtime directory's owner.log."""
    logging.basicConfig(
        level=level, format="%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s", force=True
    )
