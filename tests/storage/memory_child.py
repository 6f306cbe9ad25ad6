"""Child for the memory-budget test: opens a store and prints how much its peak resident memory (VmHWM) grew
over each step, in KiB, one ``step kib`` line each. ``plain`` writes ordinary 32,000-character prose (the
yardstick: any long write costs the stores and the embedder some memory); ``hostile`` also writes the attacks."""

from __future__ import annotations

import random
import string
import sys
from collections.abc import Callable
from pathlib import Path

from storage import Engine
from storage.domain.models import MessageIn


def _peak_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


def _step(name: str, fn: Callable[[], object]) -> None:
    # Writing 5 to clear_refs resets VmHWM to the current RSS (Linux), so each step measures only its own growth.
    Path("/proc/self/clear_refs").write_text("5")
    base = _peak_kib()
    fn()
    print(name, _peak_kib() - base, flush=True)


def _prose(words: str) -> str:
    return " ".join([words] * 600)[:32_000]


def main(data_dir: str, what: str) -> None:
    engines: list[Engine] = []
    _step("open", lambda: engines.append(Engine.open(data_dir, warm=False)))
    engine = engines[0]
    if what in ("plain", "hostile"):
        engine.embedder.warm()
        # Warm every store and the embedder's long-input path: their first long write grows them once.
        engine.write(_prose("the quick brown fox jumps over the lazy dog and runs away"), ["user:ana"])
        _step("prose", lambda: engine.write(_prose("a slow red cat walks under a happy frog"), ["user:ana"]))
    if what == "hostile":
        # One capitalised word of 31,000 random letters inside a sentence (the attack as reported; a word of one
        # repeated letter would have few distinct one-letter deletions) ...
        rng = random.Random(31)
        word = "Q" + "".join(rng.choice(string.ascii_lowercase) for _ in range(30_990))
        _step("one_long_word", lambda: engine.write(f"We met {word} today.", ["user:ana"]))
        # ... about 1,300 distinct would-be names of 7 to 29 characters, to fill the fuzzy index ...
        names = " ".join(f"saw Z{i:05d}" + "abcdefghijklmnopqrstuvw"[: 1 + i % 23] for i in range(2_500))
        _step("many_names", lambda: engine.write(names[:32_000], ["user:ana"]))
        # ... and a recall whose query is one 4,000-character word (the longest query there is).
        _step("long_query", lambda: engine.recall(word[:4_000], ["user:ana"]))
        # ... and one conversation_write of 40 messages of 32,000 characters (all embedded in the one call).
        talk = [
            MessageIn("user", f"Message {i}: " + _prose(f"note {i} on the slow red cat")) for i in range(40)
        ]
        _step("long_conversation", lambda: engine.write_conversation("c1", talk, ["user:ana"]))
    engine.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
