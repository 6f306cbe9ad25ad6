"""A Mem0 export: the memories ``Memory.get_all`` / ``MemoryClient.get_all`` return, saved as JSON.

Accepted shapes: a JSON list of memories, ``{"results": [...]}`` (Mem0's own answer), or one memory a line.
Each memory is ``{"id", "memory", "user_id"?, "agent_id"?, "run_id"?, "metadata"?, "categories"?,
"created_at"?, "updated_at"?, "hash"?}`` (Mem0's documented fields). ``created_at`` becomes the memory's event
and valid-from time; Mem0's id, owner ids and categories are kept in the metadata.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from storage.domain.errors import InvalidInput
from storage.domain.models import WriteItem
from storage.importers._common import parse_time

SOURCE = "mem0"
_KEPT = ("id", "user_id", "agent_id", "run_id", "app_id", "categories", "hash", "updated_at")


def read_mem0(path: Path, scope: str) -> Iterator[WriteItem]:
    for record in _records(path):
        content = record.get("memory") or record.get("text") or record.get("content")
        if not isinstance(content, str) or not content.strip():
            continue  # Mem0 keeps deleted memories as empty text in some exports
        created = parse_time(record.get("created_at"))
        extra = record.get("metadata") if isinstance(record.get("metadata"), dict) else {}
        kept = {k: record[k] for k in _KEPT if record.get(k) not in (None, "", [])}
        yield WriteItem(
            content.strip(),
            [scope],
            kind="fact",
            event_time=created,
            valid_from=created,
            metadata={"imported_from": SOURCE, **{f"mem0_{k}": v for k, v in kept.items()}, **(extra or {})},
            source=SOURCE,
        )


def _records(path: Path) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    try:
        document = json.loads(text)
    except ValueError:
        try:
            document = [json.loads(line) for line in text.splitlines() if line.strip()]
        except ValueError:
            raise InvalidInput(
                f"{path} is neither JSON nor JSON Lines", hint="save the result of Mem0's get_all() as JSON"
            ) from None
    if isinstance(document, dict):
        document = document.get("results", document.get("memories"))
    if not isinstance(document, list) or not all(isinstance(r, dict) for r in document):
        raise InvalidInput(
            f"{path} does not hold a list of Mem0 memories",
            hint='expected [{"id": ..., "memory": ...}, ...] or {"results": [...]}, as get_all() returns',
        )
    return document
