"""Child for the memory-budget test: opens a store, optionally writes hostile memories, and prints how much its
peak resident memory (VmHWM) grew over each step, in KiB, one ``step kib`` line each."""

from __future__ import annotations

import sys
from pathlib import Path

from storage import Engine


def _peak_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


def _reset_peak() -> None:
    # Writing 5 to clear_refs resets VmHWM to the current RSS (Linux), so each step measures only its own growth.
    Path("/proc/self/clear_refs").write_text("5")


def main(data_dir: str, what: str) -> None:
    _reset_peak()
    base = _peak_kib()
    engine = Engine.open(data_dir, warm=False)
    print("open", _peak_kib() - base, flush=True)
    if what == "write":
        engine.embedder.warm()
        engine.write("A first memory so every store is warm: Ana Lima lives in Lisbon.", ["user:ana"])
        engine.recall("where does Ana live", ["user:ana"])
        _reset_peak()
        base = _peak_kib()
        # One capitalised word of 31,000 characters (the attack), then words built to fill the fuzzy index.
        engine.write("Q" + "x" * 30_999, ["user:ana"])
        print("one_long_word", _peak_kib() - base, flush=True)
        _reset_peak()
        base = _peak_kib()
        words = " ".join(f"Z{i:05d}" + "abcdefghijklmnopqrstuvw"[: 5 + i % 18] for i in range(2_500))
        engine.write(words[:32_000], ["user:ana"])
        print("many_names", _peak_kib() - base, flush=True)
        _reset_peak()
        base = _peak_kib()
        engine.recall("Q" + "x" * 3_999, ["user:ana"])
        print("long_query", _peak_kib() - base, flush=True)
    engine.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
