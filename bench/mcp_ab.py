"""Streamable HTTP of two checkouts, call by call: ``recall`` and ``memory_write`` through each one's HTTP front
(``--no-auth``), interleaved with the direct ``Engine`` call, so that all three see the same machine load.

On a shared machine the load changes from one minute to the next, and runs of ``bench/mcp.py`` made one after
the other differ by more than the change under test; here each round makes one call on every path, in a new
random order. Each checkout gets its own copy of one store (and its own owner process).

Usage: ``PYTHONPATH=. .venv/bin/python bench/mcp_ab.py --a /path/to/main --b . [--calls 150]``
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
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from _common import wait_listening
from mcp import Client

from server._runtime import RuntimePaths
from server.settings import load_settings
from storage import Engine, WriteItem

MNEMOGRAPH = str(Path(sys.executable).parent / "mnemograph")
QUERY = "who maintains the billing service"
SCOPE = "team:eng"


def _populate(data_dir: Path, n: int) -> None:
    teams = ["billing", "search", "payments", "identity", "mobile"]
    items = [
        WriteItem(
            f"Engineer {i} works on the {teams[i % 5]} service and is on call in week {i % 52}.", [SCOPE]
        )
        for i in range(n)
    ]
    items.append(WriteItem("Priya Raman maintains the billing service since March.", [SCOPE], kind="fact"))
    with Engine.open(data_dir, warm=True) as engine:
        engine.write_many(items)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _front(data_dir: Path, checkout: Path, port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(checkout), "MNEMOGRAPH_IDLE_TIMEOUT": "120"}
    command = [MNEMOGRAPH, "serve", "--transport", "http", "--port", str(port), "--data-dir", str(data_dir)]
    return subprocess.Popen(
        [*command, "--no-auth"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def _paths(data_dir: Path) -> RuntimePaths:
    settings = load_settings({}, data_dir=str(data_dir))
    return RuntimePaths.of(settings.runtime_dir, settings.data_dir)


def _cpu(pid: int) -> float:
    """CPU seconds (user + system) that process ``pid`` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _stop_owner(data_dir: Path) -> None:
    paths = _paths(data_dir)
    with contextlib.suppress(FileNotFoundError, ValueError, KeyError, ProcessLookupError):
        pid = int(json.loads(paths.info_file.read_text())["pid"])
        os.kill(pid, 15)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
    shutil.rmtree(paths.root, ignore_errors=True)


async def _main(args: argparse.Namespace) -> tuple[dict[str, dict[str, list[float]]], dict[str, float]]:
    with tempfile.TemporaryDirectory(prefix="mnemograph-ab-") as tmp:
        base = Path(tmp)
        await anyio.to_thread.run_sync(_populate, base / "direct", args.memories)
        for name in ("a", "b"):
            shutil.copytree(base / "direct", base / name)
        ports = {"a": _free_port(), "b": _free_port()}
        fronts = {name: _front(base / name, Path(getattr(args, name)), ports[name]) for name in ports}
        times: dict[str, dict[str, list[float]]] = {"recall": {}, "memory_write": {}}
        cpu: dict[str, float] = {}
        try:
            for port in ports.values():
                await wait_listening(port)
            with Engine.open(base / "direct", warm=True) as engine:
                async with contextlib.AsyncExitStack() as stack:
                    clients = {
                        name: await stack.enter_async_context(
                            Client(f"http://127.0.0.1:{port}/mcp", mode="legacy")
                        )
                        for name, port in ports.items()
                    }
                    # Both checkouts' servers: the front and the owner it started for the first call.
                    pids = {
                        n: (fronts[n].pid, int(json.loads(_paths(base / n).info_file.read_text())["pid"]))
                        for n in ports
                    }
                    written = iter(range(10**9))
                    for call in ("recall", "memory_write"):

                        def text() -> str:
                            return f"Note {next(written)}: the billing rota moved to a new week."

                        def direct(call: str = call) -> Callable[[], Awaitable[Any]]:
                            async def run() -> None:
                                if call == "recall":
                                    engine.recall(QUERY, [SCOPE])
                                else:
                                    engine.write(text(), [SCOPE])

                            return run

                        def through(client: Client, call: str = call) -> Callable[[], Awaitable[Any]]:
                            def run() -> Awaitable[Any]:
                                arguments = (
                                    {"query": QUERY, "scopes": [SCOPE]}
                                    if call == "recall"
                                    else {"content": text(), "scopes": [SCOPE]}
                                )
                                return client.call_tool(call, arguments)

                            return run

                        paths = {"direct Engine call": direct()}
                        paths |= {f"HTTP, {getattr(args, n)}": through(c) for n, c in clients.items()}
                        for name in paths:
                            times[call][name] = []
                        for round_ in range(args.calls + 5):
                            if round_ == 5:  # the first rounds warm caches and connections
                                used = {n: sum(map(_cpu, pids[n])) for n in pids}
                            order = list(paths)
                            random.shuffle(order)
                            for name in order:
                                started = time.perf_counter()
                                await paths[name]()
                                if round_ >= 5:
                                    times[call][name].append(time.perf_counter() - started)
                        for n in pids:
                            cpu[f"{call}, {getattr(args, n)}"] = (
                                sum(map(_cpu, pids[n])) - used[n]
                            ) / args.calls
        finally:
            for front in fronts.values():
                front.terminate()
                front.wait(timeout=30)
            for name in ports:
                _stop_owner(base / name)
    return times, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", required=True, help="checkout A (PYTHONPATH of its front and owner)")
    parser.add_argument("--b", required=True, help="checkout B")
    parser.add_argument("--calls", type=int, default=150, help="timed rounds per call")
    parser.add_argument("--memories", type=int, default=500)
    args = parser.parse_args()
    load = Path("/proc/loadavg").read_text().split()[:3]
    times, cpu = anyio.run(_main, args)
    print(f"{args.calls} rounds, load average at start {' '.join(load)}; median (ratio to the direct call)")
    for call, paths in times.items():
        direct = statistics.median(paths["direct Engine call"])
        for name, values in paths.items():
            median = statistics.median(values)
            print(f"| {call} | {name} | {median * 1000:.2f} ms | {median / direct:.2f}x |")
    print("CPU per call, the front and the owner together:")
    for name, seconds in cpu.items():
        print(f"| {name} | {seconds * 1000:.2f} ms |")


if __name__ == "__main__":
    main()
