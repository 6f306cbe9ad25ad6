"""The BM25 projection: a Tantivy index of (id, content, scopes, live, kind). Content is indexed, not stored.

User queries never reach Tantivy's query language: they are reduced to bare lower-cased words first, so
``title:*``, ``' OR 1=1 --`` or ``NOT x`` are just words. Tantivy cannot merge segments on demand from
Python, so a purge rebuilds the index into a fresh directory and swaps it in.
"""

from __future__ import annotations

import logging
import re
import shutil
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import tantivy

from storage._durable import write_durably
from storage.adapters._rwlock import RWLock
from storage.adapters.watermark import Watermark
from storage.domain.errors import StorageUnavailable
from storage.domain.records import ProjectionRow

log = logging.getLogger("mnemograph.text")

_WORD = re.compile(r"\w+", re.UNICODE)
MAX_QUERY_TERMS = 64
_HEAP = 64_000_000


def _schema() -> tantivy.Schema:
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("id", stored=True, tokenizer_name="raw")
    sb.add_text_field("content", stored=False, tokenizer_name="en_stem")
    sb.add_text_field("scopes", stored=False, tokenizer_name="raw")
    sb.add_text_field("live", stored=False, tokenizer_name="raw")
    sb.add_text_field("kind", stored=False, tokenizer_name="raw")
    return sb.build()


# English function words: in a query they match nearly every memory, so in a small store a memory that shares
# only "the", "is" and "in" with the question would count as found by the word lane. Dropped from a query
# that has other words (a query of nothing else keeps them). The index keeps every word.
STOP_WORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "me",
        "more",
        "most",
        "my",
        "myself",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
    ]
)


def query_terms(text: str) -> list[str]:
    """The words of a user query, lower-cased, de-duplicated, at most MAX_QUERY_TERMS, without the
    ``STOP_WORDS`` unless nothing else is left."""
    seen: dict[str, None] = {}
    for w in _WORD.findall(text):
        seen.setdefault(w.lower(), None)
        if len(seen) >= MAX_QUERY_TERMS:
            break
    content = [w for w in seen if w not in STOP_WORDS]
    return content or list(seen)


class TextIndex:
    """The BM25 projection (``storage.ports.projection.TextSearch``) on Tantivy."""

    name = "tantivy"

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self._dir = directory
        self._schema = _schema()
        self._lock = RWLock()
        self.watermark = Watermark(directory / "WATERMARK")
        # Why the index found at open was not trusted, if it was not (a damaged watermark counts too).
        self.damaged: str | None = self.watermark.damaged
        self._lost_writer: tantivy.IndexWriter | None = None  # its rollback failed (``_roll_back``)
        try:
            current = self._current_name()
        except ValueError as exc:
            log.warning("the text index in %s is damaged (%s); it will be rebuilt", directory, exc)
            self.damaged = str(exc)
            (directory / "CURRENT").unlink()
            current = self._current_name()
        for entry in directory.iterdir():
            if entry.is_dir() and entry.name != current and entry.name != "WATERMARK":
                shutil.rmtree(entry)  # left by an interrupted rebuild
        if not (directory / current).is_dir() and self.watermark.value > 0 and self.damaged is None:
            # The watermark says documents were applied, but their index is gone (deleted under us).
            self.damaged = f"its index {current} is missing"
            log.warning("the text index in %s lost its index; it will be rebuilt", directory)
        try:
            self._open(current)
            self._probe()
        except _Damaged as exc:
            # A damaged projection is rebuilt from the canonical store at open (watermark 0 => rebuild/replay).
            log.warning("the text index in %s is damaged (%s); it will be rebuilt", directory, exc)
            self.damaged = str(exc)
            shutil.rmtree(directory / current, ignore_errors=True)
            self.watermark.set(0)
            self._open(current)

    def _probe(self) -> None:
        """Read every segment's stored ids and look up a term: truncated, missing or scrambled files fail here."""
        with _guard():
            self.live_status()
            searcher = self._index.searcher()
            searcher.search(self._index.parse_query("probe", ["content"]), 1)

    def _current_name(self) -> str:
        pointer = self._dir / "CURRENT"
        if not pointer.exists():
            return "index-000001"
        name = pointer.read_text(errors="replace").strip()
        if not re.fullmatch(r"index-\d{6}", name):
            raise ValueError(f"{pointer} does not name an index ({name[:40]!r})")
        return name

    def _open(self, name: str) -> None:
        path = self._dir / name
        path.mkdir(parents=True, exist_ok=True)
        with _guard():
            self._index = tantivy.Index(self._schema, path=str(path), reuse=True)
            self._writer = self._index.writer(heap_size=_HEAP, num_threads=1)
            self._index.reload()

    def close(self) -> None:
        with self._lock.exclusive():
            self._writer.wait_merging_threads()

    # -- writes (projector thread only) ------------------------------------------------------------

    def _doc(self, row: ProjectionRow) -> tantivy.Document:
        return tantivy.Document(
            id=row.id,
            content=row.content,
            scopes=list(row.scopes),
            live="1" if row.live else "0",
            kind=row.kind,
        )

    def apply(
        self, upserts: Sequence[ProjectionRow], deletes: Sequence[str], *, fresh: Sequence[str] = ()
    ) -> None:
        """Make the index reflect the given rows and commit. Idempotent."""
        fresh_set = set(fresh)
        with self._lock.shared():
            try:
                for mid in [r.id for r in upserts if r.id not in fresh_set] + list(deletes):
                    self._writer.delete_documents_by_term("id", mid)
                for row in upserts:
                    self._writer.add_document(self._doc(row))
                self._writer.commit()
            except BaseException:
                self._roll_back()
                raise
            self._index.reload()

    def _roll_back(self) -> None:
        """After a failed apply: drop what it left pending. A commit that failed (a full disk) leaves Tantivy's
        writer without its indexing thread: every document added after it was dropped without an error and the
        next commit "succeeded" without them (the retry's memories were never found by their words). A
        rollback gives the writer its threads back; the retry adds the batch again. A rollback that failed (its
        directory was deleted) leaves the writer without its lock, and the next one would panic: that writer is
        not rolled back again (``reindex`` replaces it)."""
        writer = self._writer
        if writer is self._lost_writer:
            return
        try:
            with _guard():
                writer.rollback()
        except _Damaged as exc:
            self._lost_writer = writer
            log.warning("could not roll back the text index's writer after a failed apply: %s", exc)

    @property
    def appends_since_maintain(self) -> int:
        """Tantivy merges its own segments as it commits: never anything to maintain."""
        return 0

    def maintain(self) -> None:
        """Nothing to do (see ``appends_since_maintain``)."""

    def replace_all(self, rows: Sequence[ProjectionRow]) -> None:
        """The port's name for ``rebuild``."""
        self.rebuild(rows)

    def rebuild(self, rows: Iterable[ProjectionRow]) -> None:
        """Write every row into a new index directory, then switch to it and delete the old one."""
        staged = self.build(rows)
        staged.switch()
        staged.drop_old()

    def build(self, rows: Iterable[ProjectionRow]) -> StagedIndex:
        """Write every row into a new index directory beside the live one (searches and ``apply`` go on);
        ``switch`` on the result makes it the live index."""
        old = self._current_name()
        new = f"index-{int(old.split('-')[1]) + 1:06d}"
        path = self._dir / new
        if path.exists():
            shutil.rmtree(path)
        path.mkdir(parents=True)  # the whole directory may have been deleted under us
        fresh = tantivy.Index(self._schema, path=str(path))
        writer = fresh.writer(heap_size=_HEAP, num_threads=1)
        for row in rows:
            writer.add_document(self._doc(row))
        writer.commit()
        return StagedIndex(self, new, fresh, writer)

    # -- reads -------------------------------------------------------------------------------------

    def search(
        self, text: str, *, scopes: Sequence[str], k: int, live_only: bool, kinds: Sequence[str] | None
    ) -> list[tuple[str, float]]:
        """Ids with BM25 scores, best first, among memories in any of ``scopes``."""
        terms = query_terms(text)
        if not terms or not scopes:
            return []
        with self._lock.shared(), _unavailable():
            parsed = self._index.parse_query(" ".join(terms), ["content"])
            clauses = [
                (tantivy.Occur.Must, parsed),
                (
                    tantivy.Occur.Must,
                    self._filter(tantivy.Query.term_set_query(self._schema, "scopes", list(scopes))),
                ),
            ]
            if live_only:
                clauses.append(
                    (tantivy.Occur.Must, self._filter(tantivy.Query.term_query(self._schema, "live", "1")))
                )
            if kinds:
                clauses.append(
                    (
                        tantivy.Occur.Must,
                        self._filter(tantivy.Query.term_set_query(self._schema, "kind", list(kinds))),
                    )
                )
            searcher = self._index.searcher()
            result = searcher.search(tantivy.Query.boolean_query(clauses), k)
            return [(searcher.doc(addr)["id"][0], float(score)) for score, addr in result.hits]

    @staticmethod
    def _filter(query: tantivy.Query) -> tantivy.Query:
        return tantivy.Query.const_score_query(query, 0.0)

    def live_status(self) -> dict[str, bool]:
        return {mid: live for mid, live in self._documents()}

    def duplicates(self) -> list[str]:
        counts = Counter(mid for mid, _live in self._documents())
        return sorted(i for i, n in counts.items() if n > 1)

    def _documents(self) -> list[tuple[str, bool]]:
        """Every document's id and whether it is live (an id twice if it is there twice)."""
        with self._lock.shared(), _unavailable():
            searcher = self._index.searcher()
            out: list[tuple[str, bool]] = []
            for live in ("1", "0"):
                q = tantivy.Query.term_query(self._schema, "live", live)
                for _score, addr in searcher.search(q, max(1, searcher.num_docs)).hits:
                    out.append((searcher.doc(addr)["id"][0], live == "1"))
            return out

    def count(self) -> int:
        with self._lock.shared():
            return int(self._index.searcher().num_docs)


class StagedIndex:
    """An index built beside the live one (``TextIndex.build``): catch up with ``apply``, then ``switch``."""

    def __init__(
        self, owner: TextIndex, name: str, index: tantivy.Index, writer: tantivy.IndexWriter
    ) -> None:
        self._owner, self._name, self._index, self._writer = owner, name, index, writer
        self._old: str | None = None  # what ``switch`` replaced, for ``drop_old``
        self._old_writer: tantivy.IndexWriter | None = None

    def apply(self, upserts: Sequence[ProjectionRow], deletes: Sequence[str]) -> None:
        for mid in [r.id for r in upserts] + list(deletes):
            self._writer.delete_documents_by_term("id", mid)
        for row in upserts:
            self._writer.add_document(self._owner._doc(row))
        self._writer.commit()

    def switch(self) -> None:
        """Make this index the live one (``CURRENT``), waiting only for the searches under way."""
        owner = self._owner
        with owner._lock.exclusive():
            self._old = owner._current_name()
            self._old_writer = owner._writer
            write_durably(owner._dir / "CURRENT", self._name)
            owner._index, owner._writer = self._index, self._writer
            owner._index.reload()

    def drop_old(self) -> None:
        """Let the replaced index's writer finish its merges (nothing else uses it since the switch), then delete
        its directory."""
        if self._old_writer is not None:
            try:
                with _guard():
                    self._old_writer.wait_merging_threads()
            except _Damaged as exc:
                log.warning("the replaced text index was damaged: %s", exc)
            self._old_writer = None
        if self._old:
            shutil.rmtree(self._owner._dir / self._old, ignore_errors=True)

    def discard(self) -> None:
        """Drop the new directory (a rewrite that failed); the live index is untouched."""
        if self._name != self._owner._current_name():
            self._writer.rollback()
            shutil.rmtree(self._owner._dir / self._name, ignore_errors=True)


class _Damaged(Exception):
    """Tantivy could not read its files."""


@contextmanager
def _guard() -> Iterator[None]:
    # tantivy raises ValueError for I/O and format errors, and pyo3's PanicException (a BaseException) when a
    # damaged file makes it panic; both mean the same thing here.
    try:
        yield
    except (KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except BaseException as exc:
        raise _Damaged(f"{type(exc).__name__}: {str(exc)[:200]}") from exc


@contextmanager
def _unavailable() -> Iterator[None]:
    try:
        with _guard():
            yield
    except _Damaged as exc:
        raise StorageUnavailable(
            f"the full-text index cannot be read ({exc})",
            hint="run `mnemograph reindex` (or restart Mnemograph) to rebuild it from the canonical store",
        ) from None
