"""Child for the erase crash test: writes a canary memory (two versions), then erases it (or purges its scope)
while another thread keeps writing (printing ``ACK <id>`` for each acknowledged write), and kills itself with
SIGKILL at the named moment: after the canonical commit, while the new graph file is being caught up (before it is
switched in), after the graph file was switched, before the text index is rebuilt, between the two projections'
switches, or at a random moment."""

from __future__ import annotations

import os
import random
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from storage import Engine, NotFound
from storage.adapters.tantivy_text import StagedIndex


def _die_before(obj: object, name: str) -> None:
    original: Callable[..., Any] = getattr(obj, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        os.kill(os.getpid(), signal.SIGKILL)
        return original(*args, **kwargs)

    setattr(obj, name, wrapper)


def _second_erasure_during_the_first(engine: Engine, second: str) -> None:
    """While the first erasure rewrites the projections, a second erasure (of the canary) commits its delete
    and then waits for the rewrite lock; the process dies as that second rewrite starts, after the first one
    has finished. The canary's bytes are then still in the files, and only the marker can say so."""
    rewrite: Callable[..., Any] = engine._rewrite_projections
    rebuild: Callable[..., Any] = engine.graph.rebuild
    rebuilds = [0]

    def first_rewrite(*args: Any, **kwargs: Any) -> Any:
        engine._rewrite_projections = rewrite  # type: ignore[method-assign]
        threading.Thread(target=lambda: engine.erase(second, confirm=second), daemon=True).start()
        while True:  # until the second erasure's delete is committed
            try:
                engine.read(second)
            except NotFound:
                break
            time.sleep(0.01)
        return rewrite(*args, **kwargs)

    def counted_rebuild(*args: Any, **kwargs: Any) -> Any:
        rebuilds[0] += 1
        if rebuilds[0] == 2:  # the second erasure's rewrite starts: the first one is done
            os.kill(os.getpid(), signal.SIGKILL)
        return rebuild(*args, **kwargs)

    engine._rewrite_projections = first_rewrite  # type: ignore[method-assign]
    engine.graph.rebuild = counted_rebuild  # type: ignore[method-assign]


def main(data_dir: str, canary: str, op: str, where: str) -> None:
    engine = Engine.open(data_dir, warm=False)
    first = engine.write(f"The vault code is {canary}.", ["run:secret"])
    engine.amend(first.id, f"The vault code is {canary} (changed).")
    engine.write("Nothing secret here.", ["user:ana"])
    target = engine.graph  # keep a reference for the hooks below
    if where == "after_commit":
        _die_before(engine, "_vacuum")
    elif where == "mid_graph_rewrite":
        _die_before(target, "_rewrite_finish")
    elif where == "after_graph_swap":
        _die_before(engine, "_rewrite_projections")
    elif where == "before_text_rebuild":
        _die_before(engine.text, "build")
    elif where == "between_switches":
        _die_before(StagedIndex, "switch")
    elif where == "second_waiting":
        decoy = engine.write("A decoy memory, erased first.", ["run:decoy"])
        _second_erasure_during_the_first(engine, first.id)

    def keep_writing() -> None:
        for n in range(100_000):
            receipt = engine.write(f"Routine note {n}: nothing secret.", ["user:ana"])
            print(f"ACK {receipt.id}", flush=True)

    threading.Thread(target=keep_writing, daemon=True).start()
    print("ERASING", flush=True)
    if where == "random":  # timed from here: a kill before this line would test nothing (and say so)
        delay = random.Random(canary).uniform(0.0, 0.5)
        threading.Thread(target=lambda: (time.sleep(delay), os.kill(os.getpid(), signal.SIGKILL))).start()
    if where == "second_waiting":
        engine.erase(decoy.id, confirm=decoy.id)
    elif op == "erase":
        engine.erase(first.id, confirm=first.id)
    else:
        engine.purge("run:secret", confirm="run:secret")
    print("DONE", flush=True)
    time.sleep(60)  # the random kill always comes


if __name__ == "__main__":
    main(*sys.argv[1:5])
