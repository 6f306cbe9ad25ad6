"""The docs must not lag the code: docs/mcp.md's tool table matches the published tools and their hints."""

from __future__ import annotations

import re
from pathlib import Path

from server import settings
from tools import ALL_TOOLS

DOCS = Path(__file__).parents[2] / "docs"


def test_the_tool_table_lists_every_tool_with_its_hints() -> None:
    rows = {}
    for line in (DOCS / "mcp.md").read_text().splitlines():
        match = re.match(r"\| `(\w+)\(.*?\)` \|.*\| (\S+) \| (\S+) \| (\S+) \|$", line)
        if match:
            rows[match[1]] = tuple(cell.strip("*") == "yes" for cell in match.groups()[1:])
    expected = {s.name: (s.hints.read_only, s.hints.destructive, s.hints.idempotent) for s in ALL_TOOLS}
    assert rows == expected


def test_every_setting_is_documented() -> None:
    source = Path(settings.__file__).read_text()
    used = set(re.findall(r'pick\("(\w+)"(?:, "(\w+)")?\)', source))
    variables = {f"MNEMOGRAPH_{(alias or name).upper()}" for name, alias in used}
    documented = set(re.findall(r"``(MNEMOGRAPH_\w+)``", settings.__doc__ or ""))
    assert variables <= documented, variables - documented
