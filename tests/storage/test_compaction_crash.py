"""SIGKILL during the compactor's rewrite: the store opens consistent, with every acknowledged write,
amendment and retirement."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from storage import CachedEmbedder, Engine

CHILD = Path(__file__).with_name("compact_child.py")
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("where", ["build", "finish", "after_switch", "random-1", "random-2"])
def test_a_kill_during_a_compaction_loses_nothing_acknowledged(
    where: str, data_dir: Path, embedder: CachedEmbedder
) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, str(CHILD), str(data_dir), where],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert proc.returncode == -9, proc.stderr[-3000:]
    acked, amended, retired = [], {}, []
    lines = proc.stdout.split("\n")[:-1]  # whole lines only: the kill may cut the last one short
    for line in lines:
        parts = line.split()
        if not parts:  # a blank line (the kill, or a library's own output)
            continue
        if parts[0] == "ACK":
            acked.append(parts[1])
        elif parts[0] == "AMEND":
            amended[parts[1]] = parts[2]
        elif parts[0] == "RETIRE":
            retired.append(parts[1])
    assert acked
    with Engine.open(data_dir, embedder=embedder, warm=False) as eng:
        assert eng.verify().ok
        for mid in acked:
            assert eng.read(mid).memory.id == mid
        for old, new in amended.items():
            assert eng.read(new).memory.supersedes == old
            assert eng.read(old).memory.status.value != "current"
        for mid in retired:
            assert eng.read(mid).memory.status.value != "current"
        names = sorted(p.name for p in (data_dir / "graph").iterdir())
        assert len([n for n in names if n.startswith("graph-") and not n.endswith(".wal")]) == 1, names
