"""Importers from other memory tools into a scope of this store, as ordinary writes.

Each reader turns its source into ``WriteItem``s (content, entities, relations, dates, and metadata naming the
source); ``import_into`` reads the whole source once to validate it (a bad item refuses the import, naming it,
before anything is written), then writes it in batches of ``BULK_CHUNK`` through the one write path: each batch is
one transaction whose rows are those single writes would leave (``Engine.write_many``), acknowledged when it
commits. An import stopped part way (a crash, a kill) leaves the batches committed before it; running it again
adds the rest, since what is there comes back ``duplicate``. Ids are hashes of the content, so
importing the same source twice adds nothing the second time (every item comes back ``duplicate``), and
importing into a store that already holds memories merges with them.

- ``mcp-memory``: the reference MCP memory server's knowledge graph (``@modelcontextprotocol/server-memory``,
  its ``memory.jsonl``): one memory per observation of an entity, one per relation.
- ``mem0``: a Mem0 export (``get_all`` results as JSON, or JSON Lines): one memory per memory, dated by its
  ``created_at``.
- ``jsonl``: Mnemograph's own bulk format, one memory a line with the fields of ``memory_write`` and, optionally,
  its vector from the store's model (``storage.importers._jsonl``).
- ``markdown``: a folder of basic-memory or Obsidian notes: one memory per note (its text, split at paragraphs
  when long), one per ``- [category] observation`` line and one per ``- relation [[Target]]`` line;
  ``[[wikilinks]]`` become ``links_to`` relations; front matter gives the title, type, tags and date.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from scopes import LOCAL_PRINCIPAL, Principal
from storage.domain.errors import InvalidInput
from storage.domain.models import WriteItem
from storage.engine.writes import BULK_CHUNK
from storage.importers._jsonl import read_jsonl
from storage.importers._markdown import read_markdown
from storage.importers._mcp_memory import read_mcp_memory
from storage.importers._mem0 import read_mem0

if TYPE_CHECKING:
    from storage.engine.core import EngineCore

READERS: dict[str, Callable[[Path, str], Iterator[WriteItem]]] = {
    "mcp-memory": read_mcp_memory,
    "mem0": read_mem0,
    "markdown": read_markdown,
    "jsonl": read_jsonl,
}
FORMATS = tuple(READERS)
BATCH = BULK_CHUNK


@dataclass(frozen=True, slots=True)
class ImportReport:
    format: str
    scope: str
    read: int
    added: int
    duplicate: int
    linked: int
    scopes: tuple[str, ...] = ()  # every scope written to: ``scope``, and those the source's items name


def import_into(
    engine: EngineCore,
    fmt: str,
    path: Path,
    scope: str,
    *,
    principal: Principal = LOCAL_PRINCIPAL,
    progress: Callable[[int], None] | None = None,
) -> ImportReport:
    """Read ``path`` as ``fmt`` and write every item into ``scope``; ``progress`` gets the running count."""
    reader = READERS.get(fmt)
    if reader is None:
        raise InvalidInput(f"unknown import format {fmt!r}", hint=f"use one of {', '.join(FORMATS)}")
    if not path.exists():
        raise InvalidInput(
            f"{path} does not exist", hint="give the file (or, for markdown, the folder) to import"
        )
    engine.check_writes(reader(path, scope), principal=principal)  # the whole source, before any write
    counts = {"added": 0, "duplicate": 0, "linked": 0}
    read = 0
    written: set[str] = set()
    for batch in _batches(reader(path, scope)):
        written.update(s for item in batch for s in item.scopes)
        receipts = engine.write_many(batch, principal=principal)
        for r in receipts:
            counts[r.status] = counts.get(r.status, 0) + 1
        read += len(batch)
        if progress is not None:
            progress(read)
    return ImportReport(
        fmt, scope, read, counts["added"], counts["duplicate"], counts["linked"], tuple(sorted(written))
    )


def _batches(items: Iterable[WriteItem]) -> Iterator[list[WriteItem]]:
    batch: list[WriteItem] = []
    for item in items:
        batch.append(item)
        if len(batch) == BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


__all__ = ["FORMATS", "ImportReport", "import_into"]
