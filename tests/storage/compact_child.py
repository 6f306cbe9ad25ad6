"""Child for the compaction crash test: fills a store whose canonical file holds free pages, then keeps writing,
amending and retiring in a thread (printing ``ACK``, ``AMEND old new`` and ``RETIRE id`` once each is
acknowledged) while maintenance makes the compactor rewrite the file, and kills itself with SIGKILL at the named
moment: as the new file is built, before the switch, right after it, or at a random moment."""

from __future__ import annotations

import os
import random
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from storage import Engine, WriteItem


def _die_at(obj: object, name: str, call: int = 1) -> None:
    original: Callable[..., Any] = getattr(obj, name)
    calls = [0]

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] == call:
            time.sleep(0.2)  # let a few writes be acknowledged beside the rewrite first
            os.kill(os.getpid(), signal.SIGKILL)
        return original(*args, **kwargs)

    setattr(obj, name, wrapper)


_SAY = threading.Lock()


def say(line: str) -> None:
    """One whole line per write: two threads print here, and ``print`` writes the text and its newline apart,
    so their lines could interleave ("ACK <id>REWRITES 1", then a blank line) and the test read a wrong id."""
    with _SAY:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def main(data_dir: str, where: str) -> None:
    engine = Engine.open(data_dir, warm=False)
    ids: list[str] = []
    for batch in range(4):
        items = [WriteItem(f"memory {batch}-{i} about Lisbon and Porto", ["user:a"]) for i in range(50)]
        ids += [r.id for r in engine.write_many(items)]
        engine.reconciler.wait_projected()
        engine.graph.checkpoint()
    engine.reconciler.wait_projected()
    for mid in ids:
        say(f"ACK {mid}")
    engine.compactor.min_free, engine.compactor.min_share = 1, 0.0
    graph = engine.graph
    if where == "build":
        _die_at(graph, "_rewrite_build")
    elif where == "finish":
        _die_at(graph, "_rewrite_finish")
    elif where == "after_switch":
        _die_at(graph, "_cleanup_stale_files", 2)  # the first runs as the rewrite begins
    else:
        delay = random.Random(where).uniform(0.0, 3.0)
        threading.Thread(target=lambda: (time.sleep(delay), os.kill(os.getpid(), signal.SIGKILL))).start()

    def traffic() -> None:
        for n in range(100_000):
            r = engine.write(f"Routine note {n} in Faro.", ["user:a", f"project:p{n % 3}"])
            say(f"ACK {r.id}")
            if n < len(ids) // 2:
                new = engine.amend(ids[2 * n], f"memory {ids[2 * n][:6]} amended")
                say(f"AMEND {ids[2 * n]} {new.id}")
                engine.retire(ids[2 * n + 1], reason="done")
                say(f"RETIRE {ids[2 * n + 1]}")

    threading.Thread(target=traffic, daemon=True).start()
    for _ in range(1000):
        engine.reconciler.on_projector(engine.reconciler._maintain)
        engine.compactor.wait_idle(120)
        say(f"REWRITES {engine.compactor.rewrites}")
    time.sleep(60)


if __name__ == "__main__":
    main(*sys.argv[1:3])
