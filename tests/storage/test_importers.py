"""The importers' readers on files in their sources' formats (no store needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from storage.domain.errors import InvalidInput
from storage.domain.models import MAX_CONTENT_CHARS, RelationIn
from storage.importers._common import chunks, predicate_of
from storage.importers._markdown import front_matter, read_markdown
from storage.importers._mcp_memory import read_mcp_memory


def test_front_matter_reads_scalars_and_both_list_forms() -> None:
    meta, body = front_matter(
        '---\ntitle: "A: B"\ntags: [x, y]\naliases:\n- one\n- two\nempty:\n---\n\n# A: B\n'
    )
    assert meta == {"title": "A: B", "tags": ["x", "y"], "aliases": ["one", "two"], "empty": []}
    assert body == "# A: B\n"
    assert front_matter("no front matter") == ({}, "no front matter")


def test_wikilinks_with_aliases_and_headings_become_relations(tmp_path: Path) -> None:
    (tmp_path / "Pour over.md").write_text(
        "See [[Grinding#Size|the grind]] and [[Kettles]], [[Kettles]] again.\n"
    )
    (items,) = list(read_markdown(tmp_path, "project:c"))
    assert items.relations == [
        RelationIn("Pour over", "links_to", "Grinding"),
        RelationIn("Pour over", "links_to", "Kettles"),
    ]
    assert items.event_time is not None


def test_a_long_note_is_split_at_paragraphs_within_the_limit() -> None:
    paragraph = "word " * 2000
    pieces = chunks("\n\n".join([paragraph] * 8))
    assert len(pieces) > 1
    assert all(len(p) <= MAX_CONTENT_CHARS for p in pieces)
    assert "".join(pieces).replace("\n", "") == ("\n\n".join([paragraph] * 8)).replace("\n", "")


def test_predicates_are_made_acceptable() -> None:
    assert predicate_of("works at (since 2020)!") == "works at _since 2020"
    assert predicate_of("???") == "related_to"


def test_a_bad_line_in_the_memory_servers_file_names_the_line(tmp_path: Path) -> None:
    source = tmp_path / "memory.jsonl"
    source.write_text(
        json.dumps({"type": "entity", "name": "A", "entityType": "x", "observations": []}) + "\n{oops\n"
    )
    with pytest.raises(InvalidInput, match=r"memory.jsonl:2 is not JSON"):
        list(read_mcp_memory(source, "user:a"))
