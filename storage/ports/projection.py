"""The projection port: a derived store (search index) fed from the canonical change log.

A projection never decides anything: the reconciler hands it the canonical state of the memories a batch of
changes touched, and it makes its files reflect exactly that, idempotently (a replay after a crash applies the
same rows again). It records the last change sequence it applied in its watermark, written after its own
commit, so the watermark may lag the files but never lead them. ``replace_all`` rewrites its files from the
canonical rows, and ``build`` does the same beside live traffic: after an erasure that is what removes the
erased bytes (content, vector floats, ids) from disk.

Adding a projection is one module implementing this protocol plus its line in ``storage.compose``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from storage.domain.records import ProjectionRow


class Watermark(Protocol):
    """The last change sequence a projection applied (durable; may lag, never leads)."""

    @property
    def value(self) -> int: ...

    def set(self, value: int) -> None: ...


class StagedProjection(Protocol):
    """A projection's new files, built beside the live ones (``Projection.build``) and not searched yet."""

    def apply(self, upserts: Sequence[ProjectionRow], deletes: Sequence[str]) -> None:
        """Catch up with changes made since the rows it was built from; idempotent."""
        ...

    def switch(self) -> None:
        """Make these files the live ones, waiting only for the searches under way. Runs while recalls wait for
        the projector: the old files are left for ``drop_old``."""
        ...

    def drop_old(self) -> None:
        """After ``switch``, in any thread: delete the files it replaced (nothing searches them any more)."""
        ...

    def discard(self) -> None:
        """Delete these files (the rewrite failed); the live ones stay as they are."""
        ...


class Projection(Protocol):
    """A derived store kept in step with the canonical one by ``storage.sync.reconciler``."""

    @property
    def name(self) -> str:
        """The projection's name in reports (``verify`` counts and drift, erasure receipts)."""
        ...

    @property
    def watermark(self) -> Watermark: ...

    @property
    def damaged(self) -> str | None:
        """Why the files found at open cannot be trusted (a watermark that cannot be read, a table or index that
        is missing or cannot be read), or None. A damaged projection opens empty; the engine rebuilds it from the
        canonical store before serving."""
        ...

    def apply(
        self, upserts: Sequence[ProjectionRow], deletes: Sequence[str], *, fresh: Sequence[str] = ()
    ) -> None:
        """Make the projection reflect ``upserts`` and drop ``deletes``; idempotent. ``fresh`` ids are known
        never to have been projected (their delete may be skipped). The reconciler runs the projections' applies
        side by side (never two of one projection at once), so one must not touch another's files."""
        ...

    def replace_all(self, rows: Sequence[ProjectionRow]) -> None:
        """Rewrite the projection's files from ``rows`` alone; nothing of what it held before stays on disk."""
        ...

    def build(self, rows: Sequence[ProjectionRow]) -> StagedProjection:
        """New files from ``rows`` alone, beside the live ones (``apply`` and searches go on meanwhile); after
        ``switch`` nothing of what the projection held before stays on disk. The rewrite after an erasure."""
        ...

    def live_status(self) -> dict[str, bool]:
        """Every projected id and whether it is live (neither superseded nor retired): ``verify`` compares it."""
        ...

    def duplicates(self) -> list[str]:
        """Ids the projection holds more than once (``verify`` reports them; ``reindex`` removes them)."""
        ...

    def count(self) -> int:
        """How many rows the projection holds (one per memory, unless some are ``duplicates``)."""
        ...

    @property
    def appends_since_maintain(self) -> int:
        """Changes applied since the last ``maintain`` (0 for a projection that needs no maintenance)."""
        ...

    def maintain(self) -> None:
        """Compact or re-index after many small appends (search speed only; never changes results)."""
        ...

    def close(self) -> None: ...


class TextSearch(Projection, Protocol):
    """A projection that answers BM25 queries (the ``bm25`` lane)."""

    def search(
        self, text: str, *, scopes: Sequence[str], k: int, live_only: bool, kinds: Sequence[str] | None
    ) -> list[tuple[str, float]]:
        """Ids with scores, best first, among memories in any of ``scopes``."""
        ...


class VectorSearch(Projection, Protocol):
    """A projection that answers nearest-neighbour queries (the ``vector`` lane)."""

    def search_with_vectors(
        self,
        vector: Sequence[float] | npt.NDArray[np.float32],
        *,
        scopes: Sequence[str],
        k: int,
        live_only: bool,
        kinds: Sequence[str] | None,
        vectors: bool = True,
    ) -> tuple[list[tuple[str, float]], npt.NDArray[np.float32] | None]:
        """Ids with cosine distances, nearest first, and the rows' stored vectors when ``vectors``."""
        ...
