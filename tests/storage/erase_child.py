"""Child for the erase crash test: writes a canary memory (two versions), then erases it (or purges its scope)
and kills itself with SIGKILL at the named moment: after the canonical commit, after the graph file was swapped,
before the text index is rebuilt, or at a random moment."""

from __future__ import annotations

import os
import random
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from storage import Engine


def _die_before(obj: object, name: str) -> None:
    original: Callable[..., Any] = getattr(obj, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        os.kill(os.getpid(), signal.SIGKILL)
        return original(*args, **kwargs)

    setattr(obj, name, wrapper)


def main(data_dir: str, canary: str, op: str, where: str) -> None:
    engine = Engine.open(data_dir, warm=False)
    first = engine.write(f"The vault code is {canary}.", ["run:secret"])
    engine.amend(first.id, f"The vault code is {canary} (changed).")
    engine.write("Nothing secret here.", ["user:ana"])
    target = engine.graph  # keep a reference for the hooks below
    if where == "after_commit":
        _die_before(engine, "_vacuum")
    elif where == "after_graph_swap":
        _die_before(target, "_cleanup_stale_files")
    elif where == "before_text_rebuild":
        _die_before(engine.text, "rebuild")
    else:
        delay = random.Random(canary).uniform(0.0, 0.5)
        threading.Thread(target=lambda: (time.sleep(delay), os.kill(os.getpid(), signal.SIGKILL))).start()
    print("ERASING", flush=True)
    if op == "erase":
        engine.erase(first.id, confirm=first.id)
    else:
        engine.purge("run:secret", confirm="run:secret")
    print("DONE", flush=True)
    time.sleep(60)  # the random kill always comes


if __name__ == "__main__":
    main(*sys.argv[1:5])
