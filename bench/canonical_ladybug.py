"""Kùzu 0.11 against ladybug (its maintained fork) as the embedded canonical store, through storage's public API.

Each library runs in its own virtual environment, as a subprocess of this script, and the two alternate round by
round in the same run (so machine noise hits both alike). ladybug is installed in place of kuzu and loaded under
the name ``kuzu`` by a two-line shim package this script writes on PYTHONPATH: the repository is not edited.

    # the project's venv (make install) has kuzu; a second one has ladybug instead:
    python3 -m venv /tmp/lb-venv && /tmp/lb-venv/bin/pip install torch==2.13.0 && \\
        /tmp/lb-venv/bin/pip install -e '.[dev]' && /tmp/lb-venv/bin/pip uninstall -y kuzu && \\
        /tmp/lb-venv/bin/pip install ladybug
    .venv/bin/python bench/canonical_ladybug.py                  # writes docs/benchmarks/ladybug.md
    .venv/bin/python bench/canonical_ladybug.py --n 500 --no-write   # smoke run, prints only

Per library and round: open a new data directory, ingest ``--n`` memories with ``write_many``, single writes,
recalls, close, and reopen the full store. Every text is embedded before the clock starts (a warmed
``CachedEmbedder``), so the numbers are the stores' and the engine's, not MiniLM's. Then the file-compatibility
and migration checks: ladybug opening a Kùzu data directory, ladybug IMPORT DATABASE of a Kùzu EXPORT DATABASE,
and ``export`` (JSON Lines) from Kùzu then ``import`` into ladybug, with ``verify`` and a recall compared.
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
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DOC = ROOT / "docs" / "benchmarks" / "ladybug.md"
USERS = 10
BATCH = 256
SHIM = '''"""Benchmark shim: ``import kuzu`` loads ladybug (Kùzu's maintained fork, API-compatible)."""
import sys

import ladybug

sys.modules[__name__] = ladybug
'''


# -- the worker (runs inside one library's venv) --------------------------------------------------------------


def drop_statements_on_close() -> None:
    """The adapter change ladybug needs (docs/dependencies.md), applied here without editing storage/: when the
    store closes its connections, forget their cached prepared statements. ladybug keeps a closed database alive
    (file open, not checkpointed, 8 TiB of address space reserved) while one of its statements lives; Kùzu 0.11
    does not, so the change is harmless there."""
    try:
        from storage.adapters.kuzu import _cypher
        from storage.adapters.kuzu.store import GraphStore
    except ImportError:  # a checkout from before the storage layout (issue 16)
        import storage._kuzu as _cypher  # type: ignore[no-redef]
        from storage._kuzu import GraphStore  # type: ignore[no-redef,attr-defined]

    original = GraphStore._close_connections

    def close_connections(self: Any) -> None:
        with self._readers_lock:
            conns = [*self._readers, self._writer]
        original(self)
        for conn in conns:
            _cypher._PREPARED.pop(conn, None)

    GraphStore._close_connections = close_connections  # type: ignore[method-assign]


def _engine(path: Path, emb: Any) -> Any:
    from storage import Engine

    return Engine.open(path, embedder=emb, warm=False)


def _library() -> dict[str, str]:
    import kuzu

    return {"module": kuzu.__name__, "version": str(getattr(kuzu, "__version__", "?"))}


def _embedder(texts: list[str]) -> Any:
    from storage import CachedEmbedder, MiniLMEmbedder

    emb = CachedEmbedder(MiniLMEmbedder(), capacity=len(texts) + 1000)
    for i in range(0, len(texts), BATCH):
        emb.embed(texts[i : i + BATCH])
    return emb


def _texts(n: int, writes: int, recalls: int) -> tuple[list[str], list[str], list[str]]:
    sys.path.insert(0, str(HERE))
    from _common import Sentences

    s = Sentences(7)  # the same texts in every process
    return s.memories(n), s.memories(writes), s.questions(recalls)


def _ms(seconds: list[float]) -> dict[str, float]:
    ms = sorted(x * 1000 for x in seconds)
    return {"p50": statistics.median(ms), "p95": ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]}


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def worker_bench(data: Path, n: int, writes: int, recalls: int) -> dict[str, Any]:
    from storage import Engine, WriteItem

    assert Engine  # imported now: the library imports (over a second) are not the store's open time

    corpus, singles, questions = _texts(n, writes, recalls)
    emb = _embedder(corpus + singles + questions)
    out: dict[str, Any] = {"library": _library()}
    start = time.perf_counter()
    engine = _engine(data, emb)
    out["open_new_ms"] = (time.perf_counter() - start) * 1000
    for j in range(USERS):
        engine.create_scope(f"user:u{j:02d}", parent="team:core")
    items = [WriteItem(t, [f"user:u{i % USERS:02d}"]) for i, t in enumerate(corpus)]
    start = time.perf_counter()
    for i in range(0, len(items), BATCH):
        engine.write_many(items[i : i + BATCH])
    out["ingest_per_s"] = n / (time.perf_counter() - start)
    engine.reconciler.wait_projected(120)
    spans = []
    for i, text in enumerate(singles):
        t0 = time.perf_counter()
        engine.write(text, [f"user:u{i % USERS:02d}"])
        spans.append(time.perf_counter() - t0)
    out["write"] = _ms(spans)
    engine.reconciler.wait_projected(120)
    spans, hits = [], 0
    for i, q in enumerate(questions):
        t0 = time.perf_counter()
        got = engine.recall(q, [f"user:u{i % USERS:02d}"], k=10)
        spans.append(time.perf_counter() - t0)
        hits += bool(got)
    out["recall"] = _ms(spans)
    out["recall_nonempty"] = hits
    out["verify_ok"] = engine.verify().ok
    start = time.perf_counter()
    engine.close()
    out["close_ms"] = (time.perf_counter() - start) * 1000
    start = time.perf_counter()
    engine = _engine(data, emb)
    out["reopen_ms"] = (time.perf_counter() - start) * 1000
    out["memories"] = engine.verify().canonical_memories
    engine.close()
    out["graph_bytes"] = _size(data / "graph")
    return out


def worker_open(data: Path, query: str) -> dict[str, Any]:
    """Open a data directory another library wrote; report the error, or what it holds and a recall."""
    from storage import CachedEmbedder, MiniLMEmbedder

    out: dict[str, Any] = {"library": _library()}
    try:
        engine = _engine(data, CachedEmbedder(MiniLMEmbedder()))
    except Exception as exc:  # the library's own words are the finding
        out["error"] = f"{type(exc).__name__}: {exc}"[:400]
        return out
    with engine:
        report = engine.verify()
        out.update(memories=report.canonical_memories, verify_ok=report.ok)
        out["top"] = [h.memory.id for h in engine.recall(query, ["user:u03"], k=3)]
    return out


def _graph_file(data: Path) -> Path:
    graph = data / "graph"
    current = graph / "CURRENT"
    return graph / (current.read_text().strip() if current.exists() else "graph-000001.kz")


def worker_export_db(data: Path, dest: Path) -> dict[str, Any]:
    """Kùzu's EXPORT DATABASE (parquet), as storage's rebuild uses it."""
    import kuzu

    db = kuzu.Database(str(_graph_file(data)))
    conn = kuzu.Connection(db)
    conn.execute(f"EXPORT DATABASE '{dest}' (format='parquet')")
    conn.close()
    db.close()
    return {"library": _library(), "files": sorted(p.name for p in dest.iterdir())}


def worker_import_db(export: Path, dest: Path) -> dict[str, Any]:
    """IMPORT DATABASE of another library's export into a new file; count what arrived."""
    import kuzu

    out: dict[str, Any] = {"library": _library()}
    db = kuzu.Database(str(dest))
    conn = kuzu.Connection(db)
    try:
        conn.execute(f"IMPORT DATABASE '{export}'")
        result = conn.execute("MATCH (m:Memory) RETURN count(m)")
        assert not isinstance(result, list)
        out["memories"] = int(result.get_next()[0])
        result = conn.execute("MATCH (c:Change) RETURN count(c)")
        assert not isinstance(result, list)
        out["changes"] = int(result.get_next()[0])
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"[:400]
    finally:
        conn.close()
        db.close()
    return out


def worker_export_jsonl(data: Path, dest: Path) -> dict[str, Any]:
    from storage import CachedEmbedder, MiniLMEmbedder

    start = time.perf_counter()
    with _engine(data, CachedEmbedder(MiniLMEmbedder())) as engine, dest.open("w") as fh:
        summary = engine.export(fh, vectors=True)
    return {"library": _library(), "seconds": time.perf_counter() - start, "summary": repr(summary)[:200]}


def worker_import_jsonl(source: Path, dest: Path) -> dict[str, Any]:
    from storage import CachedEmbedder, Engine, MiniLMEmbedder

    start = time.perf_counter()
    with source.open() as fh:
        summary = Engine.import_export(dest, fh, embedder=CachedEmbedder(MiniLMEmbedder()))
    return {"library": _library(), "seconds": time.perf_counter() - start, "summary": repr(summary)[:200]}


def worker(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("mode")
    p.add_argument("paths", nargs="*", type=Path)
    p.add_argument("--n", type=int, default=0)
    p.add_argument("--writes", type=int, default=0)
    p.add_argument("--recalls", type=int, default=0)
    p.add_argument("--query", default="")
    p.add_argument("--as-is", action="store_true")
    a = p.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    if not a.as_is:
        drop_statements_on_close()
    if a.mode == "bench":
        out = worker_bench(a.paths[0], a.n, a.writes, a.recalls)
    elif a.mode == "open":
        out = worker_open(a.paths[0], a.query)
    elif a.mode == "export-db":
        out = worker_export_db(a.paths[0], a.paths[1])
    elif a.mode == "import-db":
        out = worker_import_db(a.paths[0], a.paths[1])
    elif a.mode == "export-jsonl":
        out = worker_export_jsonl(a.paths[0], a.paths[1])
    else:
        out = worker_import_jsonl(a.paths[0], a.paths[1])
    print("RESULT " + json.dumps(out))
    return 0


# -- the orchestrator ------------------------------------------------------------------------------------------


class Runner:
    def __init__(self, pythons: dict[str, str], shim: Path, as_is: bool) -> None:
        self.pythons = pythons
        self.shim = shim
        self.as_is = as_is

    def __call__(self, lib: str, *args: str) -> dict[str, Any]:
        env = dict(os.environ, HF_HUB_OFFLINE="1")
        if lib == "ladybug":
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(self.shim), env.get("PYTHONPATH", "")]))
        proc = subprocess.run(
            [
                self.pythons[lib],
                str(Path(__file__).resolve()),
                "--worker",
                *args,
                *(["--as-is"] if self.as_is else []),
            ],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        for line in proc.stdout.splitlines():
            if line.startswith("RESULT "):
                return dict(json.loads(line[len("RESULT ") :]))
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"error": f"worker exited {proc.returncode}: {' / '.join(tail)}"[:600]}


def median(rounds: list[dict[str, Any]], *keys: str) -> float:
    values = []
    for r in rounds:
        v: Any = r
        for k in keys:
            v = v[k]
        values.append(float(v))
    return statistics.median(values)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kuzu-python", default=str(ROOT / ".venv" / "bin" / "python"))
    p.add_argument("--ladybug-python", default="/tmp/lb-venv/bin/python")
    p.add_argument("--n", type=int, default=3000, help="memories ingested per store")
    p.add_argument("--writes", type=int, default=200)
    p.add_argument("--recalls", type=int, default=200)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks alone")
    p.add_argument(
        "--as-is", action="store_true", help="without the statement fix (ladybug then never closes)"
    )
    a = p.parse_args()
    sys.path.insert(0, str(HERE))
    from _common import load, machine

    started, load_before = time.perf_counter(), load()
    with tempfile.TemporaryDirectory(prefix="ladybug-bench-") as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "shim" / "kuzu").mkdir(parents=True)
        (tmp / "shim" / "kuzu" / "__init__.py").write_text(SHIM)
        run = Runner({"kuzu": a.kuzu_python, "ladybug": a.ladybug_python}, tmp / "shim", a.as_is)
        rounds: dict[str, list[dict[str, Any]]] = {"kuzu": [], "ladybug": []}
        sizes = ("--n", str(a.n), "--writes", str(a.writes), "--recalls", str(a.recalls))
        for r in range(a.rounds):
            for lib in ("kuzu", "ladybug") if r % 2 == 0 else ("ladybug", "kuzu"):
                res = run(lib, "bench", str(tmp / f"{lib}-{r}"), *sizes)
                print(f"round {r} {lib}: {json.dumps(res)}", flush=True)
                if "error" in res:
                    print(f"{lib} failed: {res['error']}", file=sys.stderr)
                    return 1
                rounds[lib].append(res)
        compat = migrations(run, tmp)
    took = time.perf_counter() - started
    text = report(a, rounds, compat, machine(), load_before, took)
    print(text)
    if not a.no_write:
        DOC.write_text(text)
        print(f"wrote {DOC}")
    return 0


def migrations(run: Runner, tmp: Path) -> dict[str, dict[str, Any]]:
    """What an existing Kùzu data directory needs before ladybug can serve it (and the reverse)."""
    query = "What does Ana usually drink near the office?"
    out: dict[str, dict[str, Any]] = {}
    for lib in ("kuzu", "ladybug"):  # copies: a failed open must not be able to change the original
        shutil.copytree(tmp / "kuzu-0", tmp / f"kuzu-dir-for-{lib}")
    out["kuzu opens its own data dir"] = run("kuzu", "open", str(tmp / "kuzu-dir-for-kuzu"), "--query", query)
    out["ladybug opens a kuzu data dir"] = run(
        "ladybug", "open", str(tmp / "kuzu-dir-for-ladybug"), "--query", query
    )
    shutil.copytree(tmp / "ladybug-0", tmp / "ladybug-dir-for-kuzu")
    out["kuzu opens a ladybug data dir"] = run(
        "kuzu", "open", str(tmp / "ladybug-dir-for-kuzu"), "--query", query
    )
    out["kuzu EXPORT DATABASE"] = run("kuzu", "export-db", str(tmp / "kuzu-0"), str(tmp / "kuzu-export"))
    out["ladybug IMPORT DATABASE of it"] = run(
        "ladybug", "import-db", str(tmp / "kuzu-export"), str(tmp / "lb.kz")
    )
    out["kuzu IMPORT DATABASE of it (control)"] = run(
        "kuzu", "import-db", str(tmp / "kuzu-export"), str(tmp / "kz.kz")
    )
    # In place: only the canonical file changes; the projections and their watermarks stay (seq numbers carry over).
    shutil.copytree(tmp / "kuzu-0", tmp / "in-place")
    out["ladybug IMPORT into the data dir's graph/"] = run(
        "ladybug", "import-db", str(tmp / "kuzu-export"), str(tmp / "in-place" / "graph" / "graph-000002.kz")
    )
    (tmp / "in-place" / "graph" / "CURRENT").write_text("graph-000002.kz")
    out["ladybug opens that data dir"] = run("ladybug", "open", str(tmp / "in-place"), "--query", query)
    out["mnemograph export (kuzu)"] = run("kuzu", "export-jsonl", str(tmp / "kuzu-0"), str(tmp / "all.jsonl"))
    out["mnemograph import (ladybug)"] = run(
        "ladybug", "import-jsonl", str(tmp / "all.jsonl"), str(tmp / "migrated")
    )
    out["ladybug opens the imported dir"] = run("ladybug", "open", str(tmp / "migrated"), "--query", query)
    for k, v in out.items():
        print(f"{k}: {json.dumps(v)}", flush=True)
    return out


def report(
    a: argparse.Namespace,
    rounds: dict[str, list[dict[str, Any]]],
    compat: dict[str, dict[str, Any]],
    info: dict[str, str],
    load_before: str,
    took: float,
) -> str:
    k, lb = rounds["kuzu"], rounds["ladybug"]
    versions = {lib: f"{r[0]['library']['module']} {r[0]['library']['version']}" for lib, r in rounds.items()}
    rows = [
        ("open a new data dir (ms)", ("open_new_ms",), False),
        (f"ingest {a.n} memories, write_many x{BATCH} (memories/s)", ("ingest_per_s",), True),
        ("single write p50 (ms)", ("write", "p50"), False),
        ("single write p95 (ms)", ("write", "p95"), False),
        ("recall p50 (ms)", ("recall", "p50"), False),
        ("recall p95 (ms)", ("recall", "p95"), False),
        ("close (ms)", ("close_ms",), False),
        (f"reopen the {a.n + a.writes}-memory store (ms)", ("reopen_ms",), False),
        ("canonical files on disk (MiB)", ("graph_bytes",), False),
    ]
    lines = [
        "# Kùzu against ladybug as the embedded canonical store",
        "",
        "Written by `bench/canonical_ladybug.py` (see its docstring for the two venvs). Each library runs in its",
        "own process and venv; they alternate round by round in one run; values are the median over rounds,",
        "ratio = ladybug / kuzu (below 1 is faster or smaller for time and size, above 1 is better for "
        "memories/s).",
        "Every text is embedded before the clock starts, so the embedder is not measured.",
        "Both run with storage's cached prepared statements dropped at close (`drop_statements_on_close`), the",
        "adapter change ladybug needs; `--as-is` runs without it."
        if not a.as_is
        else "Run `--as-is`: ladybug's close leaves the database open (see docs/dependencies.md).",
        "",
        f"Command: `python bench/canonical_ladybug.py --n {a.n} --writes {a.writes} --recalls {a.recalls} "
        f"--rounds {a.rounds}{' --as-is' if a.as_is else ''}`; run took {took:.0f} s; load average before: "
        f"{load_before}.",
        "",
        "Machine: "
        + ", ".join(f"{key} {v}" for key, v in info.items() if key in ("cores", "cpu", "ram", "python"))
        + f". Libraries: {versions['kuzu']} and {versions['ladybug']} (imported as `kuzu`).",
        "",
        f"| measure | {versions['kuzu']} | {versions['ladybug']} | ratio |",
        "|---|---|---|---|",
    ]
    for label, keys, _higher_better in rows:
        kv, lv = median(k, *keys), median(lb, *keys)
        if keys == ("graph_bytes",):
            kv, lv = kv / 2**20, lv / 2**20
        lines.append(f"| {label} | {kv:.1f} | {lv:.1f} | {lv / kv:.2f} |")
    lines += [
        "",
        f"Both: verify clean after every round (kuzu {[r['verify_ok'] for r in k]}, ladybug "
        f"{[r['verify_ok'] for r in lb]}); recalls with at least one hit: kuzu {[r['recall_nonempty'] for r in k]}, "
        f"ladybug {[r['recall_nonempty'] for r in lb]} of {a.recalls}.",
        "",
        "## File compatibility and migration",
        "",
        "| step (separate processes: kuzu and ladybug cannot share one) | outcome |",
        "|---|---|",
    ]
    for step, res in compat.items():
        shown = {key: v for key, v in res.items() if key != "library"}
        text = json.dumps(shown, ensure_ascii=False).replace("|", "\\|")
        lines.append(f"| {step} | {text} |")
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        sys.exit(worker(sys.argv[2:]))
    sys.exit(main())
