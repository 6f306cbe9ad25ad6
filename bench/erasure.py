"""Erasure benchmark: ``erase`` of one memory and ``purge`` of a 10-memory scope at a store size, with one client
recalling and one writing in a loop meanwhile; the longest single recall and write while the erasure ran is the
stall they saw. Old and new code in the same run: each variant runs in its own process on a copy of the same
store, the old one from a checkout of the starting commit.

    git worktree add /tmp/erase-old 8bbfbdc          # the old code, once
    python bench/erasure.py --sizes 10000 --old /tmp/erase-old --out docs/benchmarks/erasure.md
    python bench/erasure.py --quick                   # 2,000 memories, this code only, prints only
    python bench/erasure.py --sizes 100000 --build /tmp/s100k/store   # build a store once and keep it ...
    python bench/erasure.py --sizes 100000 --store /tmp/s100k/store   # ... then run the variants on copies of it

Stores are filled with supplied random unit vectors (the embedding is not what is measured); recall embeds its
query (warm model, a rotating set of 40 questions, so the cache answers after the first round).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DOC = ROOT / "docs" / "benchmarks" / "erasure.md"
LIMIT_S = 1200  # per variant: erase + purge under load (at 100,000 memories each takes about a minute)


def build(path: Path, n: int, progress: int = 0) -> float:
    """A store of ``n`` memories in 20 user scopes, settled and maintained; returns memories/s acknowledged.

    Filled through the bulk path (``write_many`` calls of ``BULK_CHUNK`` writes: one transaction each, the same
    rows as single writes), which is what lets 100,000 and more be measured at all. ``progress``: print the fill
    rate every that many chunks."""
    sys.path[:0] = [str(ROOT), str(HERE)]
    from _common import Sentences

    from storage import CachedEmbedder, Engine, MiniLMEmbedder, WriteItem
    from storage.engine.writes import BULK_CHUNK

    texts = Sentences(11).memories(n)
    rng = np.random.default_rng(n)
    vecs = rng.standard_normal((n, 384)).astype("float32")
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    with Engine.open(path, embedder=CachedEmbedder(MiniLMEmbedder()), warm=False) as eng:
        start = time.perf_counter()
        for lo in range(0, n, BULK_CHUNK):
            eng.write_many(
                [
                    WriteItem(texts[i], [f"user:u{i % 20:02d}"], vector=vecs[i])
                    for i in range(lo, min(n, lo + BULK_CHUNK))
                ]
            )
            if progress and (lo // BULK_CHUNK + 1) % progress == 0:
                done = min(n, lo + BULK_CHUNK)
                print(f"  {done:,} written, {done / (time.perf_counter() - start):.0f}/s", flush=True)
        rate = n / (time.perf_counter() - start)
        while not eng.reconciler.wait_projected(60):
            pass
    return rate
    # Maintenance (compaction, the ANN index past 50,000 rows) runs in the projector and at close.


def child(path: Path) -> dict[str, Any]:
    """Runs in the variant's process (its code first on sys.path): erase, then purge, under load."""
    sys.path[:0] = [str(HERE)]
    from _common import Sentences

    from storage import CachedEmbedder, Engine, MiniLMEmbedder, WriteItem

    model = MiniLMEmbedder()
    eng = Engine.open(path, embedder=CachedEmbedder(model), warm=False)
    src = Sentences(99)
    questions = src.questions(40)
    rng = np.random.default_rng(5)

    def one(text: str, scope: str) -> str:
        return eng.write_many([WriteItem(text, [scope], vector=list(rng.standard_normal(384)))])[0].id

    secret = one("Ana's locker code is 4471-Q.", "user:u01")
    eng.write_many(
        [WriteItem(t, ["run:purge-me"], vector=list(rng.standard_normal(384))) for t in src.memories(10)]
    )
    eng.reconciler.wait_projected(60)
    log: dict[str, list[tuple[float, float]]] = {"recall": [], "write": []}  # (start, duration)
    stop = threading.Event()

    def recalls() -> None:
        i = 0
        while not stop.is_set():
            t = time.perf_counter()
            eng.recall(questions[i % len(questions)], [f"user:u{i % 20:02d}"], k=10)
            log["recall"].append((t, time.perf_counter() - t))
            i += 1

    def writes() -> None:
        texts = src.memories(20_000)
        i = 0
        while not stop.is_set():
            t = time.perf_counter()
            one(texts[i], f"user:u{i % 20:02d}")
            log["write"].append((t, time.perf_counter() - t))
            i += 1

    threads = [threading.Thread(target=recalls), threading.Thread(target=writes)]
    for t in threads:
        t.start()
    time.sleep(5)  # a baseline window before the erasure
    windows: dict[str, tuple[float, float]] = {}
    t0 = time.perf_counter()
    eng.erase(secret, confirm=secret)
    windows["erase"] = (t0, time.perf_counter())
    phases = {"erase": dict(getattr(eng, "last_rewrite", {}))}  # timed by the code since 9629adc
    time.sleep(3)
    t0 = time.perf_counter()
    eng.purge("run:purge-me", confirm="run:purge-me")
    windows["purge"] = (t0, time.perf_counter())
    phases["purge"] = dict(getattr(eng, "last_rewrite", {}))
    stop.set()
    for t in threads:
        t.join()
    eng.close()
    import storage

    out: dict[str, Any] = {"code": str(Path(storage.__file__).parents[1])}
    first = min(w[0] for w in windows.values())
    for op, (a, b) in windows.items():
        out[op] = {"seconds": b - a, "phases_ms": {k: v * 1000 for k, v in phases[op].items()}}
        for kind, samples in log.items():
            during = [d for s, d in samples if s < b and s + d > a]
            longest = max(((d, s) for s, d in samples if s < b and s + d > a), default=(0.0, a))
            before = [d for s, d in samples if s + d < first]
            out[op][kind] = {
                "ops": len(during),
                "max_ms": max(during, default=0.0) * 1000,
                "max_began_s": longest[1] - a,  # into the erasure's call: which phase the stall fell in
                "p50_ms": statistics.median(during) * 1000 if during else 0.0,
                "baseline_p50_ms": statistics.median(before) * 1000 if before else 0.0,
                "baseline_max_ms": max(before, default=0.0) * 1000,
            }
    return out


def run_variant(code: Path, store: Path, work: Path) -> dict[str, Any]:
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(store, work)
    env = {**os.environ, "PYTHONPATH": str(code), "HF_HUB_OFFLINE": "1"}
    try:
        proc = subprocess.run(
            [sys.executable, __file__, "--child", str(work)],
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=LIMIT_S,
        )
    except subprocess.TimeoutExpired:
        # Seen with the old code: its projector caught up "until no change is left", so under a client that
        # never stops writing the erasure's projection rebuild (queued behind that) never ran.
        shutil.rmtree(work, ignore_errors=True)
        return {"timeout": LIMIT_S}
    if proc.returncode:
        raise SystemExit(f"variant {code} failed:\n{proc.stderr[-3000:]}")
    shutil.rmtree(work, ignore_errors=True)
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def table(results: dict[int, dict[str, dict[str, Any]]]) -> str:
    lines = [
        "| memories | variant | op | seconds | recall max ms (p50) during | write max ms (p50) during | "
        "recall / write max ms before |",
        "|---:|---|---|---:|---:|---:|---:|",
    ]
    for n, variants in results.items():
        for name, res in variants.items():
            if "timeout" in res:
                lines.append(
                    f"| {n:,} | {name} | erase, purge | did not return within {res['timeout']} s | | | |"
                )
                continue
            for op in ("erase", "purge"):
                r = res[op]
                rec, wr = r["recall"], r["write"]
                lines.append(
                    f"| {n:,} | {name} | {op} | {r['seconds']:.2f} | {rec['max_ms']:.0f} ({rec['p50_ms']:.0f}) | "
                    f"{wr['max_ms']:.0f} ({wr['p50_ms']:.0f}) | "
                    f"{rec['baseline_max_ms']:.0f} / {wr['baseline_max_ms']:.0f} |"
                )
    phase_lines = [
        f"| {n:,} | {name} | {op} | "
        + ", ".join(f"{k} {v:.0f}" for k, v in res[op]["phases_ms"].items())
        + " |"
        for n, variants in results.items()
        for name, res in variants.items()
        if "timeout" not in res
        for op in ("erase", "purge")
        if res[op].get("phases_ms")
    ]
    if phase_lines:
        lines += [
            "",
            "| memories | variant | op | phases of the rewrite (ms) |",
            "|---:|---|---|---|",
            *phase_lines,
        ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--old", type=Path, help="a checkout of the old code (e.g. 8bbfbdc)")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--build", type=Path, help="only build a store of the one size here, and keep it")
    ap.add_argument("--store", type=Path, help="a store built by --build: run on copies")
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child)))
        return
    sizes = [2_000] if args.quick else [int(s) for s in args.sizes.split(",")]
    if (args.build or args.store) and len(sizes) != 1:
        raise SystemExit("--build and --store take one size (--sizes N)")
    if args.build:
        t = time.perf_counter()
        rate = build(args.build, sizes[0], progress=5)
        print(f"built {sizes[0]:,} memories in {time.perf_counter() - t:.0f} s ({rate:.0f}/s acknowledged)")
        return
    variants = {"new": ROOT, **({"old": args.old.resolve()} if args.old else {})}
    results: dict[int, dict[str, dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="erasure-bench-") as tmp:
        for n in sizes:
            store = args.store or Path(tmp) / f"store-{n}"
            if not args.store:
                t = time.perf_counter()
                rate = build(store, n)
                print(
                    f"built {n:,} memories in {time.perf_counter() - t:.0f} s ({rate:.0f}/s acknowledged)",
                    flush=True,
                )
            results[n] = {}
            for name, code in variants.items():
                results[n][name] = run_variant(code, store, Path(tmp) / f"run-{name}")
                print(name, json.dumps(results[n][name]), flush=True)
            if not args.store:
                shutil.rmtree(store)
    text = table(results)
    print(text)
    if args.out:
        args.out.write_text(
            "# Erasure beside live traffic\n\n"
            f"Command: `python bench/erasure.py {' '.join(sys.argv[1:])}`, "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores "
            f"(shared machine, load {os.getloadavg()[0]:.1f}: read ratios, not absolutes).\n\n"
            f"{text}\n\n<!-- notes -->\n"
        )


if __name__ == "__main__":
    main()
