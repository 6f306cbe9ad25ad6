"""The composition root: the one module that chooses and wires the store adapters.

``Engine`` is the engine's use cases (``storage.engine.EngineCore``) opened on a data directory: Kùzu as the
canonical store, LanceDB and Tantivy as projections, MiniLM as the default embedder. Nothing else in
``storage`` imports an adapter (``lint-imports`` holds this), so another canonical store is one more branch
here, behind configuration, and passes tests/storage/contract.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shlex
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO

from storage.adapters.embedder import CachedEmbedder, MiniLMEmbedder
from storage.adapters.kuzu import GraphStore
from storage.adapters.lance_vectors import VectorIndex
from storage.adapters.tantivy_text import TextIndex
from storage.domain.errors import InvalidInput, Locked, ProjectionDamaged, StorageUnavailable
from storage.engine import backup as snapshots
from storage.engine.core import EngineCore
from storage.engine.private_files import make_private
from storage.ports.canonical import CanonicalStore
from storage.ports.embedder import Embedder
from storage.ports.stores import Stores

CANONICAL_ENV = "MNEMOGRAPH_CANONICAL"
log = logging.getLogger("mnemograph.engine")


def open_canonical(
    data_dir: Path,
    embedder: Embedder,
    canonical: str | None = None,
    *,
    progress: Callable[[str], None] | None = None,
) -> CanonicalStore:
    """The canonical store ``canonical`` names (else ``$MNEMOGRAPH_CANONICAL``): embedded Kùzu in
    ``data_dir/graph`` when empty or ``kuzu``; a graph on a FalkorDB server for ``falkordb://host:port/graph``,
    shared with every other node configured the same way (docs/scale-out.md)."""
    choice = (os.environ.get(CANONICAL_ENV, "") if canonical is None else canonical).strip()
    if choice in ("", "kuzu"):
        return GraphStore(
            data_dir / "graph", dim=embedder.dim, embedder_name=embedder.name, progress=progress
        )
    if choice.startswith("falkordb://"):
        from storage.adapters.falkordb import FalkorStore  # the client library only in this mode

        return FalkorStore(choice, dim=embedder.dim, embedder_name=embedder.name)
    raise InvalidInput(
        f"unknown canonical store {choice!r}",
        hint="use kuzu (the default) or falkordb://host:port/graph (--canonical or MNEMOGRAPH_CANONICAL)",
    )


PROJECTION_DIRS = ("vectors", "text")


def open_stores(
    data_dir: Path,
    embedder: Embedder,
    *,
    ann_threshold: int = 50_000,
    canonical: str | None = None,
    progress: Callable[[str], None] | None = None,
    fresh_projections: bool = False,
) -> Stores:
    """One data directory's stores: the canonical store (``open_canonical``: ``graph/`` with Kùzu by default),
    and the projections ``vectors/`` (LanceDB) and ``text/`` (Tantivy), which are always the node's own.
    ``fresh_projections``: delete the projections' files first (``mnemograph reindex`` without a running server:
    they are then built anew from the canonical store, whatever state they were in)."""
    graph = open_canonical(data_dir, embedder, canonical, progress=progress)

    def projections() -> tuple[VectorIndex, TextIndex]:
        vectors = VectorIndex(data_dir / "vectors", dim=embedder.dim, ann_threshold=ann_threshold)
        return vectors, TextIndex(data_dir / "text")

    try:
        if fresh_projections:
            _delete_projections(data_dir)
        try:
            vectors, text = projections()
        except (OSError, ValueError, RuntimeError) as exc:
            # The adapters set aside what they cannot read and start empty; this is what they could not (their
            # path taken by a file, say). They are only copies: deleted, and built anew by the engine's start.
            log.warning(
                "the search indexes in %s cannot be opened (%s: %s); deleting them to rebuild them from the "
                "canonical store",
                data_dir,
                type(exc).__name__,
                exc,
            )
            try:
                _delete_projections(data_dir)
                vectors, text = projections()
            except (OSError, ValueError, RuntimeError) as again:
                raise ProjectionDamaged(
                    f"the search indexes in {data_dir} cannot be opened nor made anew "
                    f"({type(again).__name__}: {str(again)[:200]})",
                    hint="make the data directory writable (or make room on its disk), then run "
                    f"`mnemograph reindex --data-dir {shlex.quote(str(data_dir))}` (after `mnemograph stop` if "
                    "a server runs): it rebuilds them from the canonical store, which holds every memory",
                ) from again
        return Stores(canonical=graph, vectors=vectors, text=text)
    except BaseException:
        graph.close()
        raise


def _delete_projections(data_dir: Path) -> None:
    """Delete the projections' files (whatever is at their paths): they are rebuilt from the canonical store."""
    for name in PROJECTION_DIRS:
        path = data_dir / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()


class Engine(EngineCore):
    """One data directory's stores, owned by this process until ``close()``."""

    @classmethod
    def open(
        cls,
        data_dir: Path | str,
        *,
        embedder: Embedder | None = None,
        warm: bool = True,
        ann_threshold: int = 50_000,
        canonical: str | None = None,
        progress: Callable[[str], None] | None = None,
        fresh_projections: bool = False,
    ) -> Engine:
        """Open (creating if needed) the stores under ``data_dir`` and repair the projections: replayed past
        their watermarks, or rebuilt from the canonical store when they cannot be trusted (logged). With
        ``fresh_projections`` their files are deleted first and built anew (``open_stores``).

        ``progress`` is told how far a long one-off conversion of an older store has got, while the open runs one.

        Takes an exclusive lock on ``data_dir/owner.lock``: a second process gets StorageUnavailable.
        Never imports torch itself; with ``warm`` the embedder loads in a background thread.
        """
        path = Path(data_dir).expanduser().resolve()
        try:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(path / "owner.lock", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise StorageUnavailable(f"cannot use data directory {path}: {exc.strerror}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise Locked(
                f"data directory {path} is owned by another Mnemograph process",
                hint="connect through that process (mnemograph serve attaches to it) instead of opening it",
            ) from None
        try:
            # The directory's permissions are the boundary against other local users (docs/security.md):
            # private from birth (the entry points' umask), and tightened here when an older version left it
            # open. Under the lock, so a CLI that finds an owner running does not walk the tree.
            make_private(path)
        except OSError as exc:
            os.close(fd)
            raise StorageUnavailable(f"cannot make data directory {path} private: {exc.strerror}") from exc
        emb = embedder if embedder is not None else CachedEmbedder(MiniLMEmbedder())
        try:
            stores = open_stores(
                path,
                emb,
                ann_threshold=ann_threshold,
                canonical=canonical,
                progress=progress,
                fresh_projections=fresh_projections,
            )
        except BaseException:
            os.close(fd)
            raise
        try:
            engine = cls(path, emb, fd, stores)
            engine.start(progress)
        except BaseException:
            # A repair that failed (a rebuild on a full disk): release the stores, so that the owner's next try
            # (or the user's ``mnemograph reindex``) in this process or another can open them again. Kùzu only
            # when no commit failed (closing would checkpoint a transaction whose log never reached disk).
            for projection in stores.projections:
                with contextlib.suppress(Exception):
                    projection.close()
            if stores.canonical.failed is None:
                with contextlib.suppress(Exception):
                    stores.canonical.close()
            os.close(fd)
            raise
        if warm:
            threading.Thread(target=emb.warm, name="mnemograph-embedder-warm", daemon=True).start()
        return engine

    @classmethod
    def import_export(
        cls,
        data_dir: Path | str,
        source: IO[str],
        *,
        embedder: Embedder | None = None,
        progress: Callable[[str, int, int], None] | None = None,
    ) -> snapshots.ImportSummary:
        """Restore an export into a new (empty) data directory. The file is validated before anything is written."""
        path = Path(data_dir).expanduser().resolve()
        snapshots.require_empty(path)
        parsed = snapshots.parse(iter(source))
        with cls.open(path, embedder=embedder, warm=False) as engine:
            return snapshots.restore(engine, parsed, progress=progress)
