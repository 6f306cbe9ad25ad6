"""The owner's Engine, opened in the background so the MCP handshake never waits for the stores.

Opening imports the store libraries (about a second) and repairs projections; the embedding model loads
beside it in its own thread. The owner starts ``EngineHolder.run`` right after it listens; tool calls ``await get()``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from storage.domain.errors import CanonicalUnreachable, Closed, MnemographError, StorageUnavailable

if TYPE_CHECKING:
    from storage import Engine

log = logging.getLogger(__name__)

_RETRY_MIN, _RETRY_MAX = 0.1, 2.0
_RETRY_AFTER_LONG = 60.0  # seconds at most between retries of an open whose attempts take long


@dataclass(frozen=True, slots=True)
class WriteTimeOptions:
    """What the write path does beyond storing: settings passed through to the Engine."""

    functional: tuple[str, ...] | None = None  # None: the engine's default; (): none
    anthropic_api_key: str = field(default="", repr=False)
    anthropic_model: str = "claude-sonnet-4-6"
    llm_min_interval: float = 0.5
    digest_quiet: float = 10.0
    digests: bool = True
    sampling: bool = False  # MCP sampling: writes may bring their client's own model (server._sampling)
    llm_reconcile: bool = True  # with an API key: Claude decides what the reconcile rules leave open
    day_digest_quiet: float = 3600.0
    llm_timeout: float = 60.0
    transitive: tuple[str, ...] | None = None  # None: the default (storage.enrich.transitive); (): none
    resolve_by_meaning: bool = False
    recall_salience: bool = False  # recall's salience term when a call does not say (docs/recall.md)
    salience_half_life: float = 30.0
    access_counts: bool = True


def write_time(options: WriteTimeOptions) -> Callable[[Engine], None]:
    """What the owner applies to the engine once it is open: the functional predicates, the sampling worker
    when sampling is on and, with an API key, the Claude extractor, digester and (unless ``llm_reconcile`` is
    off) reconcile decider (imported only then)."""

    def apply(engine: Engine) -> None:
        if options.functional is not None:
            engine.functional = frozenset(options.functional)
        if options.transitive is not None:
            engine.transitive = frozenset(options.transitive)
        if options.resolve_by_meaning:
            from storage.language.resolve import MEANING_THRESHOLD

            engine.meaning_threshold = MEANING_THRESHOLD
        engine.digest_quiet = options.digest_quiet
        engine.day_digest_quiet = options.day_digest_quiet
        engine.salience_default = options.recall_salience
        engine.salience_half_life = options.salience_half_life
        engine.count_accesses = options.access_counts
        if not options.digests:
            engine.stop_consolidation()
        if options.sampling:
            engine.use_sampling()
        if options.anthropic_api_key:
            import anthropic

            from storage.enrich.claude import ClaudeExtractor
            from storage.enrich.decide_claude import ClaudeDecider
            from storage.enrich.digest_claude import ClaudeDigester

            client = anthropic.Anthropic(api_key=options.anthropic_api_key)
            claude = ClaudeExtractor(
                client,
                options.anthropic_model,
                min_interval=options.llm_min_interval,
                timeout=options.llm_timeout,
            )
            engine.use_llm(claude)
            engine.use_llm_digests(ClaudeDigester(claude))
            if options.llm_reconcile:
                engine.use_llm_decisions(ClaudeDecider(claude))

    return apply


def store_options(
    functional: tuple[str, ...] | None, transitive: tuple[str, ...] | None
) -> Callable[[Engine], None]:
    """The predicate lists (``MNEMOGRAPH_FUNCTIONAL_PREDICATES``, ``MNEMOGRAPH_TRANSITIVE_PREDICATES``) for a
    command that opens the directory itself, as ``write_time`` gives them to the owner's engine: without them
    ``mnemograph sweep`` would link values of a predicate the user made many-valued, and ``digests`` or an
    import would derive chains of one the user took off the list."""

    def apply(engine: Engine) -> None:
        if functional is not None:
            engine.functional = frozenset(functional)
        if transitive is not None:
            engine.transitive = frozenset(transitive)

    return apply


def _open_engine(data_dir: Path, runtime: str, progress: Callable[[str], None] | None = None) -> Engine:
    # Imported here, in the opening thread: the store libraries must stay off the handshake path.
    from storage import CachedEmbedder, Engine, MiniLMEmbedder

    # The model loads in its own thread from the start, beside the store libraries' imports and the projection
    # repair, rather than after them: the first recall waits for whichever finishes last, not for both in turn.
    embedder = CachedEmbedder(MiniLMEmbedder(runtime="torch" if runtime == "torch" else "numpy"))
    threading.Thread(target=embedder.warm, name="mnemograph-embedder-warm", daemon=True).start()
    return Engine.open(data_dir, embedder=embedder, warm=False, progress=progress)


class EngineHolder:
    """Holds the one Engine of this process: opening, open, or failed for good.

    ``StorageUnavailable`` while opening (typically: a CLI ``reindex`` holds the directory for a moment) is
    retried with backoff until the holder closes; other domain errors (a store built by another embedding
    model, say) are permanent and every ``get`` raises them.
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        wait: float,
        configure: Callable[[Engine], None] | None = None,
        embedder: str = "numpy",
    ) -> None:
        self._data_dir = data_dir
        self._configure = configure  # applied to the engine once it is open, before any call reaches it
        self._wait = wait
        self._runtime = embedder
        self._engine: Engine | None = None
        self._failure: MnemographError | None = None
        self._last_error: MnemographError | None = None
        self._doing: str | None = (
            None  # what a long open is doing (a one-off conversion), from the opening thread
        )
        self._noted = False  # the current attempt reached a long one-off step (``_note``)
        self._settled = anyio.Event()
        self._closing = False

    @property
    def state(self) -> str:
        """``opening``, ``unreachable`` (opening, but the shared canonical store does not answer: retrying),
        ``ready`` or ``failed``, for /healthz."""
        if self._engine is not None:
            return "ready"
        if self._failure is not None:
            return "failed"
        return "unreachable" if isinstance(self._last_error, CanonicalUnreachable) else "opening"

    @property
    def problem(self) -> str | None:
        """Why the engine is not ready, when there is a reason to report."""
        error = self._failure or (self._last_error if self._engine is None else None)
        if error is None and self._engine is None and self._doing is not None:
            return f"opening: {self._doing}"
        return str(error) if error is not None else None

    def _note(self, doing: str) -> None:
        self._doing = doing  # a str assignment: safe to make from the opening thread
        self._noted = True  # this attempt got as far as a long one-off step (a conversion, a rebuild)
        # An attempt that gets this far is past what failed a previous one (the directory held by a CLI, say):
        # that error no longer says why the store is not ready, and a waiting call must hear of the progress.
        self._last_error = None

    @property
    def projections(self) -> dict[str, object] | None:
        """The projections' progress against the canonical store, once open: sequence numbers committed and
        projected, and why the last projection attempt failed while they have not caught up since."""
        engine = self._engine
        if engine is None:
            return None
        r = engine.reconciler
        return {
            "committed": r.committed_seq,
            "projected": r.projected_seq,
            "error": r.projection_error,
            "canonical_error": r.canonical_error,
        }

    @property
    def failed(self) -> bool:
        """True once the open engine's canonical store failed a commit: the process must reopen it."""
        return self._engine is not None and self._engine.failed

    async def run(self) -> None:
        """Open the engine, retrying while the directory is busy. Returns once open, failed, or closing."""
        delay = _RETRY_MIN
        started = time.monotonic()
        while not self._closing:
            attempt, self._noted = time.monotonic(), False
            try:
                # Shielded: a cancelled owner must still see the engine it opened, to close it.
                with anyio.CancelScope(shield=True):
                    engine = await anyio.to_thread.run_sync(
                        _open_engine, self._data_dir, self._runtime, self._note
                    )
            except StorageUnavailable as exc:
                self._last_error = exc
                # An attempt that failed in a long one-off step (a repair rebuilding an index of a large store,
                # on a disk still full) is not retried sooner than it took, so the retries use at most half the
                # machine. Any other (the directory held by a CLI for a moment, a shared store's server not
                # answering yet) is retried at the usual pace, however long the attempt took.
                wait = delay
                if self._noted:
                    wait = max(delay, min(time.monotonic() - attempt, _RETRY_AFTER_LONG))
                log.warning("store not available yet (%s); retrying in %.1fs", exc, wait)
                await anyio.sleep(wait)
                delay = min(delay * 2, _RETRY_MAX)
                continue
            except MnemographError as exc:
                self._failure = exc
                log.error("cannot open the store: %s", exc)
            except Exception as exc:
                log.exception("cannot open the store")
                self._failure = StorageUnavailable(
                    f"the store at {self._data_dir} could not be opened ({type(exc).__name__})",
                    hint="the owner's log has the details; tell the user Mnemograph needs attention",
                )
            else:
                if self._closing:  # closed while opening: give the directory back at once
                    await anyio.to_thread.run_sync(engine.close)
                    return
                if self._configure is not None:
                    self._configure(engine)
                self._engine = engine
                log.info("store open after %.2fs", time.monotonic() - started)
            self._settled.set()
            return

    async def get(self) -> Engine:
        """The open Engine. Waits up to the configured time while it opens; raises StorageUnavailable after
        that, or the permanent error if opening failed."""
        if self._closing:
            raise Closed(
                "Mnemograph's owner process is shutting down", hint="call the tool again in a moment"
            )
        if self._engine is None and self._failure is None:
            with anyio.move_on_after(self._wait):
                await self._settled.wait()
        if self._engine is not None:
            return self._engine
        if self._failure is not None:
            raise self._failure
        if self._doing is not None and self._last_error is None:
            raise StorageUnavailable(
                f"the memory store is still opening ({self._doing})",
                hint="this runs once; call the tool again in a minute or two (mnemograph status shows how far "
                "it got)",
            )
        reason = f" ({self._last_error.message})" if self._last_error is not None else ""
        raise StorageUnavailable(
            f"the memory store is still opening{reason}", hint="wait a few seconds and call the tool again"
        )

    async def close(self) -> None:
        """Stop retrying, and close the engine if it is open (this drains queued writes)."""
        self._closing = True
        engine, self._engine = self._engine, None
        if engine is not None:
            await anyio.to_thread.run_sync(engine.close)
