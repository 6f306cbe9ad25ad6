"""``mnemograph ui``: serve the HTTP front on loopback and open the web UI, signed in as the local user.

Being signed in takes proof, not just a loopback address (any local process, or a web page through DNS
rebinding, can reach loopback): this command asks the owner, over its private Unix socket, for a one-time
login code, and opens ``/ui/auth/<code>``. Only a process of the user who owns the socket's directory can ask;
the code works once and for two minutes, and the browser then holds an ordinary session cookie.
"""

from __future__ import annotations

import dataclasses
import socket
import sys
import threading
import time
import webbrowser

import anyio
import httpx2

from server._owner import OwnerUnavailable, ensure_owner
from server._protocol import HEALTH_PATH, PRINCIPAL_HEADER
from server._runtime import RuntimePaths
from server.settings import Settings

LOGIN_CODE_URL = "http://mnemograph-owner/ui/-/login-code"
_HOST = "127.0.0.1"


def login_path(paths: RuntimePaths, principal: str) -> str:
    """A one-time sign-in path (``/ui/auth/<code>``) for ``principal``, minted by the owner on its socket."""
    transport = httpx2.HTTPTransport(uds=str(paths.http_socket))
    with httpx2.Client(transport=transport, timeout=30.0) as owner:
        response = owner.post(LOGIN_CODE_URL, headers={PRINCIPAL_HEADER: principal})
        response.raise_for_status()
        path: str = response.json()["path"]
        return path


def run_ui(settings: Settings, paths: RuntimePaths, *, open_browser: bool) -> int:
    """Serve the front on loopback (the configured port, or a free one when it is 0 or taken) until interrupted,
    and once it answers print, and open, a one-time sign-in URL."""
    port = settings.port if settings.port and _free(settings.port) else _any_port()
    # Warnings only from the web server: the sign-in link is what the person needs to see in this terminal.
    log_level = "WARNING" if settings.log_level in ("DEBUG", "INFO") else settings.log_level
    settings = dataclasses.replace(settings, host=_HOST, port=port, no_auth=False, log_level=log_level)
    try:
        ensure_owner(paths, timeout=settings.spawn_timeout)
    except OwnerUnavailable as exc:
        print(f"mnemograph ui: {exc}", file=sys.stderr)
        return 2
    base = f"http://{_HOST}:{port}"
    threading.Thread(
        target=_announce, args=(base, paths, settings.principal, open_browser), daemon=True
    ).start()

    from server.http_front import run_front  # the web stack loads only for this command

    try:
        anyio.run(run_front, settings, paths, None, "ui")
    except KeyboardInterrupt:
        return 130
    return 0


def _announce(base: str, paths: RuntimePaths, principal: str, open_browser: bool) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx2.get(base + HEALTH_PATH, timeout=2).status_code == 200:
                break
        except httpx2.HTTPError:
            pass
        time.sleep(0.1)  # the front is starting in this process; there is no event to wait on across threads
    try:
        url = base + login_path(paths, principal)
    except (httpx2.HTTPError, KeyError, ValueError) as exc:
        print(f"mnemograph ui: could not get a sign-in link ({exc}); sign in with a token at {base}/ui/")
        return
    print(f"Mnemograph UI: {url}\n(a one-time sign-in link; afterwards use {base}/ui/)", flush=True)
    if open_browser:
        webbrowser.open(url)


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((_HOST, port))
        except OSError:
            return False
    return True


def _any_port() -> int:
    with socket.socket() as s:
        s.bind((_HOST, 0))
        port: int = s.getsockname()[1]
        return port
