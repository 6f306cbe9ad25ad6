"""Export, import and snapshot a data directory.

- ``export``: JSON Lines, one record per line: a header (format, embedding model and dimension, export time),
  then scopes (with their parents), entities, memories (every field, both time axes, status, version pointers,
  provenance, scopes with when each was added, the entities each mentions, and optionally its vector),
  version edges (``supersedes``), relations, ``contradicts`` links between exported memories, the record of
  each model pass (``enrichment``: what memory_read shows of it), entity ``SAME_AS`` proposals with their
  decisions (those raised by an exported memory; both entities they name go with them), and ``conversation``
  lines (which messages each conversation holds; digests are left out and rebuilt). Each memory also says what
  it gave each entity it mentions (``mentioned_as``: name, type, aliases), so erasing it after a restore
  takes back exactly that. Read in one read-only transaction: consistent while writes go on.
- ``import``: into an empty data directory only. The whole file is validated before anything is written; ids,
  times, versions and statuses are kept exactly (re-asserted content keeps its salted id); vectors are taken
  from the file when it has them for the same model (and in the range a store keeps: ``validation.vector``),
  else the content is embedded again. A link, a version
  link, a relation, a model pass's record or a proposal naming a memory or an entity the file does not hold,
  versions that loop, or a proposal id given to two pairs of entities, refuses the file, naming the line. Files written before ``conversation`` lines and
  ``mentioned_as`` were kept import as before (messages placed by their metadata; mentions take the entity).
- ``snapshot`` (``mnemograph backup DIR``): pauses writes for the copy, checkpoints Kùzu and copies the graph,
  both projections and their watermarks as they are at one change sequence. The copy opens as a data directory.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
import unicodedata
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any, Protocol

from scopes import InvalidScopeId, ScopeId, descendants
from storage.domain import validation as v
from storage.domain.errors import InvalidInput, MnemographError, StorageUnavailable
from storage.domain.models import Memory, MemoryKind, Provenance
from storage.domain.records import SameAs, entity_key
from storage.enrich.days import is_period_key, known_zone
from storage.enrich.transitive import is_derived_key
from storage.ports.canonical import CanonicalStore, MentionGiven
from storage.ports.embedder import Embedder
from storage.sync.reconciler import Reconciler


class Source(Protocol):
    """What backup needs of an engine. The engine implements it; this module never imports the engine, so
    the two do not import each other (the engine's ``export``, ``backup`` and ``merge_export`` call here)."""

    @property
    def data_dir(self) -> Path: ...

    @property
    def graph(self) -> CanonicalStore: ...

    @property
    def reconciler(self) -> Reconciler: ...

    @property
    def embedder(self) -> Embedder: ...

    @property
    def _tree_lock(self) -> threading.Lock: ...

    @property
    def _parents(self) -> dict[ScopeId, ScopeId]: ...

    def _require_scope(self, scope: ScopeId) -> None: ...

    def _reload_tree(self) -> None: ...

    def _reload_lexicon(self) -> None: ...


FORMAT = 1
IMPORT_BATCH = 500
MAX_CLOCK_SKEW = timedelta(days=1)  # how far ahead of this clock an imported system time may be
NEWER_NOT_EXPORTED = "its newer version is in a scope this export leaves out"


@dataclass(frozen=True, slots=True)
class ExportSummary:
    path: str
    scope: str | None
    memories: int
    scopes: int
    entities: int
    relations: int
    vectors: bool
    proposals: int = 0  # entity SAME_AS proposals (pending or decided)
    contradictions: int = 0  # CONTRADICTS links between exported memories
    enrichments: int = 0  # records of a model pass (memory_read's "enrichment")
    conversations: int = 0  # conversations (which messages each holds; their digests are rebuilt)
    planned_ends: int = 0  # ends a plan gave a memory, kept for known_at (between exported memories)


@dataclass(frozen=True, slots=True)
class ImportSummary:
    data_dir: str
    memories: int
    scopes: int
    entities: int
    relations: int
    reembedded: int
    already: int = 0  # memories the store held before (a merge into a non-empty store skips them)
    proposals: int = 0  # entity SAME_AS proposals written, with their decisions
    contradictions: int = 0  # CONTRADICTS links written
    enrichments: int = 0  # records of a model pass written
    conversations: int = 0  # conversations the imported messages joined (digested again after the import)


@dataclass(frozen=True, slots=True)
class SnapshotSummary:
    path: str
    memories: int
    seq: int


# -- export ----------------------------------------------------------------------------------------


def _time(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def export(
    engine: Source,
    out: IO[str],
    *,
    scope: str | None = None,
    vectors: bool = False,
    leave_out: Collection[str] = frozenset(),
) -> ExportSummary:
    """Write the store (or ``scope`` and the scopes under it) to ``out`` as JSON Lines, without the memories
    in ``leave_out`` (derived ones: conversation digests, rebuilt after an import)."""
    chosen: set[str] | None = None
    if scope is not None:
        sid = v.scope(scope)
        engine._require_scope(sid)
        with engine._tree_lock:
            tree = dict(engine._parents)
        chosen = {str(sid), *(str(s) for s in descendants(sid, tree))}
    counts = {
        "memories": 0,
        "scopes": 0,
        "entities": 0,
        "relations": 0,
        "proposals": 0,
        "contradictions": 0,
        "enrichments": 0,
        "conversations": 0,
        "planned_ends": 0,
    }

    def line(record: Mapping[str, Any]) -> None:
        out.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")

    graph = engine.graph
    with graph.snapshot() as conn:
        line(
            {
                "type": "header",
                "format": FORMAT,
                "model": engine.embedder.name,
                "dim": engine.embedder.dim,
                "exported_at": datetime.now(UTC).isoformat(),
                "scope": str(scope) if scope is not None else None,
                "vectors": vectors,
                # The whole store only: a restore adopts it, so messages re-sent to the copy stay duplicates.
                # Never in one scope's export: with it, a reader of that scope could test guesses of the other
                # scopes a conversation went to (storage.engine.conversations.conversation_key).
                **({"id_secret": graph.id_secret(conn)} if chosen is None else {}),
            }
        )
        all_scopes, parents = graph.scope_parents(conn)
        created = dict(graph.export_scopes(conn))
        zones = graph.scope_zones(
            conn
        )  # a scope's setting: its days and weeks are rebuilt in it after import
        for name in all_scopes:
            if chosen is None or name in chosen:
                parent = parents.get(name)
                if chosen is not None and parent not in chosen:
                    parent = None
                rec: dict[str, Any] = {
                    "type": "scope",
                    "id": name,
                    "parent": parent,
                    "created_at": _time(created.get(name)),
                }
                # A zone this machine no longer takes counts as UTC here: left out, so the file imports anywhere.
                if name in zones and known_zone(zones[name]):
                    rec["time_zone"] = zones[name]
                line(rec)
                counts["scopes"] += 1
        memories: list[dict[str, Any]] = []
        for record in graph.export_memories(conn):
            if record["id"] in leave_out:
                continue
            scopes = record["scopes"]
            if chosen is not None:
                scopes = {s: at for s, at in scopes.items() if s in chosen}
                if not scopes:
                    continue
            record["scopes"] = {s: _time(at) for s, at in sorted(scopes.items())}
            memories.append(record)
        kept = {m["id"] for m in memories}
        relations = [r for r in graph.export_relations(conn) if r[3] in kept]
        # A proposal goes with the memory that raised it (erasing that memory takes it too), in the exported
        # scopes it applies to; both entities it names go with it (one may be mentioned only outside them).
        proposals = [(p, [s for s in p.scopes if chosen is None or s in chosen]) for p in graph.same_as(conn)]
        proposals = [(p, applies) for p, applies in proposals if p.memory_id in kept and applies]
        wanted = (
            {e for m in memories for e in m["mentions"]}
            | {x for r in relations for x in r[:2]}
            | {entity_key(n) for p, _ in proposals for n in (p.a, p.b)}
        )
        told = _told(memories) if chosen is not None else {}
        for eid, name, etype, aliases in graph.export_entities(conn):
            if chosen is None or eid in wanted:
                if (
                    chosen is not None
                ):  # only what the exported memories said of it (not another scope's alias)
                    name, etype, aliases = _as_told(told.get(eid), name, etype, aliases)
                line({"type": "entity", "id": eid, "name": name, "entity_type": etype, "aliases": aliases})
                counts["entities"] += 1
        superseded_at = {old: at for _new, old, _reason, at in graph.export_supersedes(conn)}
        for m in memories:
            if m["superseded_by"] is not None and m["superseded_by"] not in kept and m["retired_at"] is None:
                # Its newer version is outside the exported scopes: without it the memory would come back
                # current. Retired when it was superseded, as a version whose newer one is erased is.
                m["retired_at"] = superseded_at.get(m["id"]) or m["valid_to"] or m["recorded_at"]
                m["retire_reason"] = NEWER_NOT_EXPORTED
            for key in ("supersedes", "superseded_by"):
                if m[key] is not None and m[key] not in kept:
                    m[key] = None  # a version outside the exported scopes
            for key in ("event_time", "valid_from", "valid_to", "recorded_at", "retired_at"):
                m[key] = _time(m[key])
            m["metadata"] = json.loads(m["metadata"]) if m["metadata"] else {}
            if not vectors:
                del m["vector"]
            line({"type": "memory", **m})
            counts["memories"] += 1
        for new, old, reason, at in graph.export_supersedes(conn):
            if new in kept and old in kept:
                line({"type": "supersedes", "new": new, "old": old, "reason": reason, "at": _time(at)})
        for a, b, predicate, mid, at, valid_from, valid_to, ended_by, said_a, said_b in relations:
            line(
                {
                    "type": "relation",
                    "subject": a,
                    "object": b,
                    "predicate": predicate,
                    "memory_id": mid,
                    "recorded_at": _time(at),
                    "valid_from": _time(
                        valid_from
                    ),  # a relation's validity: without it, an ended one reopens
                    "valid_to": _time(valid_to),
                    # What ended it, when the file holds it: another scope's memory's id is not this scope's.
                    "ended_by": ended_by if ended_by in kept else None,
                    # The ends as the recording memory spelt them (what readers of the relation are shown).
                    "subject_name": said_a,
                    "object_name": said_b,
                }
            )
            counts["relations"] += 1
        for new, old, predicate, at in graph.export_contradictions(conn):
            if new in kept and old in kept:
                line({"type": "contradicts", "new": new, "old": old, "predicate": predicate, "at": _time(at)})
                counts["contradictions"] += 1
        for mid, by, end in graph.export_planned_ends(conn):
            if mid in kept and by in kept:
                line({"type": "planned_end", "memory_id": mid, "ended_by": by, "valid_to": _time(end)})
                counts["planned_ends"] += 1
        for mid, row in graph.export_enrichments(conn):
            if mid in kept:
                line({"type": "enrichment", "memory_id": mid, **row, "at": _time(row.get("at"))})
                counts["enrichments"] += 1
        for key, members in graph.export_conversations(conn):
            if is_period_key(key) or is_derived_key(key):
                continue  # a scope's day or week, a derivation's chain: derived from the memories, the import finds them
            # Which conversation each message is in: without it an import could only guess from the messages'
            # metadata and scopes, which a link or unlink since may have changed (two conversations, then).
            exported = [mid for mid in members if mid in kept]
            if exported:
                line({"type": "conversation", "key": key, "messages": exported})
                counts["conversations"] += 1
        for p, applies in proposals:  # accepted and rejected ones keep their decision
            line(
                {
                    "type": "same_as",
                    "id": p.id,
                    "a": p.a,
                    "b": p.b,
                    "tier": p.tier,
                    "score": p.score,
                    "memory_id": p.memory_id,
                    "status": p.status,
                    "created_at": _time(p.created_at),
                    "decided_at": _time(p.decided_at),
                    "decided_by": p.decided_by,
                    "scopes": applies,
                }
            )
            counts["proposals"] += 1
    return ExportSummary(getattr(out, "name", "-"), scope, vectors=vectors, **counts)


def _loops(parent_of: Mapping[str, str], start: str) -> bool:
    """Whether following parents from ``start`` comes back to it (a scope tree has no loop)."""
    seen, cur = {start}, parent_of.get(start)
    while cur is not None:
        if cur in seen:
            return True
        seen.add(cur)
        cur = parent_of.get(cur)
    return False


def _told(memories: list[dict[str, Any]]) -> dict[str, tuple[list[str], list[str], set[str]]]:
    """Entity id -> the names, types and aliases the given memories gave it (their ``mentioned_as``)."""
    told: dict[str, tuple[list[str], list[str], set[str]]] = {}
    for m in memories:
        for eid, (name, etype, aliases) in (m.get("mentioned_as") or {}).items():
            names, types, given = told.setdefault(eid, ([], [], set()))
            if name and name not in names:
                names.append(name)
            if etype and etype not in types:
                types.append(etype)
            given.update(aliases)
    return told


def _as_told(
    said: tuple[list[str], list[str], set[str]] | None, name: str, etype: str, aliases: list[str]
) -> tuple[str, str, list[str]]:
    """An entity as a scope's export shows it: the aliases its memories gave, and its name and type as they gave
    them when another scope's memory gave the stored ones (that spelling and type are the other scope's words).
    An entity none of them mentions (a relation's or a proposal's other end) goes without aliases."""
    if said is None:
        return name, etype, []
    names, types, given = said
    return (
        name if name in names or not names else names[0],
        etype if etype in types or not types else types[0],
        [a for a in aliases if a in given],
    )


# -- import ----------------------------------------------------------------------------------------


@dataclass
class Parsed:
    """A validated export, ready to be written."""

    model: str
    dim: int
    scopes: list[tuple[str, datetime]] = field(default_factory=list)
    parents: list[tuple[str, str]] = field(default_factory=list)
    entities: list[tuple[str, str, str, list[str]]] = field(default_factory=list)
    memories: list[tuple[Memory, list[float] | None, dict[str, datetime], list[str]]] = field(
        default_factory=list
    )
    supersedes: list[tuple[str, str, str, datetime]] = field(default_factory=list)
    relations: list[
        tuple[
            str, str, str, str, datetime, datetime | None, datetime | None, str | None, str | None, str | None
        ]
    ] = field(default_factory=list)
    proposals: list[SameAs] = field(default_factory=list)
    proposal_lines: list[int] = field(default_factory=list)  # each proposal's line, for errors
    contradictions: list[tuple[str, str, str, datetime]] = field(default_factory=list)
    enrichments: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    planned_ends: list[tuple[str, str, datetime]] = field(default_factory=list)  # (memory, plan, end)
    conversations: list[tuple[str, list[str]]] = field(default_factory=list)
    zones: dict[str, str] = field(default_factory=dict)  # scope -> its time zone, when it set one
    id_secret: str = ""  # the exported store's (a whole-store export only)
    given: dict[str, dict[str, MentionGiven]] = field(
        default_factory=dict
    )  # memory -> entity -> what it gave
    lines: dict[tuple[str, str], int] = field(default_factory=dict)  # (kind, key) -> line: links, records


def require_empty(data_dir: Path, *, what: str = "import") -> None:
    """A restore (``what``: ``import``) or a backup (``backup``) goes into a new or empty directory only."""
    if data_dir.exists() and (not data_dir.is_dir() or any(data_dir.iterdir())):
        hint = (
            "back up into a new directory (it is created if missing) or an empty one; nothing was written"
            if what == "backup"
            else "import into a new data directory (it is created if missing); nothing was imported"
        )
        raise InvalidInput(f"{data_dir} is not an empty directory", hint=hint)


def parse(lines: Iterator[str]) -> Parsed:
    """Read and validate a whole export. Raises InvalidInput naming the first bad line; writes nothing."""
    parsed: Parsed | None = None
    n = 0
    try:
        for n, raw in enumerate(lines, start=1):  # n names the bad line
            if not raw.strip():
                continue
            try:
                rec = json.loads(raw)
            except ValueError:
                raise InvalidInput("not JSON") from None
            if not isinstance(rec, dict):
                raise InvalidInput("not a JSON object")
            kind = rec.get("type")
            if parsed is None:
                if kind != "header" or rec.get("format") != FORMAT:
                    raise InvalidInput(f"the first line must be a format-{FORMAT} header")
                parsed = Parsed(model=str(rec.get("model")), dim=int(rec.get("dim", 0)))
                parsed.id_secret = _secret(rec.get("id_secret"))
            elif kind == "scope":
                sid = str(_scope(rec["id"]))
                _once(parsed, "scope", sid, n)
                parsed.scopes.append((sid, _learnt(rec.get("created_at"), "created_at")))
                if rec.get("time_zone") is not None:
                    if not known_zone(rec["time_zone"]):
                        raise InvalidInput(
                            f"scope {sid}'s time_zone {str(rec['time_zone'])[:60]!r} is not a time zone this "
                            "machine knows",
                            hint="give an IANA name such as Europe/Lisbon, or leave time_zone out (UTC)",
                        )
                    parsed.zones[sid] = str(rec["time_zone"])
                if rec.get("parent") is not None:
                    parsed.parents.append((sid, str(_scope(rec["parent"]))))
                    if _loops(dict(parsed.parents), sid):
                        raise InvalidInput(f"scope {sid}'s parent {parsed.parents[-1][1]} is inside it")
            elif kind == "entity":
                aliases = [v.name(a, "entity alias") for a in rec.get("aliases") or []]
                parsed.entities.append(
                    (
                        str(rec["id"]),
                        v.name(rec["name"], "entity name"),
                        str(rec.get("entity_type") or "thing"),
                        aliases,
                    )
                )
            elif kind == "memory":
                parsed.memories.append(_memory(rec))
                mid = parsed.memories[-1][0].id
                parsed.lines.setdefault(("memory", mid), n)
                if rec.get("mentioned_as") is not None:  # absent from exports written before it was kept
                    parsed.given[mid] = _mentioned_as(rec["mentioned_as"], parsed.memories[-1][3])
            elif kind == "supersedes":
                parsed.lines.setdefault(("supersedes", str(len(parsed.supersedes))), n)
                parsed.supersedes.append(
                    (
                        _id(rec["new"]),
                        _id(rec["old"]),
                        v.reason(rec.get("reason", "")),
                        _learnt(rec["at"], "at"),
                    )
                )
            elif kind == "relation":
                parsed.lines.setdefault(("relation", str(len(parsed.relations))), n)
                parsed.relations.append(
                    (
                        str(rec["subject"]),
                        str(rec["object"]),
                        _predicate(rec.get("predicate")),
                        _id(rec["memory_id"]),
                        _learnt(rec["recorded_at"], "recorded_at"),
                        # Exports written before these were kept have none: the relation stays open.
                        _opt_time(rec.get("valid_from")),
                        _opt_time(rec.get("valid_to")),
                        _id(rec["ended_by"]) if rec.get("ended_by") else None,
                        # Older exports have none: the restore takes the memory's mentions' names.
                        _said(rec, "subject"),
                        _said(rec, "object"),
                    )
                )
            elif kind == "same_as":
                parsed.proposals.append(_proposal(rec))
                parsed.proposal_lines.append(n)
            elif kind == "contradicts":
                link = (
                    _id(rec["new"]),
                    _id(rec["old"]),
                    _predicate(rec.get("predicate")),
                    _learnt(rec["at"], "at"),
                )
                if link[0] == link[1]:
                    raise InvalidInput(f"memory {link[0]} is said to contradict itself")
                _once(parsed, "contradiction", " ".join(link[:3]), n)
                parsed.contradictions.append(link)
            elif kind == "planned_end":
                end = (_id(rec["memory_id"]), _id(rec["ended_by"]), _req_time(rec["valid_to"]))
                _once(parsed, "planned end", " ".join(end[:2]), n)
                parsed.planned_ends.append(end)
            elif kind == "enrichment":
                mid = _id(rec["memory_id"])
                _once(parsed, "model pass record", mid, n)
                parsed.enrichments.append((mid, _enrichment(rec)))
            elif kind == "conversation":
                key = _conversation_key(rec.get("key"))
                _once(parsed, "conversation", key, n)
                members = rec.get("messages")
                if not isinstance(members, list) or not members:
                    raise InvalidInput("a conversation's messages must be a non-empty list of memory ids")
                parsed.conversations.append((key, [_id(mid) for mid in members]))
            else:
                raise InvalidInput(f"unknown record type {str(kind)[:40]!r}")
    except MnemographError as exc:
        hint = f"nothing was imported; {exc.hint}" if exc.hint else "nothing was imported"
        raise InvalidInput(f"line {n}: {exc.message}", hint=hint) from None
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidInput(f"line {n}: malformed record ({exc!r})", hint="nothing was imported") from None
    if parsed is None:
        raise InvalidInput("the file is empty", hint="pass a file written by mnemograph export")
    ids = {m.id for m, *_ in parsed.memories}
    if len(ids) != len(parsed.memories):
        raise InvalidInput("the export holds a memory id twice", hint="nothing was imported")
    # A proposal goes with the memory that raised it, in scopes the file has (export writes nothing else).
    scopes = {s for s, _ in parsed.scopes} | {str(s) for m, *_ in parsed.memories for s in m.scopes}

    def refuse(n: int, what: str) -> InvalidInput:
        return InvalidInput(f"line {n}: {what}", hint="nothing was imported")

    _check_versions(parsed, ids, refuse)
    for new, old, _p, _at in parsed.contradictions:
        n = parsed.lines[("contradiction", " ".join((new, old, _p)))]
        if missing := [m for m in (new, old) if m not in ids]:
            raise refuse(n, f"a contradiction names memory {missing[0]}, which the file does not hold")
    for mid, by, _end in parsed.planned_ends:
        if missing := [m for m in (mid, by) if m not in ids]:
            n = parsed.lines[("planned end", f"{mid} {by}")]
            raise refuse(n, f"a planned end names memory {missing[0]}, which the file does not hold")
    for mid, _row in parsed.enrichments:
        if mid not in ids:
            raise refuse(
                parsed.lines[("model pass record", mid)],
                f"a model pass's record names memory {mid}, which the file does not hold",
            )
    for key, members in parsed.conversations:
        if missing := [m for m in members if m not in ids]:
            raise refuse(
                parsed.lines[("conversation", key)],
                f"a conversation names memory {missing[0]}, which the file does not hold",
            )
    # A version pointer comes with its SUPERSEDES edge, as the store writes them (``supersede``): erasing a
    # version finds the pointers to clear along that edge, so a pointer without one would keep an erased id.
    # (``_check_versions`` made sure each names a memory the file holds.)
    edges = {(new, old) for new, old, _r, _at in parsed.supersedes}
    for m, *_ in parsed.memories:
        for key, pointer, edge in (
            ("supersedes", m.supersedes, (m.id, m.supersedes)),
            ("superseded_by", m.superseded_by, (m.superseded_by, m.id)),
        ):
            if pointer is not None and edge not in edges:
                raise refuse(
                    parsed.lines[("memory", m.id)],
                    f"memory {m.id}'s {key} names {pointer}, but the file holds no supersedes record joining "
                    "those two versions (an export writes one for every version pointer it keeps)",
                )
    entities = {eid for eid, *_ in parsed.entities}
    _check_entities(parsed, entities, refuse)
    first: dict[str, tuple[int, frozenset[str]]] = {}
    for n, p in zip(parsed.proposal_lines, parsed.proposals, strict=True):
        pair = frozenset((entity_key(p.a), entity_key(p.b)))
        if p.id in first:
            was, other = first[p.id]
            differs = "for another pair of entities" if other != pair else "again"
            raise refuse(n, f"proposal {p.id} is given {differs} (first on line {was})")
        first[p.id] = (n, pair)
        if unknown := [name for name in (p.a, p.b) if entity_key(name) not in entities]:
            raise InvalidInput(
                f"line {n}: proposal {p.id} names entity {unknown[0]!r}, which the file does not hold",
                hint="nothing was imported; a --scope export written before both entities of a proposal went "
                "with it may lack one: export it again",
            )
        if p.memory_id not in ids:
            raise InvalidInput(
                f"line {n}: proposal {p.id} names memory {p.memory_id}, which the file does not hold",
                hint="nothing was imported",
            )
        if outside := [s for s in p.scopes if s not in scopes]:
            raise InvalidInput(
                f"line {n}: proposal {p.id} applies in scope {outside[0]}, which the file does not hold",
                hint="nothing was imported",
            )
    return parsed


def _check_versions(parsed: Parsed, ids: set[str], refuse: Callable[[int, str], InvalidInput]) -> None:
    """Version links and relations name memories the file holds (an export leaves out those outside it), and no
    chain of versions comes back to where it started. A relation ended by a memory the file does not hold (an
    export of one scope, written before it left that id out) stays ended, by nothing named."""
    newer: dict[str, str] = {}
    for m, *_ in parsed.memories:
        n = parsed.lines[("memory", m.id)]
        for key, other in (("supersedes", m.supersedes), ("superseded_by", m.superseded_by)):
            if other == m.id:
                raise refuse(n, f"memory {m.id} is said to supersede itself ({key})")
            if other is not None and other not in ids:
                raise refuse(n, f"memory {m.id}'s {key} names memory {other}, which the file does not hold")
        if m.superseded_by is not None:
            newer[m.id] = m.superseded_by
    for m, *_ in parsed.memories:
        seen, cur = {m.id}, newer.get(m.id)
        while cur is not None:
            if cur in seen:
                raise refuse(parsed.lines[("memory", m.id)], f"memory {m.id}'s versions come back to it")
            seen.add(cur)
            cur = newer.get(cur)
    for i, (new, old, _reason, _at) in enumerate(parsed.supersedes):
        n = parsed.lines[("supersedes", str(i))]
        if new == old:
            raise refuse(n, f"memory {new} is said to supersede itself")
        if missing := [x for x in (new, old) if x not in ids]:
            raise refuse(n, f"a version link names memory {missing[0]}, which the file does not hold")
        if newer.get(old) != new:
            # Every version edge is written with its older memory's pointer: an edge without one would chain
            # two memories that are not versions of each other (erasing one would erase the other).
            raise refuse(
                n, f"memory {old} is not said to be superseded by {new} (its superseded_by says otherwise)"
            )
    for i, rel in enumerate(parsed.relations):
        if rel[3] not in ids:
            raise refuse(
                parsed.lines[("relation", str(i))],
                f"a relation names memory {rel[3]}, which the file does not hold",
            )
        if rel[7] is not None and rel[7] not in ids:
            parsed.relations[i] = (*rel[:7], None, *rel[8:])


def _check_entities(parsed: Parsed, entities: set[str], refuse: Callable[[int, str], InvalidInput]) -> None:
    """A memory's mentions and a relation's ends are entities the file holds (an export writes every one it
    names): one it does not hold was dropped on the way in without a word."""
    for m, _vec, _added, mentions in parsed.memories:
        if unknown := [e for e in mentions if e not in entities]:
            raise refuse(
                parsed.lines[("memory", m.id)],
                f"memory {m.id} mentions entity {unknown[0][:40]!r}, which the file does not hold",
            )
    for i, (a, b, *_rest) in enumerate(parsed.relations):
        if unknown := [e for e in (a, b) if e not in entities]:
            raise refuse(
                parsed.lines[("relation", str(i))],
                f"a relation names entity {unknown[0][:40]!r}, which the file does not hold",
            )


def _scope(value: object) -> ScopeId:
    try:
        return ScopeId.parse(value)
    except InvalidScopeId as exc:
        raise InvalidInput(str(exc)) from None


def _id(value: object) -> str:
    mid = v.memory_id(value)
    if len(mid) != v.ID_LENGTH:
        raise InvalidInput(f"{mid!r} is not a full memory id")
    return mid


def _mentioned_as(value: object, mentions: list[str]) -> dict[str, MentionGiven]:
    """What a memory gave each entity it mentions: {entity id: [name, type, aliases]}, for entities in its
    ``mentions`` only."""
    if not isinstance(value, dict):
        raise InvalidInput("a memory's mentioned_as must be an object of entity id -> [name, type, aliases]")
    given: dict[str, MentionGiven] = {}
    for eid, said in value.items():
        if eid not in mentions:
            raise InvalidInput(
                f"mentioned_as names entity {str(eid)[:40]!r}, which the memory does not mention"
            )
        if not isinstance(said, list) or len(said) != 3 or not isinstance(said[2], list):
            raise InvalidInput(f"mentioned_as of entity {str(eid)[:40]!r} must be [name, type, aliases]")
        name, etype, aliases = said
        given[eid] = (
            v.name(name, "entity name"),
            str(etype or "thing")[:100],
            [v.name(a, "entity alias") for a in aliases],
        )
    return given


def _secret(value: object) -> str:
    if value is None or value == "":
        return ""
    if not isinstance(value, str) or len(value) != 64 or any(c not in "0123456789abcdef" for c in value):
        raise InvalidInput("the header's id_secret must be 64 lower-case hex characters")
    return value


def _conversation_key(value: object) -> str:
    if not isinstance(value, str) or len(value) != 32 or any(c not in "0123456789abcdef" for c in value):
        raise InvalidInput(f"{str(value)[:40]!r} is not a conversation key")
    return value


def _said(rec: dict[str, Any], end: str) -> str | None:
    """A relation end's name as its memory spelt it (``subject_name``/``object_name``): a spelling of that end's
    entity, or None when the export does not give it."""
    value = rec.get(f"{end}_name")
    if value is None:
        return None
    if not isinstance(value, str) or entity_key(value) != str(rec[end]):
        raise InvalidInput(
            f"a relation's {end}_name must be a spelling of its {end} {str(rec[end])[:40]!r}, "
            f"not {str(value)[:40]!r}"
        )
    return value


def _opt_time(value: object) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{value!r} is not an ISO 8601 time")
    parsed = datetime.fromisoformat(value)
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def _req_time(value: object) -> datetime:
    parsed = _opt_time(value)
    if parsed is None:
        raise InvalidInput("a required time is missing")
    return parsed


def _learnt(value: object, what: str) -> datetime:
    """A system time (when the store learnt or stopped believing something): never later than now, give or take
    ``MAX_CLOCK_SKEW`` (the exporting machine's clock may run a little ahead). Valid and event times may be in
    the future, as ``memory_write`` accepts them; a store cannot have learnt something tomorrow, and a day or week
    recorded in 9999 would never be over (``storage.enrich.days``)."""
    at = _req_time(value)
    now = datetime.now(UTC)
    if at > now + MAX_CLOCK_SKEW:
        raise InvalidInput(
            f"{what} {at.isoformat()} is later than now ({now.isoformat(timespec='seconds')}) by more than "
            f"{MAX_CLOCK_SKEW}: a system time says when the store learnt something, it cannot be in the future",
            hint="fix that time in the file (or this machine's clock, if it is behind) and import again",
        )
    return at


def _proposal(rec: dict[str, Any]) -> SameAs:
    pid = str(rec["id"])
    if not (8 <= len(pid) <= 32 and all(c in "0123456789abcdef" for c in pid)):
        raise InvalidInput(f"{pid[:40]!r} is not a proposal id")
    status = rec.get("status")
    if status not in ("pending", "accepted", "rejected"):
        raise InvalidInput(f"unknown proposal status {str(status)[:40]!r}")
    return SameAs(
        id=pid,
        a=v.name(rec["a"], "entity name"),
        b=v.name(rec["b"], "entity name"),
        tier=str(rec.get("tier") or "")[:40],
        score=_score(rec.get("score")),
        memory_id=_id(rec["memory_id"]),
        status=status,
        created_at=_learnt(rec["created_at"], "created_at"),
        decided_at=_learnt(rec["decided_at"], "decided_at") if rec.get("decided_at") is not None else None,
        decided_by=str(rec.get("decided_by") or "")[:200],
        scopes=_proposal_scopes(rec.get("scopes")),
    )


def _once(parsed: Parsed, kind: str, key: str, n: int) -> None:
    """Refuse a second line saying the same thing: it could only say it differently."""
    if (kind, key) in parsed.lines:
        raise InvalidInput(f"the same {kind} again (first on line {parsed.lines[(kind, key)]})")
    parsed.lines[(kind, key)] = n


def _predicate(value: object) -> str:
    if (
        not isinstance(value, str)
        or not 0 < len(value) <= 100
        or any(unicodedata.category(c) in ("Cc", "Cs") for c in value)
    ):
        raise InvalidInput(f"{str(value)[:40]!r} is not a predicate")
    return value


ENRICHMENT_STATUSES = ("done", "failed", "skipped")
MAX_TOKEN_COUNT = 2**63 - 1  # what the stores keep (a 64-bit integer); more failed the write after validation


def _enrichment(rec: dict[str, Any]) -> dict[str, Any]:
    """A model pass's record: its status, what it said, the model, token counts and when it ran."""
    status = rec.get("status")
    if status not in ENRICHMENT_STATUSES:
        raise InvalidInput(f"unknown model pass status {str(status)[:40]!r}")
    row: dict[str, Any] = {
        "status": status,
        "detail": str(rec.get("detail") or "")[:2000],
        "model": str(rec.get("model") or "")[:200],
        "at": _learnt(rec.get("at"), "at"),
    }
    for key in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"):
        count = rec.get(key)
        if count is not None and (
            isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= MAX_TOKEN_COUNT
        ):
            raise InvalidInput(
                f"{key} must be a whole number from 0 to {MAX_TOKEN_COUNT}, not {str(count)[:40]!r}"
            )
        row[key] = count
    return row


def _score(value: object) -> float:
    """A proposal's name similarity: a finite number from 0 to 1 (absent: 0)."""
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise InvalidInput(f"a proposal's score must be a number from 0 to 1, not {str(value)[:40]!r}")
    return float(value)


def _proposal_scopes(value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise InvalidInput("a proposal's scopes must be a non-empty list of scope ids")
    return tuple(str(_scope(s)) for s in value)


def _memory(rec: dict[str, Any]) -> tuple[Memory, list[float] | None, dict[str, datetime], list[str]]:
    added = {
        str(_scope(s)): _learnt(at, "time it joined a scope") for s, at in (rec.get("scopes") or {}).items()
    }
    if not added:
        raise InvalidInput(f"memory {str(rec.get('id'))[:40]} belongs to no scope")
    ets = rec.get("event_time_source")
    if ets not in ("caller", "content", "recorded"):
        raise InvalidInput(f"unknown event_time_source {ets!r}")
    m = Memory(
        id=_id(rec["id"]),
        content=v.content(rec["content"]),
        kind=MemoryKind(rec["kind"]),
        scopes=tuple(sorted(added)),
        entities=tuple(v.name(e, "entity name") for e in rec.get("entities") or []),
        provenance=Provenance(
            str(rec.get("principal") or ""), str(rec.get("client") or ""), str(rec.get("source") or "")
        ),
        metadata=v.metadata(rec.get("metadata") or {}),
        event_time=_req_time(rec["event_time"]),
        event_time_source=ets,
        valid_from=_req_time(rec["valid_from"]),
        valid_to=_opt_time(rec.get("valid_to")),
        recorded_at=_learnt(rec["recorded_at"], "recorded_at"),
        retired_at=_learnt(rec["retired_at"], "retired_at") if rec.get("retired_at") is not None else None,
        retire_reason=v.reason(rec.get("retire_reason") or ""),
        supersedes=_id(rec["supersedes"]) if rec.get("supersedes") else None,
        superseded_by=_id(rec["superseded_by"]) if rec.get("superseded_by") else None,
    )
    vector = rec.get("vector")
    return (
        m,
        (list(map(float, vector)) if vector is not None else None),
        added,
        [str(e) for e in rec.get("mentions") or []],
    )


def restore(
    engine: Source, parsed: Parsed, *, progress: Callable[[str, int, int], None] | None = None
) -> ImportSummary:
    """Write a parsed export into ``engine`` through its single writer, merging with what the store holds.

    Memories already present (same id: ids are content hashes, salted for re-assertions) are skipped, so
    importing the same export twice adds nothing. Entities are merged by their key; a scope the store already
    has keeps its place in the tree; version edges and relations come only with the memories added. Into an
    empty store this writes everything, exactly as exported. ``progress(phase, done, total)`` reports embedding
    and writing.
    """
    graph, reconciler = engine.graph, engine.reconciler
    with graph.read() as conn:
        present = set(graph.all_ids(conn))
        known_scopes = {s for s, _ in graph.export_scopes(conn)}
        asked = [p.id for p in parsed.proposals]
        held = {p.id: p for p in graph.same_as(conn, asked)} if asked else {}
        overlap = [m.id for m, *_ in parsed.memories if m.id in present]
        stored: dict[str, Memory] = {}
        for start in range(0, len(overlap), 512):
            stored.update(graph.fetch(conn, overlap[start : start + 512]))
    # A memory the store holds is skipped, but the file's links and proposals may still name it: a file that
    # gives that id other words is not a copy of this store's memory, and its links would attach to words the
    # file never showed (attack12: a contradiction planted on any memory whose id one can compute).
    for m, *_ in parsed.memories:
        ours = stored.get(m.id)
        if ours is not None and ours.content != m.content:
            raise InvalidInput(
                f"line {parsed.lines[('memory', m.id)]}: memory {m.id} has other words than this store's memory "
                "of that id",
                hint="nothing was imported; this export does not come from a copy of this store",
            )
    for n, p in zip(parsed.proposal_lines, parsed.proposals, strict=True):
        mine = held.get(p.id)
        if mine is not None and {entity_key(mine.a), entity_key(mine.b)} != {
            entity_key(p.a),
            entity_key(p.b),
        }:
            raise InvalidInput(
                f"line {n}: proposal {p.id} links {p.a!r} and {p.b!r}, but this store holds that proposal for "
                f"{mine.a!r} and {mine.b!r}",
                hint="nothing was imported; this export does not come from a copy of this store",
            )
    memories = [rec for rec in parsed.memories if rec[0].id not in present]
    added_ids = {m.id for m, *_ in memories}
    embedder: Embedder = engine.embedder
    same_model = parsed.model == embedder.name and parsed.dim == embedder.dim
    # A vector outside the range a store keeps (an export made before the range was enforced: all zeros, or
    # numbers past 32-bit floats, written as Infinity) is computed again from the content, as for another model.
    todo = [
        i
        for i, (_m, vec, _a, _e) in enumerate(memories)
        if vec is None or not same_model or not v.keepable_vector(vec)
    ]
    vectors: dict[int, list[float]] = {}
    for start in range(0, len(todo), 256):
        chunk = todo[start : start + 256]
        for i, vec in zip(chunk, embedder.embed([memories[i][0].content for i in chunk]), strict=True):
            vectors[i] = [float(x) for x in vec]
        if progress is not None:
            progress("embedding", min(start + 256, len(todo)), len(todo))
    for i, (_m, vec, _a, _e) in enumerate(memories):
        if i not in vectors:
            assert vec is not None
            vectors[i] = v.vector(vec, embedder.dim)
    scope_ids = {s for s, _ in parsed.scopes} | {s for m, *_ in memories for s in m.scopes}
    now = datetime.now(UTC)
    created = dict(parsed.scopes)
    parents = [(c, p) for c, p in parsed.parents if c not in known_scopes]  # never move a scope the store has
    reconciler.submit(
        lambda tx: graph.restore_scopes(
            tx.conn, [(s, created.get(s, now)) for s in sorted(scope_ids)], parents
        )
    )
    reconciler.submit(lambda tx: graph.restore_entities(tx.conn, parsed.entities))
    # A scope's time zone comes with it, unless the store has that scope already (its own setting stays).
    zones = {s: z for s, z in parsed.zones.items() if s not in known_scopes}
    if zones and not graph.shared:

        def set_zones(tx: Any) -> None:
            for s, z in zones.items():
                graph.set_scope_zone(tx.conn, s, z)

        reconciler.submit(set_zones)
        reload = getattr(engine, "_reload_zones", None)  # storage.engine.conversations, when it is one
        if callable(reload):
            reload()
    if parsed.id_secret and not present:
        # A restore of a whole store into an empty one: messages re-sent to it stay duplicates. A merge into a
        # store with memories keeps its own (its conversations are keyed by it).
        reconciler.submit(lambda tx: graph.set_id_secret(tx.conn, parsed.id_secret))
    for start in range(0, len(memories), IMPORT_BATCH):

        def batch(tx: Any, start: int = start) -> None:
            for i in range(start, min(start + IMPORT_BATCH, len(memories))):
                m, _vec, added, mentions = memories[i]
                graph.restore_memory(tx.conn, m, vectors[i], added, mentions, parsed.given.get(m.id))
                tx.record("add", m.id)

        reconciler.submit(batch)
        if progress is not None:
            progress("writing", min(start + IMPORT_BATCH, len(memories)), len(memories))

    def edges(tx: Any) -> None:
        for new, old, reason, at in parsed.supersedes:
            if new in added_ids or old in added_ids:
                graph.restore_supersedes(tx.conn, new, old, reason, at)
        for a, b, predicate, mid, at, valid_from, valid_to, ended_by, said_a, said_b in parsed.relations:
            if mid in added_ids:
                graph.restore_relation(
                    tx.conn,
                    a,
                    b,
                    predicate,
                    mid,
                    at,
                    valid_from=valid_from,
                    valid_to=valid_to,
                    ended_by=ended_by,
                    subject_name=said_a,
                    object_name=said_b,
                )
        for new, old, predicate, at in parsed.contradictions:
            if new in added_ids or old in added_ids:  # both are in the file, so both are in the store now
                graph.contradict(tx.conn, new, old, predicate, at)
                counts["contradictions"] += 1
        for mid, by, end in parsed.planned_ends:
            if mid in added_ids or by in added_ids:  # both are in the file, so both are in the store now
                graph.keep_planned_end(tx.conn, mid, by, end)
        for mid, row in parsed.enrichments:
            if mid in added_ids:
                graph.record_enrichment(tx.conn, mid, row)
                counts["enrichments"] += 1
        for p in parsed.proposals:
            # With the memory that raised it, like its relations; a proposal the store already has (by id,
            # either direction) keeps the store's own decision.
            if p.memory_id in added_ids and graph.propose_same(tx.conn, p):
                proposals.append(p.id)
                if p.status != "pending":
                    graph.decide_same(tx.conn, p.id, p.status, p.decided_at, p.decided_by)

    proposals: list[str] = []
    counts = {"contradictions": 0, "enrichments": 0}
    reconciler.submit(edges)
    engine._reload_tree()
    engine._reload_lexicon()
    # The imported messages rejoin their conversations (the file's, or for a file written before it said,
    # those their metadata and scopes name), which are digested again like any changed conversation.
    joined = {key: [m for m in members if m in added_ids] for key, members in parsed.conversations}
    joined = {key: members for key, members in joined.items() if members}
    rejoin = getattr(engine, "_rejoin_conversations", None)  # storage.engine.conversations, when it is one
    if callable(rejoin):
        rejoin([m for m, *_ in memories], joined)
    return ImportSummary(
        str(engine.data_dir),
        len(memories),
        len(scope_ids),
        len(parsed.entities),
        sum(1 for r in parsed.relations if r[3] in added_ids),
        len(todo),
        already=len(parsed.memories) - len(memories),
        proposals=len(proposals),
        conversations=len(joined),
        **counts,
    )


# -- snapshot --------------------------------------------------------------------------------------


def snapshot(engine: Source, dest: Path | str) -> SnapshotSummary:
    """Copy the data directory, consistent at one change sequence, into ``dest`` (new or empty)."""
    if engine.graph.shared:
        # The canonical store is not in the data directory (0328284 failed with "No such file or directory:
        # .../graph", reported by the CLI as "Expecting value: line 1 column 1").
        raise InvalidInput(
            "`backup` copies the embedded stores of a data directory; this node's canonical store is a shared "
            "FalkorDB server, and its own indexes are rebuilt from it",
            hint="back up the FalkorDB server's files (its AOF directory, or an RDB from BGSAVE) on the server, "
            "or take `mnemograph export` (not a snapshot while other nodes write; docs/scale-out.md)",
        )
    target = Path(dest).expanduser().resolve()
    if target == engine.data_dir or engine.data_dir in target.parents:
        raise InvalidInput("the backup directory must be outside the data directory")
    require_empty(target, what="backup")
    target.parent.mkdir(parents=True, exist_ok=True)
    # A fresh, uniquely named directory beside the target (so the final rename stays on one file system): a
    # fixed name such as DIR.partial could be a directory of the user's, which a backup must never delete.
    partial = Path(tempfile.mkdtemp(prefix=f".{target.name}.partial-", dir=target.parent))
    result: list[tuple[int, int]] = []

    def copy() -> None:
        # In the projector thread, with the writer paused: both projections have applied every commit.
        engine.graph.checkpoint()
        ignore = shutil.ignore_patterns("*.lock", "*.tmp", ".export-*")
        for name in ("graph", "text", "vectors"):
            shutil.copytree(engine.data_dir / name, partial / name, ignore=ignore)
        for extra in engine.data_dir.iterdir():  # the token file and the audit log travel with the stores
            if extra.is_file() and extra.suffix in (".json", ".jsonl"):
                shutil.copy2(extra, partial / extra.name)
        with engine.graph.read() as conn:  # counted while writes are still paused
            memories = len(engine.graph.all_ids(conn))
        result.append((memories, engine.reconciler.committed_seq))

    try:
        engine.reconciler.on_writer(lambda: engine.reconciler.on_projector(copy))
        if target.exists():
            target.rmdir()
        partial.rename(target)
    except BaseException as exc:
        shutil.rmtree(partial, ignore_errors=True)  # ours alone: created above under a name nobody else had
        if isinstance(exc, OSError):  # the copy failed (a full or read-only backup disk): not the stores
            raise StorageUnavailable(
                f"the backup could not be written to {target}: {_copy_failure(exc)}",
                hint="the stores are unchanged and the partial copy was removed; free space on the backup's "
                "file system or choose another directory, then retry",
            ) from exc
        raise
    memories, seq = result[0]
    return SnapshotSummary(str(target), memories, seq)


def _copy_failure(exc: OSError) -> str:
    """What went wrong, in one line: ``shutil.copytree`` gathers its failures as a list of (src, dst, why)."""
    failures = exc.args[0] if isinstance(exc, shutil.Error) and exc.args else None
    if isinstance(failures, list) and failures and isinstance(failures[0], tuple) and len(failures[0]) == 3:
        return str(failures[0][2])[:300]
    return str(exc)[:300]


def to_json(summary: ExportSummary | ImportSummary | SnapshotSummary) -> dict[str, Any]:
    return asdict(summary)


__all__ = [
    "ExportSummary",
    "ImportSummary",
    "Parsed",
    "SnapshotSummary",
    "export",
    "parse",
    "require_empty",
    "restore",
    "snapshot",
    "to_json",
]
