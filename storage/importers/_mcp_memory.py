"""The reference MCP memory server's knowledge graph (``@modelcontextprotocol/server-memory``).

Its file (``memory.jsonl`` by default, ``MEMORY_FILE_PATH`` otherwise) holds one JSON object a line:
``{"type": "entity", "name", "entityType", "observations": [...]}`` or
``{"type": "relation", "from", "to", "relationType"}``. It keeps no dates, so the memories are dated now.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from storage.domain.errors import InvalidInput
from storage.domain.models import EntityIn, RelationIn, WriteItem
from storage.importers._common import predicate_of

SOURCE = "mcp-memory"


def read_mcp_memory(path: Path, scope: str) -> Iterator[WriteItem]:
    entities: dict[str, EntityIn] = {}
    relations: list[dict[str, Any]] = []
    with open(path, encoding="utf-8") as lines:
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                raise InvalidInput(
                    f"{path}:{n} is not JSON", hint="give the server's memory.jsonl (MEMORY_FILE_PATH)"
                ) from None
            kind = record.get("type") if isinstance(record, dict) else None
            if kind == "entity":
                name = _text(record, "name", path, n)
                entity = EntityIn(name, _type(record.get("entityType")))
                entities[name] = entity
                observations = [str(o) for o in record.get("observations") or [] if str(o).strip()]
                for observation in observations:
                    yield WriteItem(
                        f"{name}: {observation}",
                        [scope],
                        kind="fact",
                        entities=[entity],
                        metadata={"imported_from": SOURCE, "entity": name},
                        source=SOURCE,
                    )
                if not observations:  # an entity known only by name and type is still knowledge
                    yield WriteItem(
                        f"{name} is a {entity.type}.",
                        [scope],
                        kind="fact",
                        entities=[entity],
                        metadata={"imported_from": SOURCE, "entity": name},
                        source=SOURCE,
                    )
            elif kind == "relation":
                relations.append({k: _text(record, k, path, n) for k in ("from", "to", "relationType")})
            else:
                raise InvalidInput(
                    f"{path}:{n} is neither an entity nor a relation",
                    hint="give the MCP memory server's memory.jsonl",
                )
    for r in relations:  # after the entities, so each relation knows its ends' types
        subject = entities.get(r["from"], EntityIn(r["from"]))
        obj = entities.get(r["to"], EntityIn(r["to"]))
        predicate = predicate_of(r["relationType"])
        yield WriteItem(
            f"{r['from']} {predicate.replace('_', ' ')} {r['to']}.",
            [scope],
            kind="fact",
            entities=[subject, obj],
            relations=[RelationIn(r["from"], predicate, r["to"])],
            metadata={"imported_from": SOURCE, "relation": predicate},
            source=SOURCE,
        )


def _text(record: dict[str, Any], key: str, path: Path, n: int) -> str:
    value = record.get(key)
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{path}:{n} has no {key!r}", hint="give the MCP memory server's memory.jsonl")
    return value.strip()


def _type(value: object) -> str:
    text = str(value or "thing").strip().lower()
    return text or "thing"
