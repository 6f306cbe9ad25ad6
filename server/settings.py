"""Configuration, read once from the environment (prefix ``MNEMOGRAPH_``) and command-line overrides.

This is the only module that reads the environment. Everything else receives a ``Settings``. It imports only
the standard library, ``platformdirs`` and ``scopes``, because the stdio front-end loads it on its fast path.

Variables (all optional):

- ``MNEMOGRAPH_DATA_DIR``: the store; default the platform's user data directory.
- ``MNEMOGRAPH_DEFAULT_SCOPE``: comma-separated scope ids used when a call names none; default
  ``user:<login name>``.
- ``MNEMOGRAPH_HOST`` / ``MNEMOGRAPH_PORT``: where ``serve --transport http`` listens; default 127.0.0.1:8765.
- ``MNEMOGRAPH_ALLOWED_HOSTS`` / ``MNEMOGRAPH_ALLOWED_ORIGINS``: comma-separated host names or IP addresses the
  HTTP server also answers to (DNS-rebinding protection), on top of the loopback names (and the bind address
  when it is a specific one), which always stay allowed. ``mem.example.com`` or ``192.0.2.2`` allows any port,
  ``name:8765`` one port, ``name:*`` any port; origins are ``http(s)://name[:port]`` (a bare name allows both
  schemes). Each allowed host is also an allowed origin.
- ``MNEMOGRAPH_RUNTIME_DIR``: where the owner's sockets and locks live; default ``/tmp/mnemograph-<uid>``.
- ``MNEMOGRAPH_IDLE_TIMEOUT``: seconds the owner process stays up after its last client left; default 600.
- ``MNEMOGRAPH_ENGINE_WAIT``: seconds a tool call waits for the store to open; default 120.
- ``MNEMOGRAPH_SPAWN_TIMEOUT``: seconds a front-end waits for a new owner to listen; default 60.
- ``MNEMOGRAPH_LOG_LEVEL``: DEBUG, INFO, WARNING or ERROR; default INFO.
- ``MNEMOGRAPH_MAX_CONNECTIONS``: open connections the HTTP front accepts at once; past it a new connection
  gets 503 and is closed. Default 64 (see docs/security.md for the memory this bounds).
- ``MNEMOGRAPH_HEADER_TIMEOUT`` / ``MNEMOGRAPH_BODY_TIMEOUT``: seconds an HTTP client gets to send a request's
  headers / its whole body before the front answers 408 and closes the connection. Defaults 10 and 30.
- ``MNEMOGRAPH_OWNER_TIMEOUT``: seconds the HTTP front waits for the owner's answer to one request before it
  answers 504 "outcome unknown" (a hung owner). Default 900: longer than any tool call.
- ``MNEMOGRAPH_EMBEDDER``: the runtime that runs the embedding model, ``numpy`` (default: loads in under a
  second, ~100 MB) or ``torch`` (sentence-transformers; 10+ s to load, ~1 GB). Same model, same vectors.
- ``MNEMOGRAPH_PRINCIPAL``: the name of the local principal (stdio sessions, and HTTP with ``--no-auth``),
  recorded as the writer of its memories; it has full rights on the data directory. Default ``local``.
- ``MNEMOGRAPH_FUNCTIONAL_PREDICATES``: comma-separated relation predicates that hold one current value per
  subject, so a new value supersedes the old one at write time; default ``lives_in, works_at, job_title,
  phone, email, married_to, studies_at, reports_to, partner_of`` (docs/extraction.md); ``none`` for no predicate.
- ``MNEMOGRAPH_TRANSITIVE_PREDICATES``: comma-separated containment predicates the consolidator chains
  (A in B, B in C: A in C); default ``located_in, part_of, belongs_to, based_in, member_of`` (docs/recall.md);
  ``none`` derives nothing.
- ``MNEMOGRAPH_RESOLVE_BY_MEANING``: ``off`` (default) or ``on``: entity resolution's meaning tier, which
  proposes (never links) a known name sharing a word with a new one when their embeddings are close
  ("Shawn Murphy" for "Sean Murphy"; docs/entities.md). Off by default: measured, it adds little.
- ``MNEMOGRAPH_ANTHROPIC_API_KEY``: turns on the Claude extraction pass after each write (off without it);
  ``MNEMOGRAPH_ANTHROPIC_MODEL`` picks the model (default ``claude-sonnet-4-6``) and
  ``MNEMOGRAPH_LLM_MIN_INTERVAL`` the minimum seconds between two requests (default 0.5) and
  ``MNEMOGRAPH_LLM_TIMEOUT`` the seconds one request may take (default 60; 4 attempts). With a key, Claude
  also writes the conversation digests and decides what the reconcile rules leave open, unless
  ``MNEMOGRAPH_LLM_RECONCILE`` is ``off`` (default ``on``; docs/extraction.md). These are the owner's: a stdio
  front-end attaching to a running owner does not change them.
- ``MNEMOGRAPH_SAMPLING``: ``off`` (default) or ``on``: MCP sampling, the writing client's own model reads
  each memory it writes after the write is acknowledged, when the client declared the sampling capability
  (docs/extraction.md); ``MNEMOGRAPH_SAMPLING_TIMEOUT`` the seconds the client gets to answer (default 60).
  A stdio front-end's own value decides for its session, whatever the running owner was started with.
- ``MNEMOGRAPH_DIGESTS``: ``on`` (default) or ``off``: the background consolidator that keeps a digest of each
  conversation handed over with ``conversation_write`` (docs/conversations.md); ``MNEMOGRAPH_DIGEST_QUIET``
  the seconds a conversation must go without new messages before it is digested (default 10);
  ``MNEMOGRAPH_DAY_DIGEST_QUIET`` the seconds a scope must go without a new plain memory before the digest of
  its day is built while the day is still running (default 3600; a day that is over is digested anyway).
- ``MNEMOGRAPH_RECALL_SALIENCE``: ``off`` (default) or ``on``: recall's salience term (recent memories and those
  the caller keeps recalling get a small lift) for calls that do not pass ``salience``; ``MNEMOGRAPH_SALIENCE_HALF_LIFE``
  its recency half-life in days (default 30); ``MNEMOGRAPH_ACCESS_COUNTS``: ``on`` (default) or ``off``, whether
  recalls count, per principal, the memories they return (docs/recall.md, "Salience").
- ``MNEMOGRAPH_CANONICAL`` (``--canonical``): the canonical store, ``kuzu`` (default: embedded, in the data
  directory) or ``falkordb://host:port/graph``, a FalkorDB graph several nodes share (docs/scale-out.md).

HTTP requires a bearer token (``mnemograph token create``) unless ``serve`` gets ``--no-auth``, which is a flag
only (no variable, so it is never inherited by accident) and is refused unless the host is loopback; even then
the front serves only connections from processes of the OS user it runs as (``server._front_guard``).
"""

from __future__ import annotations

import getpass
import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import platformdirs

from scopes import InvalidScopeId, ScopeId

PREFIX = "MNEMOGRAPH_"
APP_NAME = "mnemograph"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
EMBEDDER_RUNTIMES = (
    "numpy",
    "torch",
)  # mirrors storage.adapters.embedder.RUNTIMES (this module must not import storage)
# Characters a scope name may hold (mirrors scopes' validation, which has the final word).
_UNSAFE = re.compile(r"[^A-Za-z0-9._@-]+")
_PRINCIPAL = re.compile(r"[A-Za-z0-9._@-]{1,64}")
_CANONICAL = re.compile(r"falkordb://[A-Za-z0-9.\-]+(:[0-9]{1,5})?(/[A-Za-z0-9_.\-]{1,64})?/?")


class SettingsError(ValueError):
    """A setting has an invalid value; the message names the variable or flag and what it accepts."""


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything configurable. Build it with ``load_settings``; values are validated there."""

    data_dir: Path
    runtime_dir: Path
    default_scopes: tuple[str, ...]
    host: str = "127.0.0.1"
    port: int = 8765
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    principal: str = "local"
    no_auth: bool = False
    idle_timeout: float = 600.0
    engine_wait: float = 120.0
    spawn_timeout: float = 60.0
    log_level: str = "INFO"
    max_connections: int = 64
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    # How long the HTTP front waits for the owner's answer to one request before it tells the client the outcome
    # is unknown: longer than any legitimate tool call (a purge of a large store, a first call that waits for
    # the embedding model), so it only ends a hung owner's hold on the client.
    owner_timeout: float = 900.0
    embedder: str = "numpy"
    functional_predicates: tuple[str, ...] | None = None  # None: the engine's default list; (): none
    transitive_predicates: tuple[str, ...] | None = None  # None: the engine's default list; (): none
    resolve_by_meaning: bool = False  # entity resolution's meaning tier (proposals only)
    anthropic_api_key: str = field(default="", repr=False)  # a secret: never in a repr or a log
    anthropic_model: str = "claude-sonnet-4-6"
    llm_min_interval: float = 0.5
    llm_timeout: float = (
        60.0  # seconds one Claude request may take before it counts as timed out (and is retried)
    )
    llm_reconcile: bool = True  # with an API key: Claude's reconcile decision after the commit
    # The canonical store: "" (embedded Kùzu in the data directory) or falkordb://host:port/graph, shared by
    # several nodes (docs/scale-out.md). storage.compose reads it from MNEMOGRAPH_CANONICAL.
    canonical: str = ""
    digest_quiet: float = 10.0  # seconds a conversation must be quiet before its digest is (re)built
    digests: bool = True  # the background consolidator (conversation and day digests)
    day_digest_quiet: float = 3600.0  # seconds a scope must be quiet before its running day is digested
    sampling: bool = False  # MCP sampling: the writing client's own model reads its memories (off by default)
    sampling_timeout: float = 60.0
    # Recall's salience term (docs/recall.md, "Salience"): applied when a call does not say; its half-life in days;
    # whether recalls count how often they return each memory (per principal, for salience).
    recall_salience: bool = False
    salience_half_life: float = 30.0
    access_counts: bool = True


def owner_settings(s: Settings) -> dict[str, str]:
    """The settings the process owning the store takes once, when it starts, and keeps for every client it
    serves, as ``MNEMOGRAPH_*`` name -> value; a secret only as set or unset. The owner records them in its
    info file; ``mnemograph serve`` compares them with its own and says which it cannot apply."""

    def listed(value: tuple[str, ...] | None) -> str:
        # Sorted, each once: the engine takes them as a set, so another order is the same setting.
        return "the default" if value is None else ",".join(sorted(set(value))) or "none"

    def on(flag: bool) -> str:
        return "on" if flag else "off"

    return {
        f"{PREFIX}EMBEDDER": s.embedder,
        f"{PREFIX}ANTHROPIC_API_KEY": "set" if s.anthropic_api_key else "unset",
        f"{PREFIX}ANTHROPIC_MODEL": s.anthropic_model,
        f"{PREFIX}LLM_RECONCILE": on(s.llm_reconcile),
        f"{PREFIX}LLM_MIN_INTERVAL": f"{s.llm_min_interval:g}",
        f"{PREFIX}LLM_TIMEOUT": f"{s.llm_timeout:g}",
        f"{PREFIX}FUNCTIONAL_PREDICATES": listed(s.functional_predicates),
        f"{PREFIX}TRANSITIVE_PREDICATES": listed(s.transitive_predicates),
        f"{PREFIX}RESOLVE_BY_MEANING": on(s.resolve_by_meaning),
        f"{PREFIX}DIGESTS": on(s.digests),
        f"{PREFIX}DIGEST_QUIET": f"{s.digest_quiet:g}",
        f"{PREFIX}DAY_DIGEST_QUIET": f"{s.day_digest_quiet:g}",
        f"{PREFIX}RECALL_SALIENCE": on(s.recall_salience),
        f"{PREFIX}SALIENCE_HALF_LIFE": f"{s.salience_half_life:g}",
        f"{PREFIX}ACCESS_COUNTS": on(s.access_counts),
        f"{PREFIX}IDLE_TIMEOUT": f"{s.idle_timeout:g}",
        f"{PREFIX}ENGINE_WAIT": f"{s.engine_wait:g}",
    }


def load_settings(environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
    """Read ``MNEMOGRAPH_*`` variables, apply ``overrides`` (command-line flags; ``None`` means "not given"),
    and validate. Raises ``SettingsError`` with an actionable message."""
    env = os.environ if environ is None else environ
    given = {k: v for k, v in overrides.items() if v is not None}

    def pick(name: str, variable: str | None = None) -> Any:
        return given[name] if name in given else env.get(PREFIX + (variable or name.upper())) or None

    data_dir = _path(pick("data_dir")) or Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))
    host = str(pick("host") or "127.0.0.1")
    scopes = pick("default_scopes", "DEFAULT_SCOPE")
    default_scopes = _scopes(scopes) if scopes is not None else (login_scope(env),)
    hosts, origins = pick("allowed_hosts"), pick("allowed_origins")
    principal = str(pick("principal") or "local")
    if not _PRINCIPAL.fullmatch(principal):
        raise SettingsError(f"{PREFIX}PRINCIPAL must be 1-64 of A-Z a-z 0-9 . _ @ -, got {principal[:70]!r}")
    no_auth = bool(given.get("no_auth", False))
    if no_auth and not _is_loopback(host):
        raise SettingsError(
            f"--no-auth is refused on {host}: anyone who can reach that address could read and change every "
            "memory. Serve on 127.0.0.1 without auth, or create tokens with `mnemograph token create` and "
            "drop --no-auth"
        )
    level = str(pick("log_level") or "INFO").upper()
    if level not in LOG_LEVELS:
        raise SettingsError(f"{PREFIX}LOG_LEVEL must be one of {', '.join(LOG_LEVELS)}, got {level!r}")
    embedder = str(pick("embedder") or "numpy").lower()
    if embedder not in EMBEDDER_RUNTIMES:
        raise SettingsError(
            f"{PREFIX}EMBEDDER must be one of {', '.join(EMBEDDER_RUNTIMES)}, got {embedder!r}"
        )
    canonical = str(pick("canonical") or "")
    if canonical and canonical != "kuzu" and not _CANONICAL.fullmatch(canonical):
        raise SettingsError(
            f"{PREFIX}CANONICAL (--canonical) must be kuzu or falkordb://host:port/graph, got {canonical[:100]!r}"
        )
    return Settings(
        data_dir=data_dir.expanduser().resolve(),
        runtime_dir=(_path(pick("runtime_dir")) or _default_runtime_dir()).expanduser().absolute(),
        default_scopes=default_scopes,
        host=host,
        port=_number(pick("port"), "port", int, 0, 65535, 8765),
        principal=principal,
        no_auth=no_auth,
        allowed_hosts=allowed_hosts(host, hosts),
        allowed_origins=allowed_origins(host, hosts, origins),
        idle_timeout=_number(pick("idle_timeout"), "idle_timeout", float, 1.0, 86_400.0 * 365, 600.0),
        engine_wait=_number(pick("engine_wait"), "engine_wait", float, 0.0, 3_600.0, 120.0),
        spawn_timeout=_number(pick("spawn_timeout"), "spawn_timeout", float, 1.0, 3_600.0, 60.0),
        log_level=level,
        max_connections=_number(pick("max_connections"), "max_connections", int, 1, 100_000, 64),
        header_timeout=_number(pick("header_timeout"), "header_timeout", float, 0.1, 3_600.0, 10.0),
        body_timeout=_number(pick("body_timeout"), "body_timeout", float, 0.1, 3_600.0, 30.0),
        owner_timeout=_number(pick("owner_timeout"), "owner_timeout", float, 1.0, 86_400.0, 900.0),
        embedder=embedder,
        functional_predicates=_predicates(pick("functional_predicates")),
        transitive_predicates=_predicates(pick("transitive_predicates"), "TRANSITIVE_PREDICATES"),
        resolve_by_meaning=_on_off(pick("resolve_by_meaning") or "off", "RESOLVE_BY_MEANING"),
        # Stripped: "  " is no key, and a line break pasted with one is not part of it.
        anthropic_api_key=str(pick("anthropic_api_key") or "").strip(),
        anthropic_model=str(pick("anthropic_model") or "claude-sonnet-4-6"),
        llm_min_interval=_number(pick("llm_min_interval"), "llm_min_interval", float, 0.0, 3_600.0, 0.5),
        llm_timeout=_number(pick("llm_timeout"), "llm_timeout", float, 1.0, 600.0, 60.0),
        llm_reconcile=_on_off(pick("llm_reconcile"), "LLM_RECONCILE"),
        canonical="" if canonical == "kuzu" else canonical,
        digest_quiet=_number(pick("digest_quiet"), "digest_quiet", float, 0.0, 86_400.0, 10.0),
        digests=_on_off(pick("digests"), "DIGESTS"),
        day_digest_quiet=_number(pick("day_digest_quiet"), "day_digest_quiet", float, 0.0, 86_400.0, 3600.0),
        sampling=_on_off(pick("sampling") or "off", "SAMPLING"),
        sampling_timeout=_number(pick("sampling_timeout"), "sampling_timeout", float, 1.0, 3_600.0, 60.0),
        recall_salience=_on_off(pick("recall_salience") or "off", "RECALL_SALIENCE"),
        salience_half_life=_number(
            pick("salience_half_life"), "salience_half_life", float, 0.01, 36_500.0, 30.0
        ),
        access_counts=_on_off(pick("access_counts"), "ACCESS_COUNTS"),
    )


def _on_off(value: object, variable: str) -> bool:
    text = "on" if value is None else str(value).strip().lower()
    if text not in ("on", "off", "1", "0", "true", "false", "yes", "no"):
        raise SettingsError(f"{PREFIX}{variable} must be on or off, got {text[:20]!r}")
    return text in ("on", "1", "true", "yes")


def _predicates(value: object, variable: str = "FUNCTIONAL_PREDICATES") -> tuple[str, ...] | None:
    """Unset or empty: None (the engine's default list); ``none``: no predicate at all."""
    if value is None or not str(value).strip():
        return None
    if str(value).strip().lower() == "none":
        return ()
    out = tuple(p.strip() for p in str(value).split(",") if p.strip())
    if not out or any(p.lower() == "none" for p in out):
        # "none,works_at" read as a predicate named none beside works_at, and "," as no predicate at all: both
        # are a list the user did not mean; say how to write each.
        raise SettingsError(
            f"{PREFIX}{variable} takes comma-separated snake_case predicates like lives_in, or none alone for "
            f"no predicate (empty for the default), got {str(value)[:100]!r}"
        )
    bad = [p for p in out if not re.fullmatch(r"[a-z][a-z0-9_]{0,63}", p)]
    if bad:
        raise SettingsError(
            f"{PREFIX}{variable} takes comma-separated snake_case predicates like lives_in, got {bad[0]!r}"
        )
    return out


def login_scope(environ: Mapping[str, str]) -> str:
    """``user:<login name>``, sanitised to the characters a scope name allows (``user:local`` if none)."""
    try:
        login = environ.get("LOGNAME") or environ.get("USER") or environ.get("USERNAME") or getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (some containers)
        login = ""
    name = _UNSAFE.sub("-", login).strip("-.")[:128] or "local"
    return f"user:{name}"


def default_allowed_hosts(host: str) -> tuple[str, ...]:
    """Loopback names on any port, plus the bind address itself when it is a specific non-loopback one."""
    hosts = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
    if not _is_loopback(host) and host not in ("0.0.0.0", "::", ""):
        hosts.append(f"[{host}]:*" if ":" in host else f"{host}:*")
    return tuple(hosts)


def default_allowed_origins(host: str) -> tuple[str, ...]:
    return tuple(f"http://{h}" for h in default_allowed_hosts(host))


def allowed_hosts(host: str, extra: object = None) -> tuple[str, ...]:
    """The Host header values the HTTP server answers to: the defaults plus ``MNEMOGRAPH_ALLOWED_HOSTS``.

    The variable adds to the loopback names instead of replacing them: the local clients ``setup`` configures
    (``http://127.0.0.1:8765/mcp``) must keep working when a user opens the server to other machines."""
    out = list(default_allowed_hosts(host))
    for item in _list(extra) if extra is not None else ():
        out.extend(_host_patterns(item))
    return tuple(dict.fromkeys(out))


def allowed_origins(host: str, hosts: object = None, extra: object = None) -> tuple[str, ...]:
    """Origins a browser may send: each allowed host over http and https, plus ``MNEMOGRAPH_ALLOWED_ORIGINS``."""
    out = list(default_allowed_origins(host))
    for item in _list(hosts) if hosts is not None else ():
        out.extend(f"{scheme}://{h}" for h in _host_patterns(item) for scheme in ("http", "https"))
    for item in _list(extra) if extra is not None else ():
        scheme, sep, rest = item.partition("://")
        if not sep:
            out.extend(f"{s}://{h}" for h in _host_patterns(item) for s in ("http", "https"))
        elif scheme.lower() not in ("http", "https") or not rest or "/" in rest:
            raise SettingsError(
                f"{PREFIX}ALLOWED_ORIGINS takes origins like https://mem.example.com or http://192.0.2.2:8765 "
                f"(scheme, host and optional port, no path), got {item!r}"
            )
        else:
            out.extend(f"{scheme.lower()}://{h}" for h in _host_patterns(rest))
    return tuple(dict.fromkeys(out))


def _host_patterns(item: str) -> list[str]:
    """What one ``MNEMOGRAPH_ALLOWED_HOSTS`` entry matches, as exact values and ``name:*`` patterns.

    A bare name matches it on any port, and alone (a Host header without a port, e.g. behind a proxy on 80/443).
    """
    text = item.strip().lower()
    bracketed = re.fullmatch(r"\[([0-9a-f:.]+)\](?::(\d{1,5}|\*))?", text)
    if bracketed:
        name, port = f"[{bracketed.group(1)}]", bracketed.group(2)
    elif text.count(":") > 1:  # a bare IPv6 address
        name, port = f"[{text}]", None
    else:
        name, _, port_text = text.partition(":")
        port = port_text if _ else None
    if not re.fullmatch(r"\[[0-9a-f:.]+\]|[a-z0-9]([a-z0-9._-]*[a-z0-9])?", name) or (
        port is not None and not re.fullmatch(r"\d{1,5}|\*", port)
    ):
        raise SettingsError(
            f"{PREFIX}ALLOWED_HOSTS takes comma-separated host names or IP addresses as clients write them in the "
            f"URL, optionally with :PORT or :* (e.g. mem.example.com,192.0.2.2:8765), got {item.strip()!r}"
        )
    return [f"{name}:*", name] if port in (None, "*") else [f"{name}:{port}"]


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _default_runtime_dir() -> Path:
    # A fixed per-user path rather than $XDG_RUNTIME_DIR or $TMPDIR: every front-end on this machine must find
    # the same owner, and GUI-launched clients (Claude Desktop) often see a different environment than shells.
    return Path(f"/tmp/{APP_NAME}-{os.getuid()}")


def _path(value: object) -> Path | None:
    return Path(str(value)) if value else None


def _scopes(value: object) -> tuple[str, ...]:
    raw = value.split(",") if isinstance(value, str) else list(value)  # type: ignore[call-overload]
    out: list[str] = []
    for item in raw:
        text = str(item).strip()
        if not text:
            continue
        try:
            out.append(str(ScopeId.parse(text)))
        except InvalidScopeId as exc:
            raise SettingsError(f"{PREFIX}DEFAULT_SCOPE: {exc}") from None
    if not out:
        raise SettingsError(f"{PREFIX}DEFAULT_SCOPE is empty; give a scope id such as 'user:ana'")
    return tuple(dict.fromkeys(out))


def _list(value: object) -> tuple[str, ...]:
    raw = value.split(",") if isinstance(value, str) else list(value)  # type: ignore[call-overload]
    return tuple(s for s in (str(i).strip() for i in raw) if s)


def _number(
    value: object, name: str, kind: type[int] | type[float], low: float, high: float, default: float
) -> Any:
    if value is None:
        return kind(default)
    try:
        number = kind(str(value))
    except (TypeError, ValueError):
        raise SettingsError(f"{PREFIX}{name.upper()} must be a number, got {value!r}") from None
    if not low <= number <= high:
        raise SettingsError(f"{PREFIX}{name.upper()} must be from {low:g} to {high:g}, got {number!r}")
    return number
