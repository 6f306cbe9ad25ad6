"""bench/longmemeval.py's ``--variants``: every variant can be selected, including the ones whose names hold a
comma ("full, no group_by"), and the comma lists written before still select what they did."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# Appended, not prepended: bench/mcp.py must not shadow the MCP SDK for the rest of the session.
sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))

from longmemeval import VARIANTS, parse_args

ROOT = Path(__file__).resolve().parents[2]


def chosen(*argv: str) -> list[str]:
    return parse_args(["data", *argv]).variants


def test_a_variant_named_with_a_comma_is_selected_alone() -> None:
    assert "full, no group_by" in VARIANTS
    assert chosen("--variants", "full, no group_by") == ["full, no group_by"]


def test_semicolons_and_repeated_flags_select_several() -> None:
    assert chosen("--variants", "full; full, no group_by") == ["full", "full, no group_by"]
    assert chosen("--variants", "bm25", "--variants", "full, no group_by") == ["bm25", "full, no group_by"]


def test_old_comma_lists_still_work() -> None:
    assert chosen("--variants", "bm25") == ["bm25"]
    assert chosen("--variants", "hybrid,full,conversations,conversations no group_by") == [
        "hybrid",
        "full",
        "conversations",
        "conversations no group_by",
    ]
    # A comma name inside a comma list: the longest name that fits wins.
    assert chosen("--variants", "bm25,full, no group_by,vector") == ["bm25", "full, no group_by", "vector"]
    assert chosen() == []  # no flag: every variant


def test_an_unknown_name_is_refused_with_the_list_of_names(tmp_path: Path) -> None:
    # Before, an unknown name was dropped silently and the run scored nothing (or the wrong subset).
    cmd = [
        sys.executable,
        str(ROOT / "bench" / "longmemeval.py"),
        str(tmp_path),
        "--variants",
        "full,no such",
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120, check=False)
    assert done.returncode == 2
    assert "no variant named 'no such'" in done.stderr
    assert "full, no group_by" in done.stderr


@pytest.mark.parametrize("name", list(VARIANTS))
def test_every_variant_can_be_selected(name: str) -> None:
    assert chosen("--variants", name) == [name]


@pytest.mark.parametrize("value", ["", " ; ", ",", ";;"])
def test_a_selection_that_names_nothing_is_refused_not_read_as_every_variant(value: str) -> None:
    """attack12: an empty --variants (a shell variable that was not set) selected nothing, which the script reads
    as "every variant": the slowest run of all, started by mistake."""
    with pytest.raises(SystemExit) as refused:
        parse_args(["data", "--variants", value])
    assert refused.value.code == 2
