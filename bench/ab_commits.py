"""A/B latency check between two commits: recall and single-write latency, measured in one run, interleaved.

    .venv/bin/python bench/ab_commits.py --base /work/base-0a7 --main /work/main \
        --n 10000 --recalls 200 --writes 40 --rounds 4 --out docs/benchmarks/ab-issue12.md

Three variants, each in its own long-lived child process (``PYTHONPATH=<checkout>``, ``cwd=<checkout>``, so
``import storage`` resolves to that checkout; each child reports ``storage.__file__``):

* ``base``        the baseline checkout with its default embedder (torch sentence-transformers)
* ``main-numpy``  the current checkout with its default embedder (``MiniLMEmbedder()``, numpy runtime)
* ``main-torch``  the current checkout with ``MiniLMEmbedder(runtime="torch")``

Each child builds its own store of N memories (the same texts and the same precomputed vectors for all:
the vectors are embedded once by the base child and saved), scopes as in bench/core.py (20 users under one
team). The parent then runs rounds; in every round each variant, in a rotating order, runs a block of R
recalls (recipe ``default``, k=10, the user's scope, distinct queries -- the same queries for every variant,
so the query embedding is included and never cached) and a block of W single ``Engine.write`` calls (time
until acknowledged; the projections are let settle, untimed, after each write). Latencies are per call, in
milliseconds, measured inside the child with ``time.perf_counter``. After each recall block the child also embeds
the same queries bare, one at a time: the table gives recall p95 against that embedding's p50 (issue #17's
yardstick: at most 3×), measured under the same load.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

SEED = 12
USERS = 20
TEAM = "team:ab"
KINDS = ("note", "fact", "preference", "event")
CHUNK = 1024


def user(i: int) -> str:
    return f"user:u{i % USERS:02d}"


# -- child ------------------------------------------------------------------------------------------------


def child(runtime: str | None) -> None:
    """Serve JSON-line commands on stdin; answer on the original stdout (library chatter goes to stderr)."""
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    import numpy as np

    import storage
    from storage import CachedEmbedder, Engine, MiniLMEmbedder, WriteItem

    model = MiniLMEmbedder() if runtime is None else MiniLMEmbedder(runtime=runtime)
    engine = None
    statements = _count_kuzu_statements()

    def settle() -> None:
        while not engine.reconciler.wait_projected(60):
            pass

    def reply(obj: dict) -> None:
        out.write(json.dumps(obj) + "\n")

    reply({"ready": True, "storage": storage.__file__, "runtime": getattr(model, "runtime", "torch (only)")})
    for line in sys.stdin:
        cmd = json.loads(line)
        op = cmd["op"]
        if op == "embed":
            texts = json.loads(Path(cmd["texts"]).read_text())
            t = time.perf_counter()
            vecs = np.asarray(model.embed(texts), dtype=np.float32)
            np.save(cmd["dest"], vecs)
            reply({"seconds": time.perf_counter() - t})
        elif op == "build":
            texts = json.loads(Path(cmd["texts"]).read_text())
            vecs = np.load(cmd["vectors"])
            engine = Engine.open(Path(cmd["path"]), embedder=CachedEmbedder(model), warm=False)
            for j in range(USERS):
                engine.create_scope(user(j), parent=TEAM)
            import random

            rng = random.Random(len(texts))
            t = time.perf_counter()
            for lo in range(0, len(texts), CHUNK):
                engine.write_many(
                    [
                        WriteItem(
                            texts[i],
                            [TEAM if rng.random() < 0.1 else user(rng.randrange(USERS))],
                            KINDS[i % 4],
                            vector=[float(x) for x in vecs[i % len(vecs)]],
                        )
                        for i in range(lo, min(lo + CHUNK, len(texts)))
                    ]
                )
            settle()
            model.embed(["warm up the model"])
            reply({"seconds": time.perf_counter() - t})
        elif op == "open":
            t = time.perf_counter()
            engine = Engine.open(Path(cmd["path"]), embedder=CachedEmbedder(model), warm=False)
            settle()
            model.embed(["warm up the model"])
            reply({"seconds": time.perf_counter() - t})
        elif op == "recall":
            times, empty, answers = [], 0, []
            cpu = time.process_time()
            before = statements()
            for i, q in enumerate(cmd["queries"]):
                t = time.perf_counter()
                hits = engine.recall(q, [user(i)], k=10)
                times.append((time.perf_counter() - t) * 1000)
                empty += not hits
                answers.append([h.memory.id for h in hits])
            stmts = (statements() - before) / len(times)
            # CPU time of every thread of the process per recall: the work done, which a busy machine
            # disturbs far less than the wall time.
            cpu_ms = (time.process_time() - cpu) * 1000 / len(times)
            # The bare query embedding of the same queries, one at a time, right after: the yardstick of
            # issue #17 (recall p95 <= 3x the embedding's p50), measured under the same load.
            embed = []
            for q in cmd["queries"]:
                t = time.perf_counter()
                model.embed([q])
                embed.append((time.perf_counter() - t) * 1000)
            reply(
                {"ms": times, "empty": empty, "cpu": cpu_ms, "embed": embed, "stmts": stmts, "ids": answers}
            )
        elif op == "write":
            times = []
            for i, text in enumerate(cmd["texts"]):
                t = time.perf_counter()
                engine.write(text, [user(i)], kind=KINDS[i % 4])
                times.append((time.perf_counter() - t) * 1000)
                settle()
            reply({"ms": times})
        elif op == "quit":
            if engine is not None:
                engine.close()
            reply({"bye": True})
            return


def _count_kuzu_statements():
    """Count every ``kuzu.Connection.execute`` of this process, on every thread (the graph lane reads on workers):
    returns a function giving the count so far."""
    import threading

    import kuzu

    lock, n = threading.Lock(), [0]
    original = kuzu.Connection.execute

    def counted(self, *args, **kwargs):
        with lock:
            n[0] += 1
        return original(self, *args, **kwargs)

    kuzu.Connection.execute = counted
    return lambda: n[0]


# -- parent -----------------------------------------------------------------------------------------------


class Child:
    def __init__(self, name: str, checkout: Path, runtime: str | None, python: str) -> None:
        self.name = name
        env = dict(os.environ, PYTHONPATH=str(checkout))
        argv = [python, str(Path(__file__).resolve()), "--child"] + (
            ["--runtime", runtime] if runtime else []
        )
        self.proc = subprocess.Popen(
            argv, cwd=checkout, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
        )
        self.hello = self.read()

    def send(self, **cmd: object) -> None:
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()

    def read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.name}: child exited ({self.proc.wait()})")
        return json.loads(line)

    def ask(self, **cmd: object) -> dict:
        self.send(**cmd)
        return self.read()


def q(values: list[float], p: float) -> float:
    s = sorted(values)
    k = (len(s) - 1) * p
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def log(msg: str) -> None:
    print(f"[{datetime.now(UTC):%H:%M:%S}] {msg}", file=sys.stderr, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--runtime")
    ap.add_argument("--base", default="/work/base-0a7")
    ap.add_argument("--main", default=str(Path(__file__).resolve().parents[1]))
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--recalls", type=int, default=200)
    ap.add_argument("--writes", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--pool", type=int, help="embed only this many texts and reuse their vectors in turn")
    ap.add_argument("--variants", default="base,main-numpy,main-torch", help="comma-separated subset")
    ap.add_argument(
        "--reuse", help="a previous run's directory: open its stores instead of building new ones"
    )
    ap.add_argument("--out")
    ap.add_argument(
        "--title", default="A/B: recall and write latency, baseline 0a747b1 vs. current main (issue 12)"
    )
    a = ap.parse_args()
    if a.child:
        child(a.runtime)
        return

    sys.path.insert(0, str(Path(a.main) / "bench"))
    from _common import Sentences  # identical in both checkouts

    started = datetime.now(UTC)
    load_before = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    src = Sentences(SEED)
    texts = src.memories(a.n)
    warm_q, warm_w = src.questions(a.warmup), src.memories(a.warmup // 2)
    rounds = [(src.questions(a.recalls), src.memories(a.writes)) for _ in range(a.rounds)]

    tmp = Path(a.reuse) if a.reuse else Path(tempfile.mkdtemp(prefix="ab-commits-"))
    (tmp / "texts.json").write_text(json.dumps(texts))
    variants = [
        ("base", Path(a.base), None),
        ("main-numpy", Path(a.main), None),
        ("main-torch", Path(a.main), "torch"),
    ]
    variants = [v for v in variants if v[0] in a.variants.split(",")]
    kids = []
    if a.reuse:
        missing = [name for name, _, _ in variants if not (tmp / name).is_dir()]
        if missing:  # opening would create an empty store, and its empty recalls would pass for fast ones
            raise SystemExit(f"--reuse {tmp} has no store for {', '.join(missing)}; drop it from --variants")
    for name, checkout, runtime in variants:
        c = Child(name, checkout, runtime, a.python)
        log(f"{name}: storage from {c.hello['storage']}, runtime {c.hello['runtime']}")
        kids.append(c)
    if a.reuse:  # the stores of an earlier run with the same --n: opened, not rebuilt (each by its own code)
        for c in kids:
            log(f"{c.name}: opened in {c.ask(op='open', path=str(tmp / c.name))['seconds']:.0f} s")
    else:
        pool = min(a.pool or a.n, a.n)
        (tmp / "pool.json").write_text(json.dumps(texts[:pool]))
        log(f"embedding {pool:,} texts once ({kids[0].name} child) ...")
        r = kids[0].ask(op="embed", texts=str(tmp / "pool.json"), dest=str(tmp / "vectors.npy"))
        log(f"  {r['seconds']:.0f} s")
        for c in kids:  # build the three stores concurrently (untimed)
            c.send(
                op="build",
                texts=str(tmp / "texts.json"),
                vectors=str(tmp / "vectors.npy"),
                path=str(tmp / c.name),
            )
        for c in kids:
            log(f"{c.name}: built in {c.read()['seconds']:.0f} s")
    for c in kids:  # warm-up, discarded
        c.ask(op="recall", queries=warm_q)
        c.ask(op="write", texts=warm_w)

    rec: dict[str, list[float]] = {c.name: [] for c in kids}
    emb: dict[str, list[float]] = {c.name: [] for c in kids}
    wr: dict[str, list[float]] = {c.name: [] for c in kids}
    per_round: dict[str, list[float]] = {c.name: [] for c in kids}
    cpu: dict[str, list[float]] = {c.name: [] for c in kids}
    empty: dict[str, int] = {c.name: 0 for c in kids}
    stmts: dict[str, list[float]] = {c.name: [] for c in kids}
    differ: dict[str, int] = {c.name: 0 for c in kids}  # recalls whose ids differ from the first variant's
    for rnd, (queries, writes) in enumerate(rounds):
        order = kids[rnd % len(kids) :] + kids[: rnd % len(kids)]
        if rnd % 2:
            order = order[::-1]
        ids: dict[str, list[list[str]]] = {}
        for c in order:
            r = c.ask(op="recall", queries=queries)
            stmts[c.name].append(r["stmts"])
            ids[c.name] = r["ids"]
            rec[c.name] += r["ms"]
            emb[c.name] += r["embed"]
            per_round[c.name].append(q(r["ms"], 0.5))
            cpu[c.name].append(r["cpu"])
            empty[c.name] += r["empty"]
            wr[c.name] += c.ask(op="write", texts=writes)["ms"]
        for c in kids:
            differ[c.name] += sum(x != y for x, y in zip(ids[kids[0].name], ids[c.name], strict=True))
        log(f"round {rnd + 1}: " + ", ".join(f"{n} recall p50 {v[-1]:.1f} ms" for n, v in per_round.items()))
    for c in kids:
        c.ask(op="quit")
        c.proc.wait()
    load_after = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()

    lines = [
        "| variant | recall p50 | recall p95 | recall p99 | p50 / base | p95 / base | p99 / base | recall CPU "
        "| CPU / base | embedding p50 | recall p95 ÷ embedding p50 | write p50 | write p95 | p50 / base "
        "| p95 / base | Kùzu statements / recall | recalls whose ids differ from base |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    b = {
        "r50": q(rec["base"], 0.5),
        "r95": q(rec["base"], 0.95),
        "r99": q(rec["base"], 0.99),
        "w50": q(wr["base"], 0.5),
        "w95": q(wr["base"], 0.95),
        "cpu": q(cpu["base"], 0.5),
    }
    for c in kids:
        r50, r95, w50, w95 = (
            q(rec[c.name], 0.5),
            q(rec[c.name], 0.95),
            q(wr[c.name], 0.5),
            q(wr[c.name], 0.95),
        )
        r99, e50 = q(rec[c.name], 0.99), q(emb[c.name], 0.5)
        lines.append(
            f"| {c.name} | {r50:.1f} | {r95:.1f} | {r99:.1f} | {r50 / b['r50']:.2f}× | {r95 / b['r95']:.2f}× "
            f"| {r99 / b['r99']:.2f}× | {q(cpu[c.name], 0.5):.1f} | {q(cpu[c.name], 0.5) / b['cpu']:.2f}× "
            f"| {e50:.1f} | {r95 / e50:.2f}× "
            f"| {w50:.1f} | {w95:.1f} | {w50 / b['w50']:.2f}× | {w95 / b['w95']:.2f}× "
            f"| {sum(stmts[c.name]) / len(stmts[c.name]):.2f} | {differ[c.name]} |"
        )
    rounds_line = "; ".join(f"{n}: " + " / ".join(f"{v:.1f}" for v in vals) for n, vals in per_round.items())
    table = "\n".join(lines)
    print(table)
    print(f"recall p50 per round (ms): {rounds_line}")
    print(f"empty recalls: {empty}")
    print(f"load before: {load_before}\nload after:  {load_after}")
    if a.out:
        cmd = "python bench/ab_commits.py " + " ".join(
            f"--{k} {v}"
            for k, v in (
                ("base", a.base),
                ("main", a.main),
                ("n", a.n),
                ("recalls", a.recalls),
                ("writes", a.writes),
                ("rounds", a.rounds),
                ("pool", a.pool),
                ("reuse", a.reuse),
                ("variants", a.variants),
            )
            if v is not None
        )
        body = [
            f"# {a.title}",
            "",
            f"Command: `{cmd} --out {a.out}` (run with /work/main/.venv python)",
            f"Date: {started:%Y-%m-%d %H:%M} UTC. Store size N = {a.n:,}; {a.rounds} rounds; per round and variant "
            f"{a.recalls} recalls (recipe default, k=10, a user scope under one team) and {a.writes} single writes.",
            f"Machine: {os.cpu_count()} cores, shared. `uptime` before: `{load_before}`; after: `{load_after}`.",
            "",
            "Children: "
            + "; ".join(f"{c.name} → `{c.hello['storage']}` (runtime {c.hello['runtime']})" for c in kids),
            "",
            "Latencies in ms per call, all rounds pooled (recall includes the query embedding; write is the time "
            "until `Engine.write` returned, i.e. acknowledged, with the projections settled untimed between writes). "
            "Recall CPU: the child's CPU time (all threads) per recall, median of the per-round blocks. Kùzu "
            "statements: `kuzu.Connection.execute` calls per recall, all threads, mean over the blocks. Ids that "
            "differ: recalls (of the same queries in the same scopes) whose ranked ids are not the first variant's.",
            "",
            table,
            "",
            f"Recall p50 per round (ms): {rounds_line}.",
            f"Empty recalls: {empty}.",
            "",
            "<!-- interpretation -->",
        ]
        Path(a.out).write_text("\n".join(body) + "\n")


if __name__ == "__main__":
    main()
