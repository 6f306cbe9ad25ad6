"""A recall right after a write, on real stores: it answers with the write (read-your-writes), and the time it
waits for the projections to show the write is spent on what needs no projection (the query's embedding); the
projections apply the write side by side, so the wait is the slower one's, not the sum."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from storage import CachedEmbedder, Engine

SCOPE = "user:ana"
FACT = "The ferry to Zanzibar leaves at seven from the old harbour."
QUERY = "when does the boat to the island leave"
WITHIN = 30.0  # seconds: a bound for what takes milliseconds, never a sleep


def _held(monkeypatch: pytest.MonkeyPatch, projection: Any) -> tuple[threading.Event, threading.Event]:
    """Hold ``projection``'s next apply until the second event is set; the first is set once it is entered."""
    entered, release = threading.Event(), threading.Event()
    real: Callable[..., None] = projection.apply

    def apply(*args: Any, **kwargs: Any) -> None:
        entered.set()
        assert release.wait(WITHIN)
        real(*args, **kwargs)

    monkeypatch.setattr(projection, "apply", apply)
    return entered, release


def test_a_recall_right_after_a_write_embeds_its_query_while_the_projections_catch_up(
    engine: Engine, embedder: CachedEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine.reconciler.read_wait = 2 * WITHIN  # the recall must wait for the write, not give up on it
    entered, release = _held(monkeypatch, engine.text)
    asked = threading.Event()
    real_embed = embedder.embed

    def embed(texts: Sequence[str]) -> Any:
        if any("island" in t for t in texts):
            asked.set()
        return real_embed(texts)

    monkeypatch.setattr(embedder, "embed", embed)
    engine.write(FACT, [SCOPE])
    assert entered.wait(WITHIN)  # the text index is applying the write, and stays there for now
    with ThreadPoolExecutor(1) as pool:
        found = pool.submit(engine.recall, QUERY, [SCOPE])
        try:
            assert asked.wait(WITHIN), "the query waited for the projections before it was embedded"
            assert not found.done()  # it still waits for the write to reach the text index
        finally:
            release.set()
        hits = found.result(WITHIN)
    assert hits.behind == 0
    assert [h.memory.content for h in hits][:1] == [FACT]


def test_the_projections_apply_a_write_side_by_side(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    entered, release = _held(monkeypatch, engine.vectors)
    text_done = threading.Event()
    real_text = engine.text.apply

    def text_apply(*args: Any, **kwargs: Any) -> None:
        real_text(*args, **kwargs)
        text_done.set()

    monkeypatch.setattr(engine.text, "apply", text_apply)
    engine.write(FACT, [SCOPE])
    try:
        assert entered.wait(WITHIN)
        # The vector table is held in the middle of its apply; the text index takes the write meanwhile.
        assert text_done.wait(WITHIN), "the text index waited for the vector table"
        assert not engine.reconciler.wait_projected(timeout=0.01)  # readers still wait for the slower one
    finally:
        release.set()
    assert engine.reconciler.wait_projected(timeout=WITHIN)
    assert engine.text.watermark.value == engine.vectors.watermark.value == engine.reconciler.committed_seq
    assert [h.memory.content for h in engine.recall(QUERY, [SCOPE])][:1] == [FACT]


def test_a_failed_apply_beside_the_other_fails_the_batch_and_is_retried(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    failures = [OSError("disk full (simulated)")]
    real_text = engine.text.apply

    def text_apply(*args: Any, **kwargs: Any) -> None:
        if failures:
            raise failures.pop()
        real_text(*args, **kwargs)

    monkeypatch.setattr(engine.text, "apply", text_apply)
    engine.write(FACT, [SCOPE])
    # The vector table took the write, the text index failed it: readers go on waiting until the retry lands.
    assert engine.reconciler.wait_projected(timeout=WITHIN)
    assert not failures
    assert engine.reconciler.projection_error is None
    assert engine.text.watermark.value == engine.vectors.watermark.value == engine.reconciler.committed_seq
    assert [h.memory.content for h in engine.recall(QUERY, [SCOPE])][:1] == [FACT]


# A process that wrote, and exits without closing the store while the text index's apply (beside the projector)
# hangs, as on a stalled network file system.
_EXIT_CHILD = """
import sys, threading, time
import numpy as np
from storage import Engine, WriteItem
engine = Engine.open(sys.argv[1], warm=False)
hung = threading.Event()
def hang(*args, **kwargs):
    hung.set()
    time.sleep(3600)
engine.text.apply = hang
vector = np.ones(384, dtype=np.float32) / np.sqrt(384)
engine.write_many([WriteItem("The ferry leaves at seven.", ["user:ana"], vector=vector)])
print("ACK", flush=True)
assert hung.wait(30)
print("HUNG", flush=True)
"""


def test_a_process_exits_while_an_apply_beside_the_projector_hangs(tmp_path: Path) -> None:
    """What applies a batch beside the projector must not hold the interpreter's exit, as the projector (a
    daemon thread) does not: a pool's worker was joined at exit, so a process whose apply hung never exited, and
    one that exited without closing the store while a batch was applying aborted in most runs (exit status
    134, "terminate called without an active exception": 9 of 14 runs; 0 of 14 with a daemon thread)."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen(
        [sys.executable, "-c", _EXIT_CHILD, str(tmp_path / "data")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        out, err = proc.communicate(timeout=WITHIN)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail("the process did not exit: the interpreter waited for the hung apply")
    assert out.split() == ["ACK", "HUNG"], err[-2000:]
