"""Two checkouts, call by call: ``recall`` and ``memory_write`` through each one's stdio front-end and HTTP front
(``--no-auth``), interleaved with the direct ``Engine`` call, so that all five paths see the same machine load.

Besides the wall time of each call it reports CPU per call: the client's own (this process: the SDK client,
including its validation of each result against the tool's output schema) and the servers' (the path's front
plus its checkout's owner, read from ``/proc/<pid>/stat`` before and after each call; 10 ms ticks, so read the
mean over many calls). CPU is what the load cannot inflate.

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
from mcp import Client, StdioServerParameters

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


def _stdio(data_dir: Path, checkout: Path) -> StdioServerParameters:
    env = {"PYTHONPATH": str(checkout), "MNEMOGRAPH_IDLE_TIMEOUT": "120"}
    return StdioServerParameters(command=MNEMOGRAPH, args=["serve", "--data-dir", str(data_dir)], env=env)


def _children() -> set[int]:
    """This process's child processes (the stdio front-ends the SDK client started)."""
    found = set()
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        children = (task / "children").read_text().split()
        found.update(int(pid) for pid in children)
    return found


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


Times = dict[str, dict[str, list[float]]]


async def _main(args: argparse.Namespace) -> tuple[Times, Times, Times]:
    with tempfile.TemporaryDirectory(prefix="mnemograph-ab-") as tmp:
        base = Path(tmp)
        await anyio.to_thread.run_sync(_populate, base / "direct", args.memories)
        for name in ("a", "b"):
            shutil.copytree(base / "direct", base / name)
        ports = {"a": _free_port(), "b": _free_port()}
        fronts = {name: _front(base / name, Path(getattr(args, name)), ports[name]) for name in ports}
        times: Times = {"recall": {}, "memory_write": {}}
        server_cpu: Times = {"recall": {}, "memory_write": {}}
        client_cpu: Times = {"recall": {}, "memory_write": {}}
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
                    before = _children()
                    stdio = {}
                    for name in ports:
                        stdio[name] = await stack.enter_async_context(
                            Client(_stdio(base / name, Path(getattr(args, name))), mode="legacy")
                        )
                        await stdio[name].list_tools()
                    shims = sorted(_children() - before)
                    # Each path's servers: its front and the owner of its checkout's store (shared by both
                    # fronts; the stdio front-ends are this process's children, started in order a, b).
                    owners = {
                        n: int(json.loads(_paths(base / n).info_file.read_text())["pid"]) for n in ports
                    }
                    pids = {f"HTTP, {getattr(args, n)}": (fronts[n].pid, owners[n]) for n in ports}
                    pids |= {
                        f"stdio, {getattr(args, n)}": (shim, owners[n])
                        for n, shim in zip(ports, shims, strict=True)
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
                        paths |= {f"stdio, {getattr(args, n)}": through(c) for n, c in stdio.items()}
                        paths |= {f"HTTP, {getattr(args, n)}": through(c) for n, c in clients.items()}
                        for name in paths:
                            times[call][name] = []
                            server_cpu[call][name] = []
                            client_cpu[call][name] = []
                        for round_ in range(args.calls + 5):
                            order = list(paths)
                            random.shuffle(order)
                            for name in order:
                                servers = pids.get(name, ())
                                used = sum(map(_cpu, servers))
                                own = time.process_time()
                                started = time.perf_counter()
                                await paths[name]()
                                if round_ >= 5:  # the first rounds warm caches and connections
                                    times[call][name].append(time.perf_counter() - started)
                                    client_cpu[call][name].append(time.process_time() - own)
                                    server_cpu[call][name].append(sum(map(_cpu, servers)) - used)
        finally:
            for front in fronts.values():
                front.terminate()
                front.wait(timeout=30)
            for name in ports:
                _stop_owner(base / name)
    return times, server_cpu, client_cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", required=True, help="checkout A (PYTHONPATH of its front and owner)")
    parser.add_argument("--b", required=True, help="checkout B")
    parser.add_argument("--calls", type=int, default=150, help="timed rounds per call")
    parser.add_argument("--memories", type=int, default=500)
    args = parser.parse_args()
    load = Path("/proc/loadavg").read_text().split()[:3]
    times, server_cpu, client_cpu = anyio.run(_main, args)
    end = Path("/proc/loadavg").read_text().split()[:3]
    print(f"{args.calls} rounds, load average at start {' '.join(load)}, at end {' '.join(end)}")
    print("| call | path | median | ratio to direct | client CPU/call | front + owner CPU/call |")
    print("|---|---|--:|--:|--:|--:|")
    for call, paths in times.items():
        direct = statistics.median(paths["direct Engine call"])
        for name, values in paths.items():
            median = statistics.median(values)
            mine = statistics.fmean(client_cpu[call][name]) * 1000
            theirs = statistics.fmean(server_cpu[call][name]) * 1000
            print(
                f"| {call} | {name} | {median * 1000:.2f} ms | {median / direct:.2f}x | {mine:.2f} ms "
                f"| {theirs:.2f} ms |"
            )


if __name__ == "__main__":
    main()
