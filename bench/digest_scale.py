"""What one week (or day, or conversation) digest costs as it holds more memories, each naming someone new.

    python bench/digest_scale.py                 # writes docs/benchmarks/digest-scale.md
    python bench/digest_scale.py --sizes 500 1000

A digest scores each sentence by how many names seen so far it holds. The scan of every name seen so far
(``scan``) made a digest quadratic in its memories; the names indexed by their first three characters
(``index``, ``storage.enrich.digest.named_in``) cost a sentence its length. Both variants build the same digests
(checked here) from the same memories in the same run; medians of ``--repeat`` builds, and their ratio.
"""

from __future__ import annotations

import argparse
import random
import shlex
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _common import machine  # noqa: E402

from storage.enrich import digest  # noqa: E402
from storage.language.extraction import EntityLexicon  # noqa: E402

FIRST = ["Ana", "Bruno", "Carla", "Duarte", "Elsa", "Filipe", "Gil", "Helena", "Ivo", "Joana"]
LAST = ["Silva", "Sousa", "Costa", "Pereira", "Santos", "Ferreira", "Oliveira", "Martins", "Gomes", "Lopes"]
CITIES = ["Lisbon", "Porto", "Braga", "Faro", "Evora", "Coimbra", "Aveiro", "Leiria"]


def memories(n: int) -> list[digest.Said]:
    rng = random.Random(n)
    t0 = datetime(2026, 11, 2, tzinfo=UTC)
    return [
        digest.Said(
            f"m{i:06d}",
            "user",
            "ana",
            t0 + timedelta(seconds=600_000 * i // n),
            f"Ana met {rng.choice(FIRST)} {rng.choice(LAST)}{i} in {rng.choice(CITIES)} about project "
            f"Zeta{i}, a budget of {i * 7} euros.",
            (),
        )
        for i in range(n)
    ]


def scan(low: str, by_prefix: Mapping[str, Sequence[str]]) -> int:
    """The scoring before: every name seen so far, tried against the sentence."""
    return min(2, sum(1 for keys in by_prefix.values() for k in keys if k in low))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[500, 1000, 2000, 4000])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks" / "digest-scale.md")
    args = ap.parse_args()
    index = digest.named_in
    rows = []
    for n in args.sizes:
        said = memories(n)
        times: dict[str, list[float]] = {"scan": [], "index": []}
        texts: dict[str, str] = {}
        for _ in range(args.repeat):
            for name, fn in (("scan", scan), ("index", index)):
                digest.named_in = fn  # type: ignore[assignment]  # the variant build() calls
                t = time.perf_counter()
                texts[name] = digest.build("user:ana", said, lexicon=EntityLexicon(), week="2026-W45").text
                times[name].append(time.perf_counter() - t)
        digest.named_in = index
        assert texts["scan"] == texts["index"], n
        s, i = statistics.median(times["scan"]), statistics.median(times["index"])
        rows.append((n, s, i))
        print(f"{n:>6} memories: scan {s:6.2f} s  index {i:6.2f} s  ratio {s / i:5.2f}", flush=True)
    m = machine()
    lines = [
        "# Digest build time by memories in it",
        "",
        f"`python {' '.join(shlex.quote(a) for a in ['bench/digest_scale.py', *sys.argv[1:]])}`, "
        f"{datetime.now(UTC):%Y-%m-%d}, {m['cores']} cores ({m['cpu']}), Python {m['python']}.",
        "",
        "One offline digest (`storage.enrich.digest.build`, as a week digest is built) of N memories, each naming",
        "a new person; median of "
        f"{args.repeat} builds. `scan`: each sentence tried against every name seen so far (before); `index`:",
        "names looked up by their first three characters (now). Both give the same digest (checked).",
        "",
        "| memories | scan (s) | index (s) | scan / index |",
        "|--:|--:|--:|--:|",
        *(f"| {n} | {s:.2f} | {i:.2f} | {s / i:.2f} |" for n, s, i in rows),
        "",
    ]
    args.out.write_text("\n".join(lines))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
