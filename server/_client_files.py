"""Where each MCP client keeps its server list, in what shape, and how to merge one entry into it safely.

The places and shapes are the clients' documented ones:

- Claude Desktop: ``claude_desktop_config.json`` in its config folder (``~/Library/Application Support/Claude``
  on macOS, ``%APPDATA%\\Claude`` on Windows, ``~/.config/Claude`` on Linux); ``{"mcpServers": {name: {command,
  args, env}}}``. It has no remote (URL) servers in this file.
- Claude Code: user scope in ``~/.claude.json`` (top-level ``mcpServers``, beside much else of Claude Code's
  state), project scope in ``.mcp.json`` at the project root; entries carry ``"type": "stdio" | "http"``.
- Cursor: ``~/.cursor/mcp.json`` (every project) or ``.cursor/mcp.json`` (one project); ``mcpServers``, and a
  remote server is ``{url, headers}``.
- VS Code: the user profile's ``mcp.json`` (``~/.config/Code/User`` on Linux) or ``.vscode/mcp.json`` in a
  workspace; the key is ``servers`` (not ``mcpServers``), every entry has ``type``, and the file is JSONC
  (comments and trailing commas allowed).

Standard library and platformdirs only: no store, no SDK.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs

CLIENTS = ("claude-desktop", "claude-code", "cursor", "vscode")


class ClientFileError(ValueError):
    """A client's config file cannot be merged (unreadable, not JSON, wrong shape); the message says which."""


@dataclass(frozen=True, slots=True)
class ClientFile:
    """One client's config file: where it is and under which key its servers live."""

    client: str
    path: Path
    key: str  # "mcpServers" or "servers"
    jsonc: bool = False  # VS Code's files may hold comments and trailing commas


def client_file(client: str, *, project_dir: Path | None = None, home: Path | None = None) -> ClientFile:
    """The file ``client`` reads its MCP servers from: the user-wide one, or the project's with ``project_dir``."""
    home = home or Path.home()
    if client == "claude-desktop":
        if project_dir is not None:
            raise ClientFileError("Claude Desktop has no per-project configuration; drop --project-dir")
        folder = platformdirs.user_config_dir("Claude", appauthor=False, roaming=True)
        return ClientFile(client, Path(folder) / "claude_desktop_config.json", "mcpServers")
    if client == "claude-code":
        path = project_dir / ".mcp.json" if project_dir else home / ".claude.json"
        return ClientFile(client, path, "mcpServers")
    if client == "cursor":
        return ClientFile(client, (project_dir or home) / ".cursor" / "mcp.json", "mcpServers")
    if client == "vscode":
        if project_dir is not None:
            return ClientFile(client, project_dir / ".vscode" / "mcp.json", "servers", jsonc=True)
        profile = Path(platformdirs.user_config_dir("Code", appauthor=False, roaming=True)) / "User"
        return ClientFile(client, profile / "mcp.json", "servers", jsonc=True)
    raise ClientFileError(f"unknown client {client!r}; choose one of {', '.join(CLIENTS)}")


def stdio_entry(client: str, command: list[str], env: dict[str, str]) -> dict[str, Any]:
    """A server entry that launches ``command`` over stdio, in ``client``'s shape."""
    entry: dict[str, Any] = {"command": command[0], "args": command[1:]}
    if env:
        entry["env"] = env
    if client in ("claude-code", "vscode"):
        entry = {"type": "stdio", **entry}
    return entry


def http_entry(client: str, url: str, headers: dict[str, str]) -> dict[str, Any]:
    """A server entry for a streamable-HTTP server at ``url`` that sends ``headers``, in ``client``'s shape."""
    if client == "claude-desktop":
        raise ClientFileError(
            "Claude Desktop's config file has no remote servers; connect it over stdio (`mnemograph setup "
            "claude-desktop`), which reaches the same store"
        )
    if client == "cursor":
        return {"url": url, "headers": headers}
    return {"type": "http", "url": url, "headers": headers}


@dataclass(frozen=True, slots=True)
class Merge:
    """The outcome of merging one entry: the new file text, and whether it differs from what is there."""

    file: ClientFile
    text: str
    changed: bool
    existed: bool
    previous: dict[str, Any] | None  # the entry of that name before, if any
    entry: dict[str, Any] | None = None  # the entry written


def read_servers(file: ClientFile) -> tuple[dict[str, Any], bool]:
    """The file's whole document (``{}`` when missing) and whether the file exists."""
    try:
        raw = file.path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}, False
    except OSError as exc:
        raise ClientFileError(f"cannot read {file.path}: {exc.strerror}") from exc
    if not raw.strip():
        return {}, True
    try:
        document = json.loads(_strip_jsonc(raw) if file.jsonc else raw)
    except ValueError as exc:
        raise ClientFileError(
            f"{file.path} is not valid JSON ({exc}); fix or move it, then run setup again"
        ) from None
    if not isinstance(document, dict):
        raise ClientFileError(f"{file.path} holds a JSON {type(document).__name__}, not an object")
    servers = document.get(file.key)
    if servers is not None and not isinstance(servers, dict):
        raise ClientFileError(f"{file.path}: {file.key!r} is not an object; fix it, then run setup again")
    return document, True


def merge(file: ClientFile, name: str, entry: dict[str, Any]) -> Merge:
    """The file with ``entry`` under ``name``, every other key and server kept as they are."""
    document, existed = read_servers(file)
    servers = dict(document.get(file.key) or {})
    previous = servers.get(name)
    servers[name] = entry
    updated = {**document, file.key: servers}
    text = json.dumps(updated, indent=2, ensure_ascii=False) + "\n"
    return Merge(file, text, changed=previous != entry, existed=existed, previous=previous, entry=entry)


def write(result: Merge) -> Path | None:
    """Write a changed file atomically (same mode as before, 0600 when new); returns the backup made of the
    old file, if there was one.

    A file that will hold a bearer token loses its group and other permissions (clients create theirs 0644,
    and any local account could then use the token over the loopback port), and backups are always 0600:
    the old file may hold an earlier token that is still live."""
    path = result.file.path
    backup = None
    mode = 0o600
    if result.existed:
        mode = path.stat().st_mode & 0o777
        backup = path.with_name(f"{path.name}.{time.strftime('%Y%m%d-%H%M%S')}.bak")
        n = 1
        while backup.exists():
            n += 1
            backup = path.with_name(f"{path.name}.{time.strftime('%Y%m%d-%H%M%S')}-{n}.bak")
        # Created private, then filled: the copy is never readable by others, not even for a moment.
        fd = os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with open(fd, "wb") as copy, path.open("rb") as old:
            shutil.copyfileobj(old, copy)
        shutil.copystat(path, backup)
        os.chmod(backup, 0o600)
    if _BEARER.search(result.text):
        mode &= 0o700
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.mnemograph-tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with open(fd, "w", encoding="utf-8") as out:
        out.write(result.text)
        out.flush()
        os.fsync(out.fileno())
    os.chmod(tmp, mode)
    tmp.replace(path)
    return backup


# An Authorization header carrying a bearer token, in any entry of the file.
_BEARER = re.compile(r"Bearer\s+\S", re.IGNORECASE)

_JSONC_TOKEN = re.compile(r'"(?:\\.|[^"\\])*"|//[^\n]*|/\*.*?\*/|,(?=\s*[}\]])', re.DOTALL)


def _strip_jsonc(text: str) -> str:
    """JSON from JSONC: comments and trailing commas removed, strings left alone."""
    return _JSONC_TOKEN.sub(lambda m: m.group(0) if m.group(0).startswith('"') else "", text)
