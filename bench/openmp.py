"""OpenMP idle policy: the embedder's default (idle workers sleep) against libgomp's own (idle workers spin).

    python bench/openmp.py --cache ~/.cache/mnemograph-bench       # 100,000 memories, writes the report
    python bench/openmp.py --size 5000 --rounds 2 --no-write       # a smoke run

The policy is fixed when torch loads, so each variant runs in its own child process: the children alternate
(in a shuffled order per round) over one store loaded once by the parent, the core benchmark's corpus and
scopes. Each child interleaves default recalls with bare single-text embeddings and single writes, then
times batch embedding. Variants:

- ``sleep``: ``OMP_WAIT_POLICY`` unset, so the embedder sets ``PASSIVE`` (Mnemograph's default);
- ``spin``: ``GOMP_SPINCOUNT=300000``, libgomp's documented default when no policy is set (what torch does
  in any other program).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _common import PACKAGES, Latency, Sentences, load, machine

DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks" / "openmp.md"
VARIANTS = {"sleep": {}, "spin": {"GOMP_SPINCOUNT": "300000"}}
BATCH = 256


def log(msg: str) -> None:
    print(f"[{datetime.now():%H:%M:%S}] {msg}", file=sys.stderr, flush=True)


def build(path: Path, size: int, cache: Path | None) -> None:
    import core

    from storage import MiniLMEmbedder

    src = Sentences(core.SEED)
    texts = src.memories(size)
    bare = MiniLMEmbedder(runtime="torch")
    vectors, _ = core.embed_corpus(bare, texts, None, cache)
    with core.open_engine(path, bare) as e:
        core.make_scopes(e)
        rate = core.ingest(e, texts, vectors)
    log(f"loaded {size:,} memories ({rate.visible:,.0f}/s)")


def child(path: Path, seed: int, n: int) -> dict[str, Any]:
    """One variant's samples, in seconds: recalls, bare embeddings and writes interleaved; then batches."""
    import core

    from storage import MiniLMEmbedder

    src = Sentences(1000 + seed)  # every child asks and writes its own distinct texts
    bare, model = MiniLMEmbedder(runtime="torch"), MiniLMEmbedder(runtime="torch")
    bare.warm()
    model.warm()
    asked, said, written = src.questions(n + 10), src.questions(n + 10), src.memories(n + 10)
    with core.open_engine(path, model) as e:
        reads: dict[str, Callable[[int], object]] = {
            "recall": lambda i: e.recall(asked[i], [core.user(i)], k=10),
            "embed": lambda i: bare.embed([said[i]]),
        }
        core.interleave(range(n, n + 10), reads, seed=seed)  # warm-up
        times = core.interleave(range(n), reads, seed=seed)
        # Writes after the reads: each write is a new LanceDB version, which the next searches would pay for.
        write = core.Settled(e)
        writes: dict[str, Callable[[int], object]] = {
            "write": lambda i: write(lambda: e.write(written[i], [core.user(i)]))
        }
        times.update(core.interleave(range(n), writes, seed=seed))
        times["write acknowledged"] = write.acked
    batches = [src.memories(BATCH) for _ in range(4)]
    rates = []
    for texts in batches:
        start = time.perf_counter()
        bare.embed(texts)
        rates.append(len(texts) / (time.perf_counter() - start))
    return {"times": times, "batch": rates, "policy": os.environ.get("OMP_WAIT_POLICY", "unset")}


def run_children(path: Path, rounds: int, n: int) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {v: {"times": {}, "batch": []} for v in VARIANTS}
    rng = random.Random(3)
    for r in range(rounds):
        order = list(VARIANTS)
        rng.shuffle(order)
        for name in order:
            env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
            env.update(VARIANTS[name])
            seed = r * 10 + list(VARIANTS).index(name)
            cmd = [sys.executable, __file__, "--child", str(path), "--seed", str(seed), "--n", str(n)]
            log(f"round {r + 1}/{rounds}: {name}")
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise SystemExit(f"child failed:\n{done.stderr[-3000:]}")
            got = json.loads(done.stdout.strip().splitlines()[-1])
            out[name]["policy"] = got["policy"]
            for what, xs in got["times"].items():
                out[name]["times"].setdefault(what, []).extend(xs)
            out[name]["batch"].extend(got["batch"])
    return out


def table(res: dict[str, dict[str, Any]]) -> list[str]:
    sleep, spin = res["sleep"], res["spin"]
    lines = [
        "| measurement | sleep p50 / p95 ms | spin p50 / p95 ms | sleep ÷ spin p50 / p95 |",
        "|---|--:|--:|--:|",
    ]
    for what in ("recall", "embed", "write acknowledged", "write"):
        a, b = Latency.of(sleep["times"][what]), Latency.of(spin["times"][what])
        label = {
            "recall": "recall (default recipe, k 10)",
            "embed": "bare single-text embedding",
            "write": "single write, until recallable",
            "write acknowledged": "single write, acknowledged",
        }[what]
        lines.append(
            f"| {label} (n {a.n}) | {a.p50:.1f} / {a.p95:.1f} | {b.p50:.1f} / {b.p95:.1f} | "
            f"{a.p50 / b.p50:.2f}× / {a.p95 / b.p95:.2f}× |"
        )
    sb, pb = sorted(sleep["batch"]), sorted(spin["batch"])
    ms, mp = sb[len(sb) // 2], pb[len(pb) // 2]
    lines.append(
        f"| batch embedding of {BATCH} texts, texts/s (median) | {ms:.0f} | {mp:.0f} | {ms / mp:.2f}× |"
    )
    return lines


def ratios(res: dict[str, dict[str, Any]]) -> list[str]:
    out = []
    for name in VARIANTS:
        rec = Latency.of(res[name]["times"]["recall"])
        emb = Latency.of(res[name]["times"]["embed"])
        out.append(
            f"- `{name}` (OMP_WAIT_POLICY {res[name]['policy']}): recall p95 {rec.p95:.1f} ms ÷ bare embedding p50 "
            f"{emb.p50:.1f} ms = **{rec.p95 / emb.p50:.2f}×** (issue 2's target: ≤ 3×)."
        )
    return out


def report(
    res: dict[str, dict[str, Any]],
    command: str,
    started: datetime,
    size: int,
    loads: tuple[str, str],
    previous: str,
) -> str:
    info = machine()
    keep = "<!-- Hand-written notes below this line are kept when bench/openmp.py rewrites this file. -->"
    kept = previous.split(keep, 1)[1] if keep in previous else "\n"
    versions = ", ".join(f"{k} {info[k]}" for k in PACKAGES)
    body = "\n".join([*table(res), "", *ratios(res)])
    return f"""# OpenMP idle policy: sleeping against spinning workers

Generated by `bench/openmp.py`; do not edit above the marker at the end.

- Command: `{command}`
- Date: {started:%Y-%m-%d %H:%M} UTC; store: {size:,} memories (the core benchmark's corpus and scopes)
- Machine: {info["cores"]} cores, {info["cpu"]}, {info["ram"]} RAM; Python {info["python"]}; {versions}
- Load average (1/5/15 min) at start: {loads[0]}; at end: {loads[1]}

Each variant runs in its own process (the policy is read when torch loads); the processes alternate, in a shuffled
order per round, over the same store. Inside a process, recalls, bare embeddings and single writes are
interleaved in a shuffled order. `sleep` is Mnemograph's default (`OMP_WAIT_POLICY=PASSIVE`, set by the
embedder unless you set `OMP_WAIT_POLICY` or `GOMP_SPINCOUNT` yourself); `spin` is libgomp's own default
(`GOMP_SPINCOUNT=300000`, what torch does in any program that sets nothing).

{body}

{keep}{kept}"""


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=int, default=100_000, help="memories in the store (default 100,000)")
    p.add_argument("--rounds", type=int, default=4, help="processes per variant")
    p.add_argument("--n", type=int, default=60, help="recalls (and embeddings, writes) per process")
    p.add_argument("--cache", type=Path, help="persistent cache for the corpus vectors (as in bench/core.py)")
    p.add_argument("--store", type=Path, help="reuse (or create) the loaded store here instead of a temp dir")
    p.add_argument("--out", type=Path, default=DOC)
    p.add_argument("--no-write", action="store_true", help="print the table only")
    p.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.seed, args.n)))
        return
    command = shlex.join(["python", "bench/openmp.py", *(argv if argv is not None else sys.argv[1:])])
    started, load_start = datetime.now(UTC), load()
    with tempfile.TemporaryDirectory(prefix="mnemograph-openmp-") as tmp:
        path = args.store or Path(tmp) / "store"
        if not path.exists():
            log(f"loading {args.size:,} memories into {path}")
            build(path, args.size, args.cache)
        res = run_children(path, args.rounds, args.n)
    print("\n".join(table(res)))
    print("\n".join(ratios(res)))
    if not args.no_write:
        previous = args.out.read_text() if args.out.exists() else ""
        args.out.write_text(report(res, command, started, args.size, (load_start, load()), previous))
        log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
