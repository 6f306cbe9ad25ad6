"""Docs that state numbers must agree with the code that enforces them."""

import re
from pathlib import Path

from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE as SDK_MAX_MESSAGE_SIZE

from scopes import MAX_SCOPE_NAME
from server._protocol import MAX_MESSAGE_BYTES
from server._tokens import MAX_TOKEN_CHARS
from server.http_front import MAX_BODY
from server.settings import load_settings, owner_settings
from storage.domain import models
from tools import ALL_TOOLS

ROOT = Path(__file__).resolve().parents[1]


def test_limits_page_matches_the_code() -> None:
    page = (ROOT / "docs" / "limits.md").read_text()
    expected = {
        "content of one memory": f"{models.MAX_CONTENT_CHARS} characters",
        "recall query": f"{models.MAX_QUERY_CHARS} characters",
        "scopes per call": str(models.MAX_SCOPES_PER_CALL),
        "entities per write": str(models.MAX_ENTITIES),
        "relations per write": str(models.MAX_RELATIONS),
        "entity / alias / relation name": f"{models.MAX_NAME_CHARS} characters",
        "metadata": f"{models.MAX_METADATA_BYTES} bytes",
        "recall `k`": f"1 to {models.MAX_K}",
        "recall `token_budget`": f"1 to {models.MAX_TOKEN_BUDGET} tokens",
        "reason (amend, retire)": f"{models.MAX_REASON_CHARS} characters",
        "scope id": f"1–{MAX_SCOPE_NAME}",
        "one MCP message (stdio line, HTTP request body)": f"{MAX_MESSAGE_BYTES} bytes",
        "recall result": f"at most `k` (≤ {models.MAX_K}) memories, each at most {models.MAX_CONTENT_CHARS} characters",
        "bearer token": f"over {MAX_TOKEN_CHARS} characters",
    }
    rows = dict(re.findall(r"^\| (.+?) \| (.+?) \|$", page, flags=re.M))
    for name, value in expected.items():
        assert value in rows.get(name, ""), f"docs/limits.md row {name!r} should say {value!r}"


def test_every_transport_enforces_the_documented_message_limit() -> None:
    # The HTTP front, the owner and the stdio socket share one limit, and the SDK behind them accepts it.
    assert MAX_BODY == MAX_MESSAGE_BYTES
    assert MAX_MESSAGE_BYTES <= SDK_MAX_MESSAGE_SIZE


def test_readme_names_every_tool_and_both_setup_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    for tool in (spec.name for spec in ALL_TOOLS):
        assert f"`{tool}`" in readme, f"README does not mention the {tool} tool"
    assert "make serve" in readme
    assert "make test" in readme


def test_the_settings_page_names_every_variable_the_server_reads() -> None:
    """A newcomer found no list of settings in the docs, only a docstring in server/settings.py."""
    page = (ROOT / "docs" / "settings.md").read_text()
    code = (ROOT / "server" / "settings.py").read_text()
    read = {
        (variable or name).upper()
        for name, variable in re.findall(r'pick\("([a-z_]+)"(?:, "([A-Z_]+)")?\)', code)
    }
    assert len(read) > 30  # the pattern still finds what load_settings reads
    missing = sorted(f"MNEMOGRAPH_{v}" for v in read | {"CANONICAL"} if f"`MNEMOGRAPH_{v}`" not in page)
    assert missing == [], f"docs/settings.md does not name {missing}"


def test_every_setting_the_settings_page_marks_owner_is_one_a_client_is_told_about() -> None:
    """A row of docs/settings.md marked *owner* takes effect once, in the owner: a client started with another
    value is told so only if ``owner_settings`` carries it (MNEMOGRAPH_ENGINE_WAIT was marked owner and was
    not: a client asking for a longer wait was silently held to the owner's). CANONICAL has its own check (a
    client asking for another store is refused)."""
    page = (ROOT / "docs" / "settings.md").read_text()
    marked = set()
    for row in page.splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[3] == "owner":
            marked |= set(re.findall(r"`(MNEMOGRAPH_[A-Z_]+)`", cells[0]))
    told = set(owner_settings(load_settings({}))) | {"MNEMOGRAPH_CANONICAL"}
    assert len(marked) > 10  # the pattern still reads the table
    assert marked == told, (
        f"marked owner but not told: {sorted(marked - told)}; told, not marked: {sorted(told - marked)}"
    )
