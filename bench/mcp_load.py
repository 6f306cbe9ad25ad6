"""MCP under load: writes and recalls through stdio and HTTP beside the direct engine call, with 1, 4 and 16
concurrent clients, in one run.

Each level starts N clients at once; each makes ``--ops`` single-memory ``memory_write`` calls, then ``--ops``
``recall`` calls, one at a time (as an agent does). Reported: the median latency of one call and the aggregate
throughput (calls done by all clients ÷ wall time of the phase). The engine rows run the same calls as N threads
on ``Engine.write`` / ``Engine.recall`` in one process, so the ratio is what MCP adds. stdio clients each start
their own ``mnemograph serve`` front-end (all attached to one owner); HTTP clients share one front. Every text is
distinct, so no embedding cache answers.

Usage: ``.venv/bin/python bench/mcp_load.py [--ops 15] [--levels 1,4,16] [--out docs/benchmarks/mcp-load.md]``
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's directory leads sys.path, and bench/mcp.py would shadow the `mcp` SDK package.
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)
sys.path.append(str(Path(__file__).resolve().parent))

import argparse
import contextlib
import os
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import anyio
from _common import machine, wait_listening
from coldstart import _populate, _stop_owner
from mcp import Client, StdioServerParameters

from storage import Engine

ROOT = Path(__file__).resolve().parents[1]
MNEMOGRAPH = str(Path(sys.executable).parent / "mnemograph")
SCOPE = "team:eng"
ENV = {
    "MNEMOGRAPH_IDLE_TIMEOUT": "300",
    **{k: v for k, v in os.environ.items() if k in ("PYTHONPATH", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")},
}

Phase = tuple[list[float], float]  # per-call latencies (s), wall time of the phase (s)


def _text(kind: str, path: str, level: int, client: int, i: int) -> str:
    if kind == "write":
        return f"{path} run: engineer {client}.{i} at level {level} moved to the billing team in week {i}."
    return f"who moved to the billing team in week {i} ({path} {level}.{client})"


def _engine_phase(engine: Engine, kind: str, level: int, ops: int) -> Phase:
    latencies: list[float] = []
    lock = threading.Lock()

    def client(c: int) -> None:
        for i in range(ops):
            text = _text(kind, "engine", level, c, i)
            started = time.perf_counter()
            if kind == "write":
                engine.write(text, [SCOPE])
            else:
                engine.recall(text, [SCOPE])
            with lock:
                latencies.append(time.perf_counter() - started)

    threads = [threading.Thread(target=client, args=(c,)) for c in range(level)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies, time.perf_counter() - started


async def _mcp_phases(connect: Callable[[], Any], path: str, level: int, ops: int) -> dict[str, Phase]:
    """Open ``level`` sessions, then run the write phase and the recall phase across all of them."""
    out: dict[str, Phase] = {}
    async with contextlib.AsyncExitStack() as stack:
        # Sessions open before the clock starts: handshakes are bench/mcp.py's and bench/coldstart.py's.
        clients = [await stack.enter_async_context(Client(connect(), mode="legacy")) for _ in range(level)]
        await clients[0].call_tool("recall", {"query": "warm-up", "scopes": [SCOPE]})
        for kind in ("write", "recall"):
            latencies: list[float] = []

            async def run(
                c: int, client: Client, kind: str = kind, latencies: list[float] = latencies
            ) -> None:
                for i in range(ops):
                    text = _text(kind, path, level, c, i)
                    args = (
                        {"content": text, "scopes": [SCOPE]}
                        if kind == "write"
                        else {"query": text, "scopes": [SCOPE]}
                    )
                    started = time.perf_counter()
                    result = await client.call_tool("memory_write" if kind == "write" else "recall", args)
                    latencies.append(time.perf_counter() - started)
                    if result.is_error:
                        raise RuntimeError(f"{kind} failed: {result.content}")

            started = time.perf_counter()
            async with anyio.create_task_group() as tg:
                for c, client in enumerate(clients):
                    tg.start_soon(run, c, client)
            out[kind] = (latencies, time.perf_counter() - started)
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _start_front(data_dir: Path, port: int) -> subprocess.Popen[bytes]:
    command = [MNEMOGRAPH, "serve", "--transport", "http", "--port", str(port), "--data-dir", str(data_dir)]
    return subprocess.Popen(
        [*command, "--no-auth"],
        env={**os.environ, **ENV},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


async def _main(args: argparse.Namespace) -> dict[str, dict[int, dict[str, Phase]]]:
    levels = [int(x) for x in args.levels.split(",")]
    results: dict[str, dict[int, dict[str, Phase]]] = {"engine": {}, "stdio": {}, "HTTP": {}}
    with tempfile.TemporaryDirectory(prefix="mnemograph-mcpload-") as tmp:
        data_dir = Path(tmp) / "data"
        print(f"populating {args.memories} memories...", file=sys.stderr)
        await anyio.to_thread.run_sync(_populate, data_dir, args.memories)
        engine = Engine.open(data_dir, warm=True)
        engine.embedder.warm()
        engine.recall("warm-up", [SCOPE])
        for level in levels:
            results["engine"][level] = {
                kind: await anyio.to_thread.run_sync(_engine_phase, engine, kind, level, args.ops)
                for kind in ("write", "recall")
            }
            print(f"engine {level}: done", file=sys.stderr)
        engine.close()
        stdio = StdioServerParameters(
            command=MNEMOGRAPH, args=["serve", "--data-dir", str(data_dir)], env=ENV
        )
        port = _free_port()
        front = _start_front(data_dir, port)
        try:
            await wait_listening(port)
            for level in levels:
                results["stdio"][level] = await _mcp_phases(lambda: stdio, "stdio", level, args.ops)
                print(f"stdio {level}: done", file=sys.stderr)
                url = f"http://127.0.0.1:{port}/mcp"
                results["HTTP"][level] = await _mcp_phases(lambda url=url: url, "http", level, args.ops)
                print(f"HTTP {level}: done", file=sys.stderr)
        finally:
            front.terminate()
            front.wait(timeout=60)
            _stop_owner(data_dir)
    return results


def _report(
    res: dict[str, dict[int, dict[str, Phase]]], args: argparse.Namespace, load: tuple[str, str]
) -> str:
    info = machine()
    lines = [
        "# MCP under load: stdio and HTTP beside the engine, 1-16 concurrent clients",
        "",
        "Generated by `bench/mcp_load.py`; do not edit above the marker at the end.",
        "",
        f"- Command: `python bench/mcp_load.py --ops {args.ops} --levels {args.levels} --memories {args.memories}`",
        f"- Date: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}; store: {args.memories + 1:,} memories at the start",
        f"- Machine: {info['cores']} cores, {info['cpu']}, {info['ram']} RAM; Python {info['python']}",
        f"- Load average (1/5/15 min) at start: {load[0]}; at end: {load[1]}",
        "",
        f"Each client makes {args.ops} single-memory writes, then {args.ops} recalls, one call at a time; clients run",
        "at once. Median latency of one call, and throughput = all clients' calls ÷ the phase's wall time. The engine",
        "rows are the same calls from as many threads in one process (default numpy embedding runtime).",
        "",
        "| clients | call | path | median latency | × engine | throughput (calls/s) | × engine |",
        "|--:|---|---|--:|--:|--:|--:|",
    ]
    for level in sorted(res["engine"]):
        for kind in ("write", "recall"):
            base_lat, base_wall = res["engine"][level][kind]
            base_med = statistics.median(base_lat)
            base_tp = len(base_lat) / base_wall
            for path in ("engine", "stdio", "HTTP"):
                lat, wall = res[path][level][kind]
                med, tp = statistics.median(lat), len(lat) / wall
                lines.append(
                    f"| {level} | {kind} | {path} | {med * 1000:.1f} ms | {med / base_med:.2f}× | {tp:.1f} | "
                    f"{tp / base_tp:.2f}× |"
                )
    lines += [
        "",
        "<!-- Hand-written notes below this line are kept when bench/mcp_load.py rewrites this file. -->",
        "",
    ]
    return "\n".join(lines)


def _loadavg() -> str:
    return " / ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=15, help="writes and recalls per client")
    parser.add_argument("--levels", default="1,4,16", help="concurrent clients, comma-separated")
    parser.add_argument("--memories", type=int, default=1000, help="memories in the store at the start")
    parser.add_argument("--out", default=str(ROOT / "docs" / "benchmarks" / "mcp-load.md"))
    args = parser.parse_args()
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
