"""The canonical store's port: memories, scopes, entities, version edges and the change log, in one store.

Every query or write takes the ``Session`` that ``read()``, ``snapshot()`` or ``transaction()`` handed out.
A session is opaque outside its adapter: the embedded Kùzu adapter's is a connection, a server adapter's (an
openCypher database reached over the network) would be its client and the statements of one transaction.
No port signature names a store library's type, so a second adapter implements exactly these protocols and
passes tests/storage/contract.

The port is split by concern (lifecycle, reads, writes, exports) like graphiti's driver operations; the
engine, the reconciler and recall depend on ``CanonicalStore``, the union.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Executor
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, NamedTuple, Protocol, TypeVar

from storage.domain.models import EntityIn, Memory
from storage.domain.records import (
    Change,
    KnownEntity,
    NewMemory,
    NewRow,
    OpenRelation,
    ProjectionRow,
    Relation,
    RelationState,
    SameAs,
)


class FileSpace(NamedTuple):
    """What a canonical store's files take in the data directory (``CanonicalStore.file_space``), in bytes."""

    total: int  # every file of the store, its log included
    free: int  # pages that hold nothing: reused by later writes, given back only by ``rebuild``
    log: int  # the write-ahead log: commits a checkpoint has yet to fold into the database file


class Session(Protocol):
    """One open read or write transaction of the canonical store; only the adapter that opened it looks inside."""


class CanonicalLifecycle(Protocol):
    """Opening transactions, the file rewrite that makes erasure physical, health."""

    def close(self) -> None: ...

    @property
    def failed(self) -> str | None:
        """Why the database can no longer be trusted in memory (a commit failed to reach disk), else None."""
        ...

    def read(self) -> AbstractContextManager[Session]:
        """A read connection for the calling thread, valid for the duration of the block."""
        ...

    def transaction(self) -> AbstractContextManager[Session]:
        """The write connection inside one transaction; committed on success, rolled back on error."""
        ...

    def rebuild(self, paused: Callable[[Callable[[], None]], None] = ...) -> None:
        """Rewrite the store so that nothing deleted from it is left in its files, and swap the result in.

        ``paused(fn)`` runs ``fn`` while no transaction is open or starts (the reconciler's ``on_writer``); an
        adapter uses it for the short steps that must not interleave with commits (taking a snapshot,
        switching files) and does the long work beside live traffic. Without it, the caller has already
        stopped every write and the steps run at once. An adapter that can do no better may simply run its
        whole rewrite inside one ``paused`` call.
        """
        ...

    def checkpoint(self) -> None:
        """Fold the WAL into the database file (the files then hold every commit on their own)."""
        ...

    def file_space(self) -> FileSpace:
        """The bytes of the store's files in the data directory, how many of them hold nothing (free pages that
        only ``rebuild`` gives back to the file system), and how many are its log of commits not yet checkpointed.
        All 0 for a store kept elsewhere."""
        ...

    def snapshot(self) -> AbstractContextManager[Session]:
        """A read connection inside one read-only transaction: every query in the block sees the same state, while writes go on."""
        ...


T = TypeVar("T")
# One exported RELATES edge: subject id, object id, predicate, memory id, recorded at, valid from, valid to,
# ended by, and the subject's and object's names as the recording memory spelt them (``export_relations``).
RelationRow = tuple[
    str, str, str, str, datetime | None, datetime | None, datetime | None, str | None, str | None, str | None
]
# What one memory gave an entity it mentions (its MENTIONS edge): the name, type and aliases it wrote.
MentionGiven = tuple[str, str, list[str]]
# A CONTRADICTS edge: the memory that raised the conflict, the one it conflicts with, the predicate, when.
ContradictionRow = tuple[str, str, str, datetime | None]
# A model pass's record: the memory id, and status, detail, model, token counts and ``at`` (when it ran).
EnrichmentRow = tuple[str, dict[str, Any]]
ItemT = TypeVar("ItemT")


class CanonicalReads(Protocol):
    """Reads inside ``read()``, ``snapshot()`` or ``transaction()``: records, scopes, entities, the change log."""

    def read_each(
        self,
        conn: Session,
        read: Callable[[Session, ItemT], T],
        items: Sequence[ItemT],
        executor: Executor | None = None,
    ) -> list[T]:
        """``[read(session, item) for item in items]``, in order; with an ``executor`` and a read session, items
        may be read at the same time on other sessions that see the same state, under the caller's read lock.
        For independent queries a caller needs together (the graph lane's mentions and relations)."""
        ...

    def max_seq(self, conn: Session) -> int: ...

    def oldest_change(self, conn: Session) -> int | None: ...

    def changes_since(self, conn: Session, seq: int, *, limit: int = 1000000) -> list[Change]: ...

    def prune_changes(self, conn: Session, upto: int) -> None: ...

    def fetch(self, conn: Session, ids: Iterable[str], executor: Executor | None = None) -> dict[str, Memory]:
        """Full records for the given ids (missing ids are absent from the result)."""
        ...

    def has_metadata_key(self, conn: Session, key: str) -> bool:
        """Whether any memory's metadata has ``key`` (a scan, stopped at the first match; may say yes for a value that merely contains the key's JSON text)."""
        ...

    def ids_with_prefix(self, conn: Session, prefix: str, limit: int = 2) -> list[str]: ...

    def chain(self, conn: Session, memory_id: str) -> list[str]:
        """Ids of every version connected to memory_id by SUPERSEDES, oldest first."""
        ...

    def scope_parents(self, conn: Session) -> tuple[list[str], dict[str, str]]: ...

    def scope_counts(self, conn: Session) -> dict[str, int]: ...

    def list_scope(
        self, conn: Session, scope: str, *, after: tuple[datetime, str] | None, live_only: bool, limit: int
    ) -> list[str]: ...

    def known_entities(self, conn: Session) -> list[KnownEntity]:
        """Every entity with how many memories mention it and how many relations touch it."""
        ...

    def mentioning(
        self,
        conn: Session,
        entity: str,
        *,
        scopes: Sequence[str],
        live_only: bool,
        limit: int,
        valid_at: datetime | None = None,
    ) -> list[str]:
        """Ids of memories in any of ``scopes`` that mention the entity (by id), most recently recorded first,
        at most ``limit`` (the canonical filter in recall still decides what is returned). With ``valid_at``
        (and ``live_only``), only memories valid at that instant: exactly those a current-view query may see.
        Its cost must grow with the entity's mentions, not with the store."""
        ...

    def same_as(
        self,
        conn: Session,
        ids: Sequence[str] | None = None,
        *,
        status: str | None = None,
        after: tuple[datetime, str] | None = None,
        limit: int | None = None,
    ) -> list[SameAs]:
        """``SAME_AS`` proposals (every one, or those with the given ids), oldest first (by ``created_at``, then
        id); ``a`` and ``b`` are the entities' current names. ``status`` keeps one status; ``after`` (a
        ``(created_at, id)`` position) starts after that proposal; ``limit`` returns at most that many: the
        listing pages through them without reading them all."""
        ...

    def pending_same_count(self, conn: Session, scope: str) -> int:
        """How many pending ``SAME_AS`` proposals apply to ``scope`` (have it among their ``scopes``)."""
        ...

    def aliases_given(self, conn: Session, entity: str, *, scopes: Sequence[str]) -> set[str]:
        """The aliases that memories in any of ``scopes`` gave the entity (by id), as each memory's MENTIONS
        edge records them: an alias learnt only from other scopes must not resolve for a reader of these."""
        ...

    def names_given(self, conn: Session, entity: str, *, scopes: Sequence[str]) -> set[str]:
        """The names (spellings) that memories in any of ``scopes`` gave the entity (by id), as each memory's
        MENTIONS edge records them: a spelling learnt only from other scopes must not be shown to their reader."""
        ...

    def visible_among(
        self, conn: Session, entity: str, ids: Sequence[str], *, scopes: Sequence[str], now: datetime
    ) -> set[str]:
        """Which of ``ids`` (memories that recorded relations of ``entity``, so mention it) a current-view query
        over ``scopes`` may see at ``now`` (a shared scope; neither retired nor superseded; valid at ``now``).
        The cost must follow ``len(ids)``, not the entity's mentions: it is asked for entities mentioned too
        often to read all their mentions."""
        ...

    def relations(
        self, conn: Session, entity: str, *, limit: int, scopes: Sequence[str] | None = None
    ) -> list[Relation]:
        """RELATES edges touching the entity (by id) in either direction, newest first, at most ``limit`` in
        all. Each names the memory that recorded it, whose visibility decides the edge's, and both its ends as
        that memory spelt them (kept on the edge: never another scope's spelling, and no lookup per edge). With ``scopes``, only
        edges whose memory is in one of them, chosen before the ``limit`` cut: the window holds only edges the
        reader may see, so what other scopes record never pushes the reader's own out of it (docs/security.md).
        Each edge carries its memory's scope list, kept in step with the memory's in the same transaction."""
        ...

    def projection_rows(self, conn: Session, ids: Iterable[str] | None = None) -> dict[str, ProjectionRow]:
        """What the projections need of the given memories (of every memory when ``ids`` is None)."""
        ...

    def all_ids(self, conn: Session) -> dict[str, bool]:
        """Every memory id, mapped to whether it is live (neither retired nor superseded)."""
        ...

    def stale_copies(self, conn: Session) -> list[str]:
        """Ids of memories (sorted) some copy of whose fields, kept elsewhere by the adapter for its reads (Kùzu:
        on each MENTIONS edge), disagrees with the memory; empty when the adapter keeps no copies. ``verify``
        reports them."""
        ...

    def memory_count(self, conn: Session) -> int:
        """How many memories the store holds (current or not): what each projection must hold, row for row."""
        ...

    def vector_of(self, conn: Session, memory_id: str) -> list[float] | None: ...

    def present(self, conn: Session, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` are memories of the store (current or not)."""
        ...

    def current_texts(
        self, conn: Session, ids: Sequence[str], now: datetime
    ) -> dict[str, tuple[str, str, list[float]]]:
        """Of ``ids``, the memories live (neither retired nor superseded) and still valid at ``now``: each to
        its content, kind and vector. One light query (near-duplicates on the write path)."""
        ...

    def live_state(self, conn: Session, memory_id: str) -> bool | None:
        """None when no memory has this id; else whether it is live (neither retired nor superseded)."""
        ...

    def scopes_of(self, conn: Session, memory_id: str) -> list[str]: ...

    def memories_of_scope(self, conn: Session, scope: str) -> tuple[list[str], list[str]]:
        """(ids only in this scope, ids also in another scope)."""
        ...


class CanonicalWrites(Protocol):
    """Writes, each inside ``transaction()`` (the reconciler's thread only)."""

    def ensure_scopes(self, conn: Session, scopes: Sequence[str], at: datetime) -> None: ...

    def set_parent(self, conn: Session, scope: str, parent: str | None) -> None: ...

    def insert_memory(
        self, conn: Session, m: NewMemory, scopes: Sequence[str], entities: Sequence[EntityIn]
    ) -> None: ...

    def insert_many(self, conn: Session, rows: Sequence[NewRow], at: datetime) -> None:
        """Insert new memories (no id among them exists yet, none repeats) in a few statements: the same rows
        as ``ensure_scopes``, ``insert_memory``, ``link`` and ``mention`` for each in order (a bulk write)."""
        ...

    def link(self, conn: Session, memory_id: str, scopes: Sequence[str], at: datetime) -> None:
        """Add ``memory_id`` to ``scopes``, which must not contain it yet (MERGE on an edge would scan every CONTAINS edge in the store; callers pass only the missing scopes)."""
        ...

    def mention(self, conn: Session, memory_id: str, entities: Sequence[EntityIn]) -> None: ...

    def relate(
        self,
        conn: Session,
        memory_id: str,
        subject: str,
        predicate: str,
        obj: str,
        at: datetime,
        valid_from: datetime | None = None,
    ) -> None:
        """Record ``subject —predicate→ obj`` for the memory (its ends are entities it mentions, by name; the
        edge keeps these spellings, which are what readers of the edge are shown)."""
        ...

    def open_relations(
        self,
        conn: Session,
        subject: str,
        predicates: Sequence[str],
        obj: str | None = None,
        *,
        newest: int | None = None,
        other_than: str | None = None,
        scopes: Sequence[str] | None = None,
        at: datetime | None = None,
    ) -> list[OpenRelation]:
        """RELATES edges from ``subject`` with one of ``predicates`` whose validity is open, recorded by a current memory (with that memory's scopes), oldest first. With ``at``, also those whose validity ends after ``at`` (closed at a later date by a planned change: still open then). ``valid_from`` is None unless a time was stated for the relation. ``newest`` keeps only the most recently recorded edges per predicate, cut before their memories are looked up, so the cost stays flat however often the same statement was made. ``other_than`` leaves out edges to that object. ``scopes`` keeps only edges whose memory shares one of them, filtered before the cut (another scope's statements never crowd them out)."""
        ...

    def close_relation(
        self,
        conn: Session,
        memory_id: str,
        subject: str,
        predicate: str,
        obj: str,
        *,
        valid_to: datetime,
        ended_by: str,
    ) -> None:
        """End the relation ``memory_id`` recorded at ``valid_to`` (never before its own start), by ``ended_by``;
        one already ended stays so unless it ended later than ``valid_to`` (a planned change's end, overtaken
        by news that it ended sooner)."""
        ...

    def contradict(self, conn: Session, new: str, old: str, predicate: str, at: datetime) -> None: ...

    def propose_same(self, conn: Session, proposal: SameAs) -> bool:
        """Record a pending ``SAME_AS`` edge from entity ``a`` to ``b`` (by name; ids are ``entity_key``), unless
        either is gone or an edge with the same id links them in either direction, whatever its status (a
        rejected proposal is not raised again; the id names the pair and the scopes). True when recorded."""
        ...

    def proposable(self, conn: Session, proposals: Sequence[SameAs]) -> list[bool]:
        """For each, whether ``propose_same`` would record it now (a bulk write asks once for many)."""
        ...

    def propose_many(self, conn: Session, proposals: Sequence[SameAs]) -> None:
        """Record each (every one proposable, no id twice), as ``propose_same`` does."""
        ...

    def decide_same(self, conn: Session, proposal_id: str, status: str, at: datetime | None, by: str) -> None:
        """Set a proposal's status (``pending``, ``accepted``, ``rejected``), when and by whom."""
        ...

    def contradictions(self, conn: Session, memory_id: str) -> list[str]:
        """Ids of memories linked to this one by CONTRADICTS, in either direction."""
        ...

    def contradictions_of(self, conn: Session, memory_ids: Sequence[str]) -> dict[str, list[str]]:
        """``contradictions`` of several memories in one query: each id that has any, to them (sorted)."""
        ...

    def record_enrichment(self, conn: Session, memory_id: str, row: Mapping[str, Any]) -> None:
        """Keep how the LLM enrichment of a memory went (status, detail, model, token counts)."""
        ...

    def enrichment_of(self, conn: Session, memory_id: str) -> dict[str, Any] | None: ...

    def relation_history(self, conn: Session, memory_ids: Sequence[str]) -> list[RelationState]:
        """Every relation the given memories recorded, with its validity, its ends named as each memory spelt
        them. Reached through the entities each memory mentions (a relation's ends always are), so the cost does not grow with the store."""
        ...

    def supersede(
        self, conn: Session, old: str, new: str, *, reason: str, at: datetime, close_valid_to: datetime
    ) -> None:
        """Link ``new`` SUPERSEDES ``old`` and end ``old``'s validity at ``close_valid_to`` (an earlier end
        stays), never before its ``valid_from``: a validity is never inverted. ``close_relation`` and
        ``retire`` keep the same rule."""
        ...

    def retire(
        self, conn: Session, memory_id: str, *, at: datetime, valid_to: datetime, reason: str
    ) -> None: ...

    def reopen_ended_by(self, conn: Session, ended_by: str, *, at: datetime) -> list[str]:
        """Undo what a planned change did (``ended_by``, the plan, is cancelled before ``at``, its start): the
        relations it ended at ``at`` are open again, and each memory that recorded one, still current, with its
        validity ending at ``at``, is valid again with no end. Returns the ids of the memories whose relations
        were reopened. Reached through the entities the plan mentions (a relation it ended has its subject)."""
        ...

    def end_validity(
        self, conn: Session, memory_id: str, *, valid_to: datetime, by: str | None = None
    ) -> None:
        """End a memory's validity at ``valid_to`` and change nothing else: it stays current (neither superseded
        nor retired) until then. A planned change does this to the value it replaces (a successor valid from a
        later date); an earlier end stays, and the end is never before ``valid_from``, as in ``supersede``.
        With ``by`` (the plan that ends it), the end is also kept apart (``planned_ends``): it outlives the
        end itself, which the plan's cancellation or move undoes."""
        ...

    def planned_ends(self, conn: Session, memory_ids: Sequence[str]) -> dict[str, list[tuple[str, datetime]]]:
        """Every end a plan gave each of ``memory_ids`` (``end_validity(by=...)``), as (plan id, end), the
        earliest per plan, including ends undone since: what was believed while the plan stood (``known_at``,
        with when the plan was recorded and withdrawn). Memories with none are absent. Deleting a memory
        (``delete_memories``) deletes the ends it gave and was given."""
        ...

    def append_changes(self, conn: Session, changes: Sequence[Change], at: datetime) -> None: ...

    def unlink(self, conn: Session, memory_id: str, scope: str) -> None:
        """Remove ``memory_id`` from ``scope``: the CONTAINS edge and the entry in its scope list."""
        ...

    def recopy(self, conn: Session) -> None:
        """Copy every memory's fields that the adapter keeps copies of (``stale_copies``) again from the memory:
        the repair ``reindex`` runs. A no-op for an adapter that keeps none."""
        ...

    def unlink_all(self, conn: Session, scope: str, shared: Sequence[str]) -> None:
        """Remove ``scope`` from the scope lists of memories that stay in other scopes."""
        ...

    def delete_scope(self, conn: Session, scope: str, only: Sequence[str]) -> int:
        """Erase a scope: its exclusive memories, its edges, its node; children move to its parent."""
        ...

    def delete_memories(self, conn: Session, ids: Sequence[str]) -> int:
        """Delete memories with their edges, the relations they recorded, version pointers to them, and the entities no remaining memory mentions; an entity that stays keeps only the name, type and aliases its remaining mentions gave it. Returns how many entities were deleted."""
        ...


class CanonicalExports(Protocol):
    """Export and restore of whole stores (``storage.engine.backup``)."""

    def export_scopes(self, conn: Session) -> list[tuple[str, datetime | None]]: ...

    def export_memories(self, conn: Session) -> Iterator[dict[str, Any]]:
        """Every memory with all its fields, its vector, its scopes (with when each was added) and the ids of the entities it mentions, in id order."""
        ...

    def export_entities(self, conn: Session) -> list[tuple[str, str, str, list[str]]]: ...

    def export_supersedes(self, conn: Session) -> list[tuple[str, str, str, datetime | None]]: ...

    def export_relations(self, conn: Session) -> list[RelationRow]:
        """Every RELATES edge: subject id, object id, predicate, memory id, recorded at, its validity (valid
        from, valid to, the memory that ended it), each None when not set, and the names the recording memory
        gave its subject and object."""
        ...

    def export_contradictions(self, conn: Session) -> list[ContradictionRow]:
        """Every CONTRADICTS edge (restored with ``contradict``)."""
        ...

    def export_planned_ends(self, conn: Session) -> list[tuple[str, str, datetime]]:
        """Every end a plan gave a memory (``planned_ends``) as (memory id, plan id, end), restored with
        ``keep_planned_end``."""
        ...

    def keep_planned_end(self, conn: Session, memory_id: str, by: str, valid_to: datetime) -> None:
        """Keep apart that plan ``by`` ends ``memory_id`` at ``valid_to`` (the earliest such end stays), and
        change nothing else: what ``end_validity(by=...)`` adds to the end itself, and what an import restores."""
        ...

    def export_enrichments(self, conn: Session) -> list[EnrichmentRow]:
        """The record of every model pass, by memory id (restored with ``record_enrichment``)."""
        ...

    def restore_scopes(
        self, conn: Session, scopes: Sequence[tuple[str, datetime]], parents: Sequence[tuple[str, str]]
    ) -> None: ...

    def restore_entities(
        self, conn: Session, entities: Sequence[tuple[str, str, str, list[str]]]
    ) -> None: ...

    def restore_memory(
        self,
        conn: Session,
        m: Memory,
        vector: Sequence[float],
        added: Mapping[str, datetime],
        mentions: Sequence[str],
        given: Mapping[str, MentionGiven] | None = None,
    ) -> None:
        """Create a memory exactly as exported: same id, times, status and version pointers. ``given``: what
        it gave each entity it mentions (name, type, aliases: an erasure takes back exactly that); an entity
        it does not name (an export written before they were kept) is taken as the entity now is."""
        ...

    def restore_supersedes(self, conn: Session, new: str, old: str, reason: str, at: datetime) -> None: ...

    def restore_relation(
        self,
        conn: Session,
        subject: str,
        obj: str,
        predicate: str,
        memory_id: str,
        at: datetime,
        *,
        valid_from: datetime | None = None,
        valid_to: datetime | None = None,
        ended_by: str | None = None,
        subject_name: str | None = None,
        object_name: str | None = None,
    ) -> None:
        """Create a RELATES edge exactly as exported, validity and the ends' names included. A name the export
        does not give (one written before they were kept) is the one the memory's mention of that end gave."""
        ...


class CanonicalConversations(Protocol):
    """Conversations handed over message by message, and the digest the consolidator keeps for each.

    A conversation is a node keyed by an opaque key (a hash: the caller's conversation id is kept only in its
    messages' metadata, so it is erased with them). ``changed_at`` later than ``digested_at`` means its digest
    is due: the consolidator's queue is this, read from the store, so no queued work is lost in a crash."""

    def id_secret(self, conn: Session) -> str:
        """The store's secret for conversation keys ("" for none: a store that holds no conversations, or one
        made before secrets, whose conversations keep their unsalted keys). Made when the store is opened."""
        ...

    def set_id_secret(self, conn: Session, secret: str) -> None:
        """Replace the secret (a restore adopts its export's, so re-sent messages stay duplicates)."""
        ...

    def join_conversation(self, conn: Session, key: str, memory_ids: Sequence[str], at: datetime) -> None:
        """Add the messages to the conversation (created if new; a message already in it stays once) and mark
        it changed at ``at``."""
        ...

    def conversation_members(self, conn: Session, key: str) -> list[str]:
        """Ids of the conversation's messages (any order)."""
        ...

    def conversation_keys_ending(self, conn: Session, suffix: str) -> list[str]:
        """Keys of the conversations (with or without messages) whose key ends with ``suffix``: reads the
        conversations, not their members (a purge finds its scope's days without reading every membership)."""
        ...

    def conversations_of(self, conn: Session, memory_ids: Sequence[str]) -> dict[str, str | None]:
        """The conversations the given memories belong to, or whose digest they are: key -> digest id."""
        ...

    def pending_conversations(self, conn: Session) -> list[tuple[str, datetime]]:
        """Conversations changed since their last digest (or never digested): (key, changed_at), oldest first."""
        ...

    def conversation_state(self, conn: Session, key: str) -> tuple[datetime | None, str | None] | None:
        """(changed_at, digest id) of a conversation; None when there is no such conversation."""
        ...

    def set_digest(self, conn: Session, key: str, digest_id: str | None, at: datetime) -> None:
        """Record the conversation's digest (None: it has none) as of ``at``."""
        ...

    def touch_conversations(self, conn: Session, keys: Sequence[str], at: datetime) -> None:
        """Mark conversations changed (their digest is rebuilt); one with no message left is deleted."""
        ...

    def all_digests(self, conn: Session) -> dict[str, str]:
        """Every digest id -> its conversation key."""
        ...

    def export_conversations(self, conn: Session) -> list[tuple[str, list[str]]]:
        """Every conversation's key and the ids of its messages (sorted), by key: what a backup carries."""
        ...

    def drop_conversations(self, conn: Session, keys: Sequence[str]) -> None:
        """Delete these groups (their memberships; not their memories, nor their digests: drop those first)."""
        ...

    def scope_zones(self, conn: Session) -> dict[str, str]:
        """Scope -> the IANA time zone its days and weeks are counted in, for the scopes that set one."""
        ...

    def set_scope_zone(self, conn: Session, scope: str, zone: str | None) -> None:
        """Set (None: forget, so UTC) the time zone of ``scope``."""
        ...


class CanonicalStore(
    CanonicalLifecycle, CanonicalReads, CanonicalWrites, CanonicalExports, CanonicalConversations, Protocol
):
    """The whole canonical store: what the engine, the reconciler and recall are given."""

    @property
    def name(self) -> str:
        """The store's name in reports (``verify`` counts, erasure receipts): ``kuzu`` for the embedded one."""
        ...

    @property
    def shared(self) -> bool:
        """Whether other processes write to this store too (a server shared by several nodes). Then
        ``append_changes`` numbers the changes itself, from the store's own counter, ignoring the ``seq`` it is
        given; ``max_seq`` is the head of the log across every node; and the log is never pruned by one node.
        A transaction of a shared store may not see its own earlier writes from its reads: the intents of such
        a store are committed one per transaction."""
        ...

    @property
    def identity(self) -> str:
        """Which store this is, stable across restarts and different for another store (another graph, or a
        graph made anew under the same address): a data directory records the identity its projections mirror,
        and rebuilds them when it opens on another (docs/scale-out.md, "Restarts and moves"). ``kuzu`` for
        the embedded store, which lives in the data directory itself."""
        ...
