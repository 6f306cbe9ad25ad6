"""A folder of markdown notes, as basic-memory and Obsidian keep them.

A note is ``NAME.md``: optional YAML front matter (``title``, ``type``, ``tags``, ``permalink``, ``created`` /
``date``, ``modified``), then text. basic-memory writes observations as ``- [category] text #tag (context)``
and relations as ``- relation_type [[Target]]``; Obsidian links notes with ``[[Target]]``,
``[[Target|shown text]]`` or ``[[Target#heading]]``. The note becomes an entity named by its title; its text a
memory (in pieces when long) whose ``[[links]]`` are ``links_to`` relations; each observation and each relation
line its own memory. Dates: the front matter's, else the file's modification time.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from storage.domain.errors import InvalidInput
from storage.domain.models import MAX_ENTITIES, MAX_RELATIONS, EntityIn, RelationIn, WriteItem
from storage.importers._common import chunks, parse_time, predicate_of

SOURCE = "markdown"
_LINK = re.compile(r"\[\[([^\]|#]+)(?:#[^\]|]*)?(?:\|[^\]]*)?\]\]")
_OBSERVATION = re.compile(r"^\s*[-*]\s+\[([^\]]+)\]\s+(.+?)\s*$")
_RELATION = re.compile(r"^\s*[-*]\s+([\w .:/-]+?)\s+\[\[([^\]|#]+)(?:[^\]]*)\]\]\s*$")
_TAG = re.compile(r"(?<![\w&])#([\w/-]+)")


def read_markdown(path: Path, scope: str) -> Iterator[WriteItem]:
    if not path.is_dir():
        raise InvalidInput(
            f"{path} is not a folder", hint="give the folder of notes (a basic-memory project, a vault)"
        )
    for note in sorted(path.rglob("*.md")):
        if any(part.startswith(".") for part in note.relative_to(path).parts):
            continue  # .obsidian/, .trash/ and the like
        yield from _note(note, path, scope)


def _note(note: Path, root: Path, scope: str) -> Iterator[WriteItem]:
    text = note.read_text(encoding="utf-8", errors="replace")
    meta, body = front_matter(text)
    title = str(meta.get("title") or note.stem).strip()
    entity = EntityIn(title, str(meta.get("type") or "note").strip().lower() or "note")
    when = (
        parse_time(meta.get("created"))
        or parse_time(meta.get("date"))
        or datetime.fromtimestamp(note.stat().st_mtime, UTC)
    )
    tags = meta.get("tags")
    base: dict[str, Any] = {"imported_from": SOURCE, "note": str(note.relative_to(root)), "title": title}
    if isinstance(tags, list) and tags:
        base["tags"] = [str(t) for t in tags]
    elif isinstance(tags, str) and tags:
        base["tags"] = [t.strip() for t in tags.split(",") if t.strip()]
    if meta.get("permalink"):
        base["permalink"] = str(meta["permalink"])

    prose: list[str] = []
    for line in body.splitlines():
        relation = _RELATION.match(line)
        observation = _OBSERVATION.match(line)
        if relation:
            predicate, target = predicate_of(relation.group(1)), relation.group(2).strip()
            yield WriteItem(
                f"{title} {predicate.replace('_', ' ')} {target}.",
                [scope],
                kind="fact",
                event_time=when,
                entities=[entity, EntityIn(target)],
                relations=[RelationIn(title, predicate, target)],
                metadata={**base, "relation": predicate},
                source=SOURCE,
            )
        elif observation:
            category, content = observation.group(1).strip(), observation.group(2).strip()
            links = _links(content)
            yield WriteItem(
                f"{title}: {content}",
                [scope],
                kind="preference" if category.lower() in ("preference", "prefers") else "fact",
                event_time=when,
                entities=[entity, *(EntityIn(t) for t in links)][:MAX_ENTITIES],
                relations=[RelationIn(title, "links_to", t) for t in links][:MAX_RELATIONS],
                metadata={
                    **base,
                    "category": category,
                    "tags": _TAG.findall(content) or base.get("tags", []),
                },
                source=SOURCE,
            )
        else:
            prose.append(line)
    text = "\n".join(prose).strip()
    if not _meaningful(text, title):
        return
    for n, piece in enumerate(chunks(text)):
        links = _links(piece)
        yield WriteItem(
            piece,
            [scope],
            kind="note",
            event_time=when,
            entities=[entity, *(EntityIn(t) for t in links)][:MAX_ENTITIES],
            relations=[RelationIn(title, "links_to", t) for t in links][:MAX_RELATIONS],
            metadata={**base, "part": n} if n else base,
            source=SOURCE,
        )


def _links(text: str) -> list[str]:
    return list(dict.fromkeys(m.strip() for m in _LINK.findall(text) if m.strip()))


def _meaningful(text: str, title: str) -> bool:
    """False for a note that is only its headings (basic-memory's '## Observations' sections, emptied above)."""
    words = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    return bool(words) and text.strip() != f"# {title}"


def front_matter(text: str) -> tuple[dict[str, Any], str]:
    """The YAML front matter (a safe subset: ``key: value``, ``[a, b]`` lists and ``- item`` lists) and the
    text after it. Anything else in it is kept as a string."""
    if not text.startswith("---"):
        return {}, text
    end = text.find("\n---", 3)
    if end == -1:
        return {}, text
    header, body = text[3:end], text[end + 4 :].lstrip("-").lstrip("\n")
    meta: dict[str, Any] = {}
    key = None
    for line in header.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line.lstrip().startswith("- ") and key is not None:
            items = meta.get(key)
            meta[key] = [*(items if isinstance(items, list) else []), _scalar(line.lstrip()[2:])]
            continue
        name, sep, value = line.partition(":")
        if not sep or line[:1].isspace():
            continue
        key = name.strip()
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            meta[key] = [_scalar(v) for v in value[1:-1].split(",") if v.strip()]
        else:
            meta[key] = _scalar(value) if value else []
    return meta, body


def _scalar(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value
