"""``mnemograph setup CLIENT``: connect one MCP client to this user's memory by writing its own config file.

Every client set up here lands in the same store and, unless ``--project`` is given, the same personal scope
(``user:<login>``, the default every local front-end computes), so one person's clients share one memory.
``--project NAME`` opts a client (or one project's config file) into ``project:NAME``, placed inside the
personal scope so that recall there reads both the project's memories and the personal ones.

The command is written with its absolute path: GUI clients do not inherit the shell's ``PATH``.
"""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from server._client_files import (
    ClientFile,
    ClientFileError,
    Merge,
    client_file,
    http_entry,
    merge,
    read_servers,
    stdio_entry,
    write,
)
from server._tokens import TokenError, TokenInfo, TokenStore
from server.settings import Settings

SERVER_NAME = "mnemograph"
# The HTTP entry's own name: beside the local (stdio) one that `setup CLIENT` writes, never replacing it, and the
# name client-configs/claude-code.sh uses. A client may well have both (one local, one for a remote server).
HTTP_SERVER_NAME = "mnemograph-http"
DEFAULT_URL = "http://127.0.0.1:8765/mcp"


class SetupError(RuntimeError):
    """Setup cannot go on; the message says what to do."""


@dataclass(slots=True)
class SetupRequest:
    client: str  # claude-desktop, claude-code, cursor, vscode or http
    project: str | None = None
    project_dir: Path | None = None
    config: Path | None = None  # overrides the documented file (tests, unusual installs)
    name: str = ""  # default SERVER_NAME, or HTTP_SERVER_NAME for http
    dry_run: bool = False
    data_dir_given: bool = False
    # http only
    target: str | None = None  # the client whose file to write; None: print the lines to use
    url: str = DEFAULT_URL
    grants: list[str] = field(default_factory=list)
    token_name: str | None = None


def command_line() -> list[str]:
    """The absolute command that runs this installation's ``mnemograph serve``."""
    script = Path(os.path.abspath(sys.executable)).parent / "mnemograph"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script), "serve"]
    # No console script (run from a checkout): the interpreter itself; -P keeps the cwd off sys.path.
    return [os.path.abspath(sys.executable), "-P", "-m", "server", "serve"]


def run_setup(request: SetupRequest, settings: Settings, out: TextIO, err: TextIO) -> int:
    """Write (or with ``dry_run`` show) the client's config; returns the exit status."""
    if not request.name:
        request.name = HTTP_SERVER_NAME if request.client == "http" else SERVER_NAME
    if request.client == "http":
        return _setup_http(request, settings, out, err)
    scope = _project_scope(request.project) if request.project else None
    env: dict[str, str] = {}
    if request.data_dir_given or "MNEMOGRAPH_DATA_DIR" in os.environ:
        env["MNEMOGRAPH_DATA_DIR"] = str(settings.data_dir)  # clients do not see the shell's variables
    if scope is not None:
        env["MNEMOGRAPH_DEFAULT_SCOPE"] = scope
    _check_project_dir(request)
    file = _file(request)
    result = merge(file, request.name, stdio_entry(request.client, command_line(), env))
    if scope is not None and not request.dry_run:
        _place_project(scope, settings, err)
    return _finish(result, request, out, err)


def _setup_http(request: SetupRequest, settings: Settings, out: TextIO, err: TextIO) -> int:
    grants = request.grants or [f"{settings.default_scopes[0]}=w"]
    _check_project_dir(request)
    file = _file(request) if request.target else None
    tokens = TokenStore(settings.data_dir)
    if file is not None:
        reused = _configured_token(file, request, tokens, grants)
        if reused is not None:
            print(f"{file.path}: {request.name!r} already connects to {request.url}; nothing to do", file=err)
            return 0
    if request.dry_run:
        value = "<a new token, created when you run this without --print>"
    else:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        base = request.token_name or f"{request.target or 'http'}-client"
        try:
            value, info = _create_token(tokens, base, grants, settings)
        except TokenError as exc:
            raise SetupError(str(exc)) from None
        print(f"created token {info.name!r} with {', '.join(str(g) for g in info.grants)}", file=err)
    headers = {"Authorization": f"Bearer {value}"}
    if file is None:
        print(_http_instructions(request, headers), file=out)
        return 0
    try:
        entry = http_entry(file.client, request.url, headers)
    except ClientFileError as exc:
        raise SetupError(str(exc)) from None
    return _finish(merge(file, request.name, entry), request, out, err)


def _check_project_dir(request: SetupRequest) -> None:
    # A typo must not create a stray project directory holding a config file no client will ever read.
    if request.project_dir is not None and not request.project_dir.is_dir():
        raise SetupError(
            f"--project-dir {request.project_dir} is not a directory; give the project's existing folder"
        )


def _file(request: SetupRequest) -> ClientFile:
    client = request.target if request.client == "http" else request.client
    assert client is not None
    found = client_file(client, project_dir=request.project_dir)
    if request.config is not None:
        return ClientFile(found.client, request.config.expanduser().absolute(), found.key, found.jsonc)
    return found


def _finish(result: Merge, request: SetupRequest, out: TextIO, err: TextIO) -> int:
    path = result.file.path
    if request.dry_run:
        print(f"# {path} ({'unchanged' if not result.changed else 'would be written'})", file=err)
        out.write(result.text)
        return 0
    if not result.changed:
        print(f"{path}: {request.name!r} is already set up this way; nothing changed", file=err)
        return 0
    if result.file.jsonc and result.existed and _has_comments(result.file):
        print(f"note: the comments in {path} are not kept (the backup has them)", file=err)
    backup = write(result)
    verb = "updated" if result.previous is not None else "added"
    print(f"{verb} {request.name!r} in {path}", file=err)
    if result.previous is not None and _transport(result.previous) != _transport(result.entry):
        # A local entry became a remote one (or back): say so, since the client now works differently.
        print(
            f"note: this replaced the {_transport(result.previous)} entry {request.name!r} with a "
            f"{_transport(result.entry)} one; to keep both, run again with --server-name OTHER and restore the "
            "previous file from the backup",
            file=err,
        )
    if backup is not None:
        print(f"the previous file is kept as {backup}", file=err)
    print(f"restart {_client_title(result.file.client)} to connect", file=err)
    return 0


def _transport(entry: dict[str, object] | None) -> str:
    return "local (stdio)" if isinstance(entry, dict) and "command" in entry else "HTTP"


def _has_comments(file: ClientFile) -> bool:
    text = file.path.read_text(encoding="utf-8")
    return "//" in text or "/*" in text


def _client_title(client: str) -> str:
    return {
        "claude-desktop": "Claude Desktop",
        "claude-code": "Claude Code (or run /mcp)",
        "cursor": "Cursor",
        "vscode": "VS Code (or run 'MCP: List Servers')",
    }[client]


def _project_scope(project: str) -> str:
    from scopes import InvalidScopeId, ScopeId

    text = project if ":" in project else f"project:{project}"
    try:
        return str(ScopeId.parse(text))
    except InvalidScopeId as exc:
        raise SetupError(f"--project: {exc}") from None


def _place_project(scope: str, settings: Settings, err: TextIO) -> None:
    """Create the project scope inside the personal one, so recall in it also reads personal memory."""
    from server._admin import AdminError, run_scope
    from server._runtime import RuntimePaths

    personal = settings.default_scopes[0]
    paths = RuntimePaths.of(settings.runtime_dir, settings.data_dir)
    request = {"op": "list", "scope": None, "parent": None, "principal": settings.principal}
    try:
        known = {
            s["id"]: s["parent"] for s in run_scope(paths, request, timeout=settings.spawn_timeout)["scopes"]
        }
        if scope in known:
            where = known[scope]
            if where != personal:
                print(
                    f"note: {scope} already exists {'inside ' + where if where else 'at the top level'}; recall "
                    f"there reads {personal} only if you place it inside: mnemograph scope move {scope} "
                    f"--parent {personal}",
                    file=err,
                )
            return
        request = {**request, "op": "create", "scope": scope, "parent": personal}
        run_scope(paths, request, timeout=settings.spawn_timeout)
    except AdminError as exc:
        raise SetupError(f"could not create {scope} inside {personal}: {exc}") from None
    print(f"created {scope} inside {personal}: recall there reads both", file=err)


def _configured_token(
    file: ClientFile, request: SetupRequest, tokens: TokenStore, grants: list[str]
) -> str | None:
    """The token the file already sends to ``request.url``, when it is valid with exactly ``grants``."""
    from scopes import Grant, InvalidGrant

    try:
        document, _ = read_servers(file)
    except ClientFileError:
        return None
    entry = (document.get(file.key) or {}).get(request.name)
    if not isinstance(entry, dict) or entry.get("url") != request.url:
        return None
    header = str((entry.get("headers") or {}).get("Authorization", ""))
    value = header.removeprefix("Bearer ").strip()
    info = tokens.verify(value) if value else None
    try:
        wanted = {Grant.parse(g) for g in grants}
    except InvalidGrant:
        return None
    return value if info is not None and set(info.grants) == wanted else None


def _create_token(
    tokens: TokenStore, base: str, grants: list[str], settings: Settings
) -> tuple[str, TokenInfo]:
    from storage.engine.audit import AUDIT_FILE, AuditLog

    names = {t.name for t in tokens.all()}
    name, n = base, 1
    while name in names:  # names are never reused (audit entries name them); a second setup gets -2
        n += 1
        name = f"{base}-{n}"
    value, info = tokens.create(name, grants)
    AuditLog(settings.data_dir / AUDIT_FILE).record(
        "token_create", principal=settings.principal, client="setup", token=info.name,
        grants=[str(g) for g in info.grants],
    )  # fmt: skip
    return value, info


def _http_instructions(request: SetupRequest, headers: dict[str, str]) -> str:
    import json

    auth = headers["Authorization"]
    claude = shlex.join(
        ["claude", "mcp", "add", "--transport", "http", "--scope", "user", request.name, request.url,
         "--header", f"Authorization: {auth}"]
    )  # fmt: skip
    snippet = json.dumps(
        {"mcpServers": {request.name: http_entry("claude-code", request.url, headers)}}, indent=2
    )
    return (
        f"Claude Code:\n  {claude}\n\n"
        f"Any streamable-HTTP client (the server must be running: mnemograph serve --transport http):\n{snippet}"
    )
