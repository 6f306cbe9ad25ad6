"""Cold start and footprint: from ``mnemograph serve`` to the first recall answer, and the owner's resident memory,
with the numpy embedding runtime (the default) against the torch one, in the same run.

Each run: no owner is running; the clock starts before a real MCP client (the SDK's ``Client`` over stdio) spawns
``mnemograph serve`` on a store of ``--memories`` memories; it records when ``tools/list`` completes (the
handshake) and when the first ``recall`` answer arrives. Then it reads the owner's resident memory (VmRSS, and
the anonymous part alone), makes ``--calls`` more recalls and writes, waits ``--settle`` seconds and reads it
again, and stops the owner. Runs alternate between the runtimes (each first in every other round), so machine
noise hits both alike, and each run opens a fresh copy of the same store. A second table loads each runtime alone
in a fresh process (import + load + one embedding) to show where the time goes.

With ``--checkouts A,B`` it compares two source trees instead (each with the default numpy runtime): every run
spawns that checkout's ``mnemograph serve`` (``PYTHONPATH`` set to it, so the owner it starts is that checkout's
too), alternating between them (each first in every other round), each on a fresh copy of one store, and the report gives each
one's medians and B ÷ A (written to ``docs/benchmarks/coldstart-checkouts.md`` unless ``--out`` says otherwise).

Usage: ``.venv/bin/python bench/coldstart.py [--runs 5] [--memories 2000] [--out docs/benchmarks/coldstart.md]``
``.venv/bin/python bench/coldstart.py --checkouts /work/main,/work/wt-branch --runs 5``
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's directory leads sys.path, and bench/mcp.py would shadow the `mcp` SDK package.
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)
sys.path.append(str(Path(__file__).resolve().parent))

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

import anyio
from _common import machine
from mcp import Client, StdioServerParameters

from server._runtime import RuntimePaths
from server.settings import load_settings
from storage import Engine, WriteItem

ROOT = Path(__file__).resolve().parents[1]
MNEMOGRAPH = str(Path(sys.executable).parent / "mnemograph")
RUNTIMES = ("numpy", "torch")
QUERIES = [
    "who maintains the billing service",
    "which engineer is on call in week 12",
    "who works on identity",
    "payments service owner",
]


@dataclass
class Run:
    handshake: float
    first_answer: float
    rss_first: float  # MiB, right after the first answer
    anon_first: float
    rss_idle: float  # MiB, after the extra calls and the settle pause
    anon_idle: float
    first_ok: bool
    cpu_first: (
        float  # owner CPU seconds (user + system) up to the first answer: less sensitive to machine load
    )


@dataclass(frozen=True)
class Variant:
    """What one column of the report runs: an embedding runtime, or a checkout (its path on PYTHONPATH)."""

    label: str
    runtime: str = "numpy"
    checkout: str | None = None


@dataclass
class Results:
    variants: list[Variant]
    runs: dict[str, list[Run]] = field(default_factory=dict)
    loads: dict[str, list[tuple[float, float]]] = field(default_factory=dict)


def _paths(data_dir: Path) -> RuntimePaths:
    settings = load_settings({}, data_dir=str(data_dir))
    return RuntimePaths.of(settings.runtime_dir, settings.data_dir)


def _owner_pid(data_dir: Path) -> int:
    return int(json.loads(_paths(data_dir).info_file.read_text())["pid"])


def _memory(pid: int) -> tuple[float, float]:
    """(VmRSS, RssAnon) of ``pid`` in MiB."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line
    )
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["RssAnon"].split()[0]) / 1024


def _cpu(pid: int) -> float:
    """User + system CPU seconds ``pid`` has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _stop_owner(data_dir: Path) -> None:
    paths = _paths(data_dir)
    try:
        pid: int | None = int(json.loads(paths.info_file.read_text())["pid"])
    except (FileNotFoundError, ValueError, KeyError):
        pid = None
    if pid is not None:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 120
        while Path(f"/proc/{pid}").exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"owner {pid} did not stop")
            time.sleep(0.02)
    shutil.rmtree(paths.root, ignore_errors=True)


def _populate(data_dir: Path, n: int) -> None:
    teams = ["billing", "search", "payments", "identity", "mobile"]
    items = [
        WriteItem(
            f"Engineer {i} works on the {teams[i % 5]} service and is on call in week {i % 52}.", ["team:eng"]
        )
        for i in range(n)
    ]
    items.append(
        WriteItem("Priya Raman maintains the billing service since March.", ["team:eng"], kind="fact")
    )
    with Engine.open(data_dir, warm=True) as engine:
        engine.write_many(items)


async def _one_run(data_dir: Path, variant: Variant, calls: int, settle: float, run: int) -> Run:
    runtime = variant.runtime
    env = {"MNEMOGRAPH_IDLE_TIMEOUT": "300", "MNEMOGRAPH_EMBEDDER": runtime}
    env.update(
        {k: v for k, v in os.environ.items() if k in ("PYTHONPATH", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    )
    if variant.checkout is not None:
        # The checkout's `server` package ahead of the installed one, in the front and in the owner it starts.
        env["PYTHONPATH"] = variant.checkout
    params = StdioServerParameters(command=MNEMOGRAPH, args=["serve", "--data-dir", str(data_dir)], env=env)
    args = {"query": QUERIES[0], "scopes": ["team:eng"]}
    started = time.perf_counter()
    async with Client(params, mode="legacy") as client:
        await client.list_tools()
        handshake = time.perf_counter() - started
        first = await client.call_tool("recall", args)
        first_answer = time.perf_counter() - started
        text = first.content[0].text if first.content else ""  # type: ignore[union-attr]
        ok = not first.is_error and "Priya Raman" in text
        pid = _owner_pid(data_dir)
        rss_first, anon_first = _memory(pid)
        cpu_first = _cpu(pid)
        for i in range(calls):
            await client.call_tool(
                "recall", {"query": f"{QUERIES[i % 4]} ({run}.{i})", "scopes": ["team:eng"]}
            )
            await client.call_tool(
                "memory_write",
                {"content": f"Run {run} note {i}: the {runtime} runtime answered.", "scopes": ["team:eng"]},
            )
        await anyio.sleep(settle)
        rss_idle, anon_idle = _memory(pid)
    _stop_owner(data_dir)
    return Run(handshake, first_answer, rss_first, anon_first, rss_idle, anon_idle, ok, cpu_first)


def _load_alone(runtime: str) -> tuple[float, float]:
    """Seconds to import and load ``runtime`` and embed one text in a fresh process, and its peak RSS (MiB)."""
    code = (
        "import time; t = time.perf_counter(); from storage import MiniLMEmbedder; "
        f"MiniLMEmbedder(runtime={runtime!r}).embed(['who maintains the billing service']); "
        "s = time.perf_counter() - t; from pathlib import Path; "  # VmHWM, unlike ru_maxrss, restarts at exec
        "hwm = [ln for ln in Path('/proc/self/status').read_text().splitlines() if ln.startswith('VmHWM')]; "
        "print(s, int(hwm[0].split()[1]) / 1024)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    seconds, rss = out.split()
    return float(seconds), float(rss)


def _variants(args: argparse.Namespace) -> list[Variant]:
    if not args.checkouts:
        return [Variant(runtime, runtime=runtime) for runtime in RUNTIMES]
    paths = [Path(p).expanduser().resolve() for p in args.checkouts.split(",") if p.strip()]
    if len(paths) != 2 or paths[0] == paths[1]:
        raise SystemExit("--checkouts takes two different source trees, comma-separated: A,B")
    for path in paths:
        if not (path / "server" / "__main__.py").is_file():
            raise SystemExit(f"--checkouts: {path} is not a Mnemograph checkout (no server/__main__.py)")
    labels = [p.name for p in paths] if paths[0].name != paths[1].name else [str(p) for p in paths]
    return [Variant(label, checkout=str(path)) for label, path in zip(labels, paths, strict=True)]


async def _main(args: argparse.Namespace) -> Results:
    results = Results(_variants(args))
    with tempfile.TemporaryDirectory(prefix="mnemograph-coldstart-") as tmp:
        pristine = Path(tmp) / "data"
        print(f"populating {args.memories} memories...", file=sys.stderr)
        await anyio.to_thread.run_sync(_populate, pristine, args.memories)
        for r in range(args.runs):
            # Counterbalanced: each variant goes first in every other round.
            order = list(results.variants) if r % 2 == 0 else list(reversed(results.variants))
            for i, variant in enumerate(order):
                # Every run starts from a copy of the same store: a run's writes (and the compaction and merges
                # they set off) must not change what the next run opens. With one shared store, the idle memory
                # alternated by about 25 MiB from one run to the next whatever the code, which a shuffled order
                # turned into a false difference between two checkouts.
                data_dir = Path(tmp) / f"run-{r}-{i}"
                await anyio.to_thread.run_sync(shutil.copytree, pristine, data_dir)
                run = await _one_run(data_dir, variant, args.calls, args.settle, r)
                await anyio.to_thread.run_sync(shutil.rmtree, data_dir)
                results.runs.setdefault(variant.label, []).append(run)
                print(f"run {r} {variant.label}: {run}", file=sys.stderr)
                if variant.checkout is None:
                    load = await anyio.to_thread.run_sync(_load_alone, variant.runtime)
                    results.loads.setdefault(variant.label, []).append(load)
    return results


def _med(values: list[float]) -> float:
    return statistics.median(values)


def _report(res: Results, args: argparse.Namespace, load: tuple[str, str]) -> str:
    info = machine()
    a, b = res.variants
    checkouts = a.checkout is not None
    command = f"python bench/coldstart.py --runs {args.runs} --memories {args.memories} --calls {args.calls}"
    if checkouts:
        command += f" --checkouts {a.checkout},{b.checkout}"
    lines = [
        f"# Cold start and footprint: {a.label} against {b.label}"
        if checkouts
        else "# Cold start and footprint: numpy against torch embedding runtime",
        "",
        "Generated by `bench/coldstart.py`; do not edit above the marker at the end.",
        "",
        f"- Command: `{command}`",
        f"- Date: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}; store: {args.memories + 1:,} memories",
        f"- Machine: {info['cores']} cores, {info['cpu']}, {info['ram']} RAM; Python {info['python']}; "
        f"torch {info['torch']}, sentence-transformers {info['sentence-transformers']}",
        f"- Load average (1/5/15 min) at start: {load[0]}; at end: {load[1]}",
    ]
    if checkouts:
        lines.append(
            f"- Checkouts: {a.label} = `{a.checkout}` ({_commit(a.checkout)}), {b.label} = `{b.checkout}` "
            f"({_commit(b.checkout)}); both with the default numpy runtime"
        )
    lines += [
        "",
        "Clock: from before a real MCP client (SDK `Client`, stdio) spawns `mnemograph serve` with no owner running,",
        "to the completed `tools/list` (handshake) and to the first `recall` answer (the owner opens the store and",
        "loads the model in the background meanwhile). Resident memory is the owner's VmRSS (and its anonymous",
        f"part), right after the first answer and idle after {args.calls} more recalls and writes and a",
        f"{args.settle:g} s pause. Medians of {args.runs} runs per "
        f"{'checkout' if checkouts else 'runtime'}, alternating (each first in every other round), each run on a",
        "fresh copy of the same store.",
        "",
        f"| measurement | {a.label}{'' if checkouts else ' (default)'} | {b.label} | "
        + (f"{b.label} ÷ {a.label}" if checkouts else f"{a.label} ÷ {b.label}")
        + " | target |",
        "|---|--:|--:|--:|---|",
    ]
    n, t = res.runs[a.label], res.runs[b.label]

    def row(name: str, key: str, unit: str, target: str, scale: float = 1.0, fmt: str = ".0f") -> None:
        x, y = _med([getattr(r, key) for r in n]) * scale, _med([getattr(r, key) for r in t]) * scale
        ratio = y / x if checkouts else x / y  # the second checkout against the first; numpy against torch
        lines.append(f"| {name} | {x:{fmt}} {unit} | {y:{fmt}} {unit} | {ratio:.2f}× | {target} |")

    row("handshake (`tools/list` done)", "handshake", "ms", "", 1000)
    row("**first recall answer**", "first_answer", "s", "≤ 2 s", 1, ".2f")
    row("owner CPU time up to the first answer", "cpu_first", "s", "", 1, ".2f")
    row("owner RSS after the first answer", "rss_first", "MiB", "")
    row("owner RSS idle after use", "rss_idle", "MiB", "≤ 400 MB")
    row("owner anonymous memory idle", "anon_idle", "MiB", "")
    ok = sum(x.first_ok for x in n + t)
    lines += ["", f"The first answer held the expected memory in {ok} of {len(n) + len(t)} runs.", ""]
    if not checkouts:
        lines += [
            "Each runtime alone in a fresh process (import, load, one embedding; peak RSS of that process):",
            "",
            "| runtime | load + first embedding | peak RSS |",
            "|---|--:|--:|",
        ]
        for v in res.variants:
            secs = _med([s for s, _ in res.loads[v.label]])
            rss = _med([m for _, m in res.loads[v.label]])
            lines.append(f"| {v.label} | {secs:.2f} s | {rss:.0f} MiB |")
        lines.append("")
    lines += [
        "Every run (s, MiB), each checkout's in the order run:" if checkouts else "Every run (s, MiB):",
        "",
        f"| {'checkout' if checkouts else 'runtime'} | handshake | first answer | owner CPU | RSS first | "
        "RSS idle | anonymous idle |",
        "|---|--:|--:|--:|--:|--:|--:|",
    ]
    for v in res.variants:
        for x in res.runs[v.label]:
            lines.append(
                f"| {v.label} | {x.handshake:.2f} | {x.first_answer:.2f} | {x.cpu_first:.2f} | {x.rss_first:.0f} "
                f"| {x.rss_idle:.0f} | {x.anon_idle:.0f} |"
            )
    lines += [
        "",
        "<!-- Hand-written notes below this line are kept when bench/coldstart.py rewrites this file. -->",
        "",
    ]
    return "\n".join(lines)


def _commit(checkout: str | None) -> str:
    """The checkout's commit, and whether its tree has changes beyond it."""
    if checkout is None:
        return "-"

    def git(*argv: str) -> str:
        done = subprocess.run(["git", "-C", checkout, *argv], capture_output=True, text=True, check=False)
        return done.stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "not a git tree"
    return head + (" + uncommitted changes" if git("status", "--porcelain", "--untracked-files=no") else "")


def _loadavg() -> str:
    return " / ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="cold starts per runtime")
    parser.add_argument("--memories", type=int, default=2000, help="memories in the store")
    parser.add_argument("--calls", type=int, default=20, help="recalls and writes after the first answer")
    parser.add_argument(
        "--settle", type=float, default=3.0, help="seconds idle before the second RSS reading"
    )
    parser.add_argument(
        "--checkouts",
        default="",
        help="A,B: compare two source trees' `mnemograph serve` (numpy runtime) instead of the two runtimes",
    )
    parser.add_argument("--out", default=None, help="default: docs/benchmarks/coldstart.md, or -checkouts.md")
    args = parser.parse_args()
    if args.out is None:
        name = "coldstart-checkouts.md" if args.checkouts else "coldstart.md"
        args.out = str(ROOT / "docs" / "benchmarks" / name)
    before = _loadavg()
    results = anyio.run(_main, args)
    report = _report(results, args, (before, _loadavg()))
    out = Path(args.out)
    if out.exists() and (marker := "<!-- Hand-written notes") in (old := out.read_text()):
        report = report[: report.index(marker)] + old[old.index(marker) :]
    print(report)
    out.write_text(report)


if __name__ == "__main__":
    main()
