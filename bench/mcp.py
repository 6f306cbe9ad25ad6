"""Benchmark the MCP surface: handshake latency per transport, and what a transport adds to a recall.

Measures, in one run on one machine:

1. Time from process start to a completed ``tools/list`` (initialize + notifications/initialized + tools/list,
   as clients do on launch): stdio with no owner running (cold), stdio with an owner already serving the
   directory, and the HTTP front (cold, and with an owner running; the clock stops when the client has the
   tool list, so it includes the front's start-up).
2. The round trip of one ``recall`` and one ``memory_write`` through each transport (in-memory SDK client,
   stdio, HTTP) against the direct Python ``Engine.recall`` / ``Engine.write`` call, on the same store:
   medians, the overhead (difference) and the ratio.

Usage: ``.venv/bin/python bench/mcp.py [--runs N] [--calls N] [--out docs/benchmarks/mcp.md]``
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's directory leads sys.path, and this file would shadow the `mcp` SDK package.
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)

import argparse
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

from server._runtime import RuntimePaths
from server.app import build_server
from server.settings import load_settings
from storage import Engine, WriteItem

ROOT = Path(__file__).resolve().parents[1]
MNEMOGRAPH = str(Path(sys.executable).parent / "mnemograph")
QUERY = "who maintains the billing service"
DIRECT = "direct Engine call"
# Passed to the servers under test; PYTHONPATH too, so subprocesses run the code this process imports (the SDK's
# stdio client hands its child only a minimal environment).
ENV = {"MNEMOGRAPH_IDLE_TIMEOUT": "120", **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"}}


def _paths(data_dir: Path) -> RuntimePaths:
    settings = load_settings({}, data_dir=str(data_dir))
    return RuntimePaths.of(settings.runtime_dir, settings.data_dir)


def _stop_owner(data_dir: Path) -> None:
    """SIGTERM the owner of ``data_dir`` (if any), wait until it has exited, and remove its runtime directory."""
    paths = _paths(data_dir)
    try:
        pid = int(json.loads(paths.info_file.read_text())["pid"])
    except (FileNotFoundError, ValueError, KeyError):
        pid = None
    if pid is not None:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 60
        while _alive(pid):
            if time.monotonic() > deadline:
                raise RuntimeError(f"owner {pid} did not stop")
            time.sleep(0.02)
    shutil.rmtree(paths.root, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _stdio(data_dir: Path) -> StdioServerParameters:
    return StdioServerParameters(command=MNEMOGRAPH, args=["serve", "--data-dir", str(data_dir)], env=ENV)


async def _stdio_handshake(data_dir: Path) -> float:
    started = time.perf_counter()
    async with Client(_stdio(data_dir), mode="legacy") as client:
        await client.list_tools()
        return time.perf_counter() - started


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class _Front:
    def __init__(self, data_dir: Path) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.process = subprocess.Popen(
            [
                MNEMOGRAPH,
                "serve",
                "--transport",
                "http",
                "--port",
                str(self.port),
                "--data-dir",
                str(data_dir),
                "--no-auth",
            ],
            env={**os.environ, **ENV},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    async def wait_listening(self) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                stream = await anyio.connect_tcp("127.0.0.1", self.port)
            except OSError:
                await anyio.sleep(0.005)
                continue
            await stream.aclose()
            return
        raise RuntimeError("the HTTP front did not start listening")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


async def _http_handshake(data_dir: Path) -> float:
    started = time.perf_counter()
    front = _Front(data_dir)
    try:
        await front.wait_listening()
        async with Client(front.url, mode="legacy") as client:
            await client.list_tools()
            return time.perf_counter() - started
    finally:
        front.stop()


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


async def _median_call(call: Callable[[], Awaitable[Any]], calls: int) -> float:
    for _ in range(5):  # warm caches (embedding cache, connections) before timing
        await call()
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        await call()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


async def _recall_costs(data_dir: Path, calls: int) -> dict[str, dict[str, float]]:
    """Median ``recall`` and ``memory_write`` per path, keyed by call then path. Every write is a new text."""
    costs: dict[str, dict[str, float]] = {"recall": {}, "memory_write": {}}
    written = iter(range(1_000_000))

    def text() -> str:
        return f"Note {next(written)}: the billing service's on-call rota moved to a new week."

    async def measure(name: str, client: Client) -> None:
        costs["recall"][name] = await _median_call(
            lambda: client.call_tool("recall", {"query": QUERY, "scopes": ["team:eng"]}), calls
        )
        costs["memory_write"][name] = await _median_call(
            lambda: client.call_tool("memory_write", {"content": text(), "scopes": ["team:eng"]}), calls
        )

    with Engine.open(data_dir, warm=True) as engine:

        async def direct() -> None:
            engine.recall(QUERY, ["team:eng"])

        async def direct_write() -> None:
            engine.write(text(), ["team:eng"])

        costs["recall"][DIRECT] = await _median_call(direct, calls)
        costs["memory_write"][DIRECT] = await _median_call(direct_write, calls)

        async def source() -> Engine:
            return engine

        async with Client(build_server(source, default_scopes=("team:eng",)), mode="legacy") as client:
            await measure("MCP in-memory (SDK Client)", client)
    # The engine is closed: from here on the owner has the store.
    async with Client(_stdio(data_dir), mode="legacy") as client:
        await measure("MCP stdio (front-end -> owner)", client)
    front = _Front(data_dir)
    try:
        await front.wait_listening()
        async with Client(front.url, mode="legacy") as client:
            await measure("MCP streamable HTTP (front -> owner)", client)
    finally:
        front.stop()
    _stop_owner(data_dir)
    return costs


async def _handshakes(base: Path, runs: int) -> dict[str, list[float]]:
    results: dict[str, list[float]] = {"stdio, cold (no owner)": [], "stdio, owner running": []}
    results["HTTP, cold (no owner)"] = []
    results["HTTP, owner running"] = []
    for r in range(runs):
        cold = base / f"cold-{r}"
        results["stdio, cold (no owner)"].append(await _stdio_handshake(cold))
        _stop_owner(cold)
        cold_http = base / f"cold-http-{r}"
        results["HTTP, cold (no owner)"].append(await _http_handshake(cold_http))
        _stop_owner(cold_http)
    warm = base / "warm"
    async with Client(_stdio(warm), mode="legacy") as keeper:  # keeps the owner up, as an open editor would
        await keeper.call_tool("list_scopes", {})
        for _ in range(runs):
            results["stdio, owner running"].append(await _stdio_handshake(warm))
            results["HTTP, owner running"].append(await _http_handshake(warm))
    _stop_owner(warm)
    return results


def _report(
    handshakes: dict[str, list[float]], costs: dict[str, dict[str, float]], runs: int, calls: int, n: int
) -> str:
    lines = [
        "# MCP benchmark",
        "",
        f"Generated by `bench/mcp.py` on {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}: "
        f"{os.cpu_count()} CPUs, {platform.system()} {platform.machine()}, Python {platform.python_version()}.",
        "",
        "## Process start to completed `tools/list`",
        "",
        "Clock starts before the client spawns the server process and stops when the tool list arrives",
        f"(initialize, initialized, tools/list). Median of {runs} runs (min-max in brackets).",
        "Budget: 1 s with an owner running, 2 s cold.",
        "",
        "| transport | median | range |",
        "|---|---:|---:|",
    ]
    for name, values in handshakes.items():
        lines.append(f"| {name} | {statistics.median(values) * 1000:.0f} ms | {min(values) * 1000:.0f}-"
                     f"{max(values) * 1000:.0f} ms |")  # fmt: skip
    for call, paths in costs.items():
        direct = paths[DIRECT]
        store = f"{n} memories, k=10" if call == "recall" else f"{n}+ memories, a new text each call"
        lines += [
            "",
            f"## One `{call}` round trip ({store}, median of {calls} calls after warm-up)",
            "",
            "| path | median | overhead vs direct | ratio |",
            "|---|---:|---:|---:|",
        ]
        for name, value in paths.items():
            lines.append(
                f"| {name} | {value * 1000:.2f} ms | {(value - direct) * 1000:+.2f} ms | {value / direct:.2f}x |"
            )
    lines += [
        "",
        "Notes: the stdio front-end is a byte pump to the owner's Unix socket; the HTTP front is a streaming",
        'reverse proxy to the owner\'s HTTP socket. "Cold" includes starting the owner (the Engine then opens in',
        "the background, off the handshake path). Rerun with `.venv/bin/python bench/mcp.py`.",
        "",
    ]
    return "\n".join(lines)


async def _main(args: argparse.Namespace) -> str:
    with tempfile.TemporaryDirectory(prefix="mnemograph-bench-") as tmp:
        base = Path(tmp)
        print("handshakes...", file=sys.stderr)
        handshakes = await _handshakes(base, args.runs)
        print("recall round trips...", file=sys.stderr)
        await anyio.to_thread.run_sync(_populate, base / "recall", args.memories)
        costs = await _recall_costs(base / "recall", args.calls)
    return _report(handshakes, costs, args.runs, args.calls, args.memories + 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="handshake runs per transport")
    parser.add_argument("--calls", type=int, default=50, help="timed recall calls per path")
    parser.add_argument("--memories", type=int, default=500, help="memories in the recall store")
    parser.add_argument("--out", default=str(ROOT / "docs" / "benchmarks" / "mcp.md"))
    args = parser.parse_args()
    report = anyio.run(_main, args)
    print(report)
    Path(args.out).write_text(report)


if __name__ == "__main__":
    main()
