"""Crash safety: a writer killed with SIGKILL at random moments loses nothing it acknowledged."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from storage import CachedEmbedder, Engine

CYCLES = 20


@pytest.mark.slow
def test_sigkill_at_random_moments_loses_no_acknowledged_write(
    data_dir: Path, embedder: CachedEmbedder
) -> None:
    rng = random.Random(1234)
    acked: dict[str, str] = {}
    retired: set[str] = set()
    sent: set[str] = set()
    child_script = Path(__file__).with_name("crash_child.py")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    errors = data_dir.parent / "child-stderr.txt"  # kept, so a child that dies before READY says why
    for cycle in range(CYCLES):
        with errors.open("w") as stderr:
            proc = subprocess.Popen(
                [sys.executable, str(child_script), str(data_dir), str(cycle)],
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                env=env,
            )
        assert proc.stdout is not None
        ready = proc.stdout.readline().strip()
        if ready != "READY":
            proc.kill()
            proc.wait()
        assert ready == "READY", (
            f"cycle {cycle}: the child did not open the store:\n{errors.read_text()[-3000:]}"
        )
        deadline = time.monotonic() + rng.uniform(0.05, 1.5)
        lines = []
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
        proc.send_signal(signal.SIGKILL)
        lines.extend(proc.stdout.readlines())
        proc.stdout.close()
        proc.wait()
        for line in lines:
            kind, _, rest = line.rstrip("\n").partition(" ")
            if kind == "SEND":
                sent.add(rest)
            elif kind == "ACK":
                mid, _, content = rest.partition(" ")
                acked[mid] = content
            elif kind == "RET":
                retired.add(rest)

        with Engine.open(data_dir, embedder=embedder, warm=False) as eng:
            report = eng.verify()
            assert report.ok, f"cycle {cycle}: drift {report.drift}"
            with eng.graph.read() as conn:
                stored = eng.graph.all_ids(conn)
            missing = set(acked) - set(stored)
            assert not missing, f"cycle {cycle}: acknowledged writes lost: {sorted(missing)[:5]}"
            assert set(stored) <= sent, "a memory nobody sent appeared"
            for mid, content in list(acked.items())[-50:]:
                assert eng.read(mid).memory.content == content
            for mid in retired:
                assert eng.read(mid).memory.retired_at is not None, f"acknowledged retire of {mid} lost"
    assert len(acked) > CYCLES  # the test really wrote under fire
