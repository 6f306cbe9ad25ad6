"""The ``mnemograph`` command line's grammar: every subcommand, its options, and errors written as sentences.

Each subcommand's ``command`` default names its handler in ``server.cli``. ``--data-dir`` is accepted before or
after the subcommand (``mnemograph --data-dir D verify`` and ``mnemograph verify --data-dir D``); subcommands
that read an existing store set ``needs_store``, so a mistyped directory is an error rather than a new, empty
store.

Standard library only: ``serve`` over stdio parses its arguments on the MCP handshake path.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import NoReturn

CLIENT_CHOICES = ("claude-desktop", "claude-code", "cursor", "vscode", "http")


class Parser(argparse.ArgumentParser):
    """argparse, with errors as one sentence and the way to get help, instead of usage and parser internals."""

    def error(self, message: str) -> NoReturn:
        print(
            f"{self.prog}: {_sentence(message)}\nRun `{self.prog} --help` for the options.", file=sys.stderr
        )
        sys.exit(2)


def _sentence(message: str) -> str:
    m = re.match(r"the following arguments are required: (.*)", message)
    if m:
        names = [n.strip() for n in m.group(1).split(",")]
        shown = [n if n.startswith("-") else n.upper().replace("{", "").replace("}", "") for n in names]
        if len(shown) == 1 and shown[0].startswith("NAME"):
            return "a subcommand is missing"
        return f"{' and '.join(shown)} {'is' if len(shown) == 1 else 'are'} missing"
    m = re.match(r"argument (\S+): invalid choice: '?([^']*)'? \(choose from (.*)\)", message)
    if m:
        name = m.group(1)
        what = "command" if name == "COMMAND" or "|" in name else f"value for {name}"
        # The owner process's own command is not one a person picks.
        options = ", ".join(o for o in m.group(3).replace("'", "").split(", ") if o != "daemon")
        return f"{m.group(2)!r} is not a {what}; choose one of {options}"
    m = re.match(r"argument (\S+): invalid (\w+) value: '?([^']*)'?", message)
    if m:
        kind = {
            "int": "a whole number",
            "float": "a number",
            "_positive": "a whole number from 1",
            "_port": "a port number from 0 to 65535",
        }.get(m.group(2), m.group(2))
        return f"{m.group(1)} needs {kind}, not {m.group(3)!r}"
    m = re.match(r"argument (\S+): expected one argument", message)
    if m:
        return f"{m.group(1)} needs a value"
    return message[:1].upper() + message[1:]


class _Version(argparse.Action):
    """--version, looked up only when asked (package metadata costs time on the stdio handshake path)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="print the version")

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        print(f"mnemograph {package_version()}")
        parser.exit()


def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mnemograph")
    except PackageNotFoundError:
        return "0+unknown"


def parse(argv: list[str] | None) -> argparse.Namespace:
    """The parsed command line; exits with status 2 and a sentence on stderr when it does not parse."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        words = " ".join(extra)
        command = command_name(args)
        print(
            f"mnemograph: `{command}` does not take {words}.\nRun `{command} --help` for the options.",
            file=sys.stderr,
        )
        sys.exit(2)
    return args


def command_name(args: argparse.Namespace) -> str:
    """The command as typed, for messages: ``mnemograph list``, ``mnemograph token revoke``."""
    words = [args.name] + ([args.op] if args.name in ("scope", "token") and getattr(args, "op", None) else [])
    return "mnemograph " + " ".join(words)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


def _port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise ValueError(text)
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="mnemograph", description="Long-term memory for AI agents, over MCP.")
    parser.add_argument("--version", action=_Version)
    parser.add_argument("--data-dir", help="the store (default: $MNEMOGRAPH_DATA_DIR or the user data dir)")
    sub = parser.add_subparsers(dest="name", required=True, metavar="COMMAND", parser_class=Parser)
    data_dir = Parser(add_help=False)
    # SUPPRESS: a value given before the subcommand is not overwritten by the subcommand's default.
    data_dir.add_argument(
        "--data-dir", default=argparse.SUPPRESS, help="the store (also accepted before COMMAND)"
    )
    data_dir.add_argument(
        "--canonical",
        default=argparse.SUPPRESS,
        help="the canonical store: kuzu (embedded, the default) or falkordb://host:port/graph, shared by "
        "several nodes, each with its own --data-dir (default: $MNEMOGRAPH_CANONICAL)",
    )
    as_json = Parser(add_help=False)
    as_json.add_argument("--json", action="store_true", help="print the result as JSON")

    def command(
        name: str, text: str, handler: str, *, store: bool, **extra: object
    ) -> argparse.ArgumentParser:
        cmd = sub.add_parser(name, parents=[data_dir], help=text, description=text)
        cmd.set_defaults(command=handler, needs_store=store, **extra)
        return cmd

    serve = command("serve", "serve MCP over stdio (default) or HTTP", "serve", store=False)
    serve.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    serve.add_argument("--host", help="HTTP: address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=_port, help="HTTP: port (default 8765)")
    serve.add_argument(
        "--default-scope", help="scope(s) used when a call names none, comma-separated (default user:<login>)"
    )
    serve.add_argument(
        "--no-auth",
        action="store_true",
        help="HTTP: accept requests without a bearer token (refused unless the host is loopback)",
    )

    setup = command(
        "setup", "connect an MCP client to this memory (writes its config file)", "setup", store=False
    )
    setup.add_argument(
        "client", choices=CLIENT_CHOICES, help="the client; http: a remote client with a token"
    )
    setup.add_argument("--print", action="store_true", help="show what would be written; change nothing")
    setup.add_argument(
        "--project",
        help="use project:NAME (placed inside your personal scope) instead of your personal scope",
    )
    setup.add_argument(
        "--project-dir", help="write the project's own file (.mcp.json, .cursor/, .vscode/) in this directory"
    )
    setup.add_argument("--config", help="write this file instead of the client's usual one")
    setup.add_argument(
        "--server-name",
        help="the server's name in the client (default mnemograph; for http mnemograph-http, so it sits beside "
        "the local entry instead of replacing it)",
    )
    setup.add_argument(
        "--for",
        dest="for_client",
        choices=CLIENT_CHOICES[1:4],
        help="http: the client whose file gets the URL and token (default: print them)",
    )
    setup.add_argument("--url", default="http://127.0.0.1:8765/mcp", help="http: the server's /mcp URL")
    setup.add_argument(
        "--grant",
        action="append",
        metavar="SCOPE=r|w|admin",
        help="http: the token's grants (default: w on user:<login>)",
    )
    setup.add_argument("--token-name", help="http: the token's name (default: <client>-client)")

    # A store must exist: a mistyped --data-dir would otherwise show an empty UI over a new, empty store.
    ui = command("ui", "open the web UI in a browser, signed in as you", "ui", store=True)
    ui.add_argument("--port", type=_port, help="loopback port (default 8765, or a free one when taken)")
    ui.add_argument("--no-browser", action="store_true", help="print the sign-in link without opening it")

    command(
        "status", "show the running servers, their clients and stores", "status", store=False
    ).add_argument("--json", action="store_true", help="print the result as JSON")
    stop = command(
        "stop", "stop the server of a store cleanly (finishes pending writes)", "stop", store=False
    )
    stop.add_argument("--all", action="store_true", help="stop every running server of this user")
    stop.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for it to finish")
    stop.add_argument("--json", action="store_true", help="print what was stopped as JSON")

    listing = sub.add_parser("list", parents=[data_dir, as_json], help="list memories, newest first")
    listing.add_argument("--scope", help="only this scope and the scopes inside it")
    listing.add_argument(
        "--kind", action="append", help="only this kind (repeatable): fact, event, preference…"
    )
    listing.add_argument("--since", help="recorded at or after this date or time (ISO 8601)")
    listing.add_argument("--until", help="recorded before this date or time (ISO 8601)")
    listing.add_argument("--all", action="store_true", help="also retired and superseded memories")
    listing.add_argument("--limit", type=int, default=20, help="memories per page (default 20)")
    listing.add_argument("--page", type=_positive, default=1, help="which page (default 1)")
    listing.set_defaults(command="memory", needs_store=True)
    show = sub.add_parser(
        "show", parents=[data_dir, as_json], help="one memory: versions, provenance, entities, relations"
    )
    show.add_argument("id", help="the memory's id (or its first 8+ characters)")
    show.set_defaults(command="memory", needs_store=True)
    search = sub.add_parser("search", parents=[data_dir, as_json], help="recall from the terminal, explained")
    search.add_argument("query", nargs="+", help="what to look for")
    search.add_argument(
        "--scope", action="append", help="search this scope (repeatable; default: every scope)"
    )
    search.add_argument("-k", type=int, default=10, help="how many results (default 10)")
    search.add_argument("--history", action="store_true", help="also superseded and retired memories")
    search.add_argument("--descendants", action="store_true", help="also the scopes inside --scope")
    search.set_defaults(command="memory", needs_store=True)
    forget = sub.add_parser(
        "forget",
        parents=[data_dir, as_json],
        help="retire a memory: recall stops returning it (history keeps it)",
    )
    forget.add_argument("id", help="the memory's id (or its first 8+ characters)")
    forget.add_argument("--reason", default="", help="why, kept with the memory")
    forget.set_defaults(command="memory", needs_store=True)

    for op, text in (("verify", "check that the stores agree"), ("reindex", "rebuild the derived stores")):
        cmd = sub.add_parser(op, parents=[data_dir, as_json], help=text, description=text)
        cmd.set_defaults(command="admin", op=op, needs_store=True)

    text = "rebuild the digest of every conversation and of every scope's day now (derived: nothing else changes)"
    digests = sub.add_parser("digests", parents=[data_dir, as_json], help=text, description=text)
    digests.set_defaults(command="admin", op="digests", needs_store=True)

    text = (
        "link, as contradictions, current memories that give one subject two values of a functional predicate "
        "in a scope both are in and that no rule linked yet (written before the rules, imported, or linked)"
    )
    sweep = sub.add_parser("sweep", parents=[data_dir, as_json], help=text, description=text)
    sweep.set_defaults(command="admin", op="sweep", needs_store=True)

    erase = sub.add_parser(
        "erase",
        parents=[data_dir, as_json],
        help="forget one memory and all its versions, leaving no trace on disk",
    )
    erase.add_argument("id", help="the memory's id (or its first 8+ characters)")
    erase.add_argument("--confirm", required=True, help="the memory's full id again, to confirm")
    erase.add_argument("--reason", default="", help="why (e.g. the request it fulfils)")
    erase.set_defaults(command="admin", op="erase", needs_store=True)

    export = sub.add_parser("export", parents=[data_dir], help="write the memories as JSON Lines")
    export.add_argument("--scope", help="only this scope and the scopes under it")
    export.add_argument(
        "--vectors", action="store_true", help="include the embeddings (else import re-embeds)"
    )
    export.add_argument("-o", "--output", help="file to write (default: standard output)")
    export.add_argument(
        "--format",
        choices=("jsonl", "markdown"),
        default="jsonl",
        help="jsonl (default; `mnemograph import` reads it) or markdown: one file per memory in the folder -o",
    )
    export.add_argument("--all", action="store_true", help="markdown: also retired and superseded memories")
    export.add_argument("--json", action="store_true", help="print the summary as JSON")
    export.set_defaults(command="admin", op="export", needs_store=True)

    imp = command(
        "import",
        "load an export (a new store, or merged into this one), or another tool's memory into a scope",
        "import",
        store=False,
    )
    imp.add_argument("file", help="the file (a folder for markdown); '-' is standard input for an export")
    imp.add_argument(
        "--from",
        dest="source",
        choices=("mnemograph", "jsonl", "mcp-memory", "mem0", "markdown"),
        default="mnemograph",
        help="mnemograph: an export, restored into an empty data directory or merged into a store; "
        "jsonl: memories one a line (content, scopes, ..., and optionally each one's vector), bulk-loaded; "
        "mcp-memory: the MCP memory server's memory.jsonl; mem0: a Mem0 get_all() export; "
        "markdown: a folder of basic-memory or Obsidian notes (these merge into the store)",
    )
    imp.add_argument("--scope", help="other tools: the scope to import into (default: your personal scope)")
    imp.add_argument("--json", action="store_true", help="print the result as JSON")

    snap = sub.add_parser(
        "backup", parents=[data_dir, as_json], help="copy the stores consistently, even while serving"
    )
    snap.add_argument("dir", help="a new or empty directory; it opens as a data directory")
    snap.set_defaults(command="admin", op="backup", needs_store=True)

    entities = sub.add_parser(
        "entities", help="review SAME_AS proposals (names that may be one entity)"
    ).add_subparsers(dest="action", required=True, metavar="list|accept|reject|undo", parser_class=Parser)
    shown = entities.add_parser("list", parents=[data_dir, as_json], help="list proposals")
    shown.add_argument(
        "--status", choices=("pending", "accepted", "rejected", "all"), default="pending", help="which ones"
    )
    shown.add_argument(
        "--limit", type=_proposal_limit, default=50, help="at most this many (1 to 200; default 50)"
    )
    shown.add_argument("--cursor", help="the cursor the previous page printed, for the next page")
    shown.set_defaults(command="admin", op="entities", needs_store=True, id=None)
    for action, text in (
        ("accept", "accept a proposal: recall treats both entities as one"),
        ("reject", "reject a proposal: the two stay apart and are not proposed again"),
        ("undo", "return an accepted or rejected proposal to pending"),
    ):
        cmd = entities.add_parser(action, parents=[data_dir, as_json], help=text, description=text)
        cmd.add_argument("id", help="the proposal's id as 'mnemograph entities list' shows it")
        cmd.set_defaults(
            command="admin", op="entities", needs_store=True, status="pending", limit=None, cursor=None
        )

    scope = sub.add_parser("scope", help="manage the scope tree").add_subparsers(
        dest="op", required=True, metavar="create|move|list|zone", parser_class=Parser
    )
    for op, text in (
        ("create", "create a scope, under PARENT"),
        ("move", "move a scope under PARENT or to the top"),
    ):
        cmd = scope.add_parser(op, parents=[data_dir, as_json], help=text)
        cmd.add_argument("scope", help="kind:name, e.g. project:site")
        cmd.add_argument("--parent", help="the scope to place it inside (move: omit for the top level)")
        cmd.set_defaults(
            command="scope", needs_store=op == "move"
        )  # scopes may be made before the first serve
    zone = scope.add_parser(
        "zone",
        parents=[data_dir, as_json],
        help="show, or set, the time zone SCOPE's day and week digests are counted in (default UTC)",
    )
    zone.add_argument("scope", help="kind:name, e.g. user:ana")
    zone.add_argument("zone", nargs="?", help="an IANA name, e.g. Asia/Tokyo (UTC resets); omit to show it")
    zone.set_defaults(command="scope", needs_store=True)
    listing = scope.add_parser("list", parents=[data_dir, as_json], help="list scopes (the subtree of SCOPE)")
    listing.add_argument("scope", nargs="?", help="list only this scope and what it contains")
    listing.set_defaults(command="scope", needs_store=True)

    token = sub.add_parser("token", help="bearer tokens for HTTP clients").add_subparsers(
        dest="op", required=True, metavar="create|list|revoke", parser_class=Parser
    )
    create = token.add_parser(
        "create", parents=[data_dir, as_json], help="create a token and print it once on stdout"
    )
    # dest token_name: ``name`` is the subcommand's own (error messages name the command with it).
    create.add_argument(
        "--name", dest="token_name", required=True, help="who the token is for; recorded as the writer"
    )
    create.add_argument(
        "--grant",
        action="append",
        metavar="SCOPE=r|w|admin",
        help="a grant (repeat for several), e.g. team:t=w",
    )
    create.set_defaults(command="token", needs_store=False)  # tokens may be made before the first serve
    token.add_parser(
        "list", parents=[data_dir, as_json], help="list tokens (never their values)"
    ).set_defaults(command="token", needs_store=True)
    revoke = token.add_parser(
        "revoke", parents=[data_dir, as_json], help="revoke a token; running servers refuse it at once"
    )
    revoke.add_argument("token_name", metavar="NAME", help="the token's name")
    revoke.set_defaults(command="token", needs_store=True)

    daemon = command("daemon", "run the owner process (normally automatic)", "daemon", store=False)
    daemon.add_argument("--idle-timeout", type=float, help="seconds to stay up without clients (default 600)")
    daemon.add_argument("--detach", action="store_true", help=argparse.SUPPRESS)
    daemon.add_argument("--ready-fd", type=int, help=argparse.SUPPRESS)
    return parser


def _proposal_limit(text: str) -> int:
    """``entities list --limit``: a whole number from 1 to 200 (argparse prints the message and exits 2)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number (1 to 200)") from None
    if not 1 <= n <= 200:
        raise argparse.ArgumentTypeError(f"{n} is out of range: use 1 to 200 and follow the printed cursor")
    return n
