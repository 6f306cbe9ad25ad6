"""Floors on the extraction benchmark (bench/extraction.py over the hand-written cases): precision and recall
of the relations recorded, the current state after updates, and the supersessions, contradictions and
duplicates reported. The development set was tuned on; the held-out set was not, so its floors are lower."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FLOORS = {
    "development": {
        "relations": 0.95,
        "current state": 0.95,
        "supersedes": 0.9,
        "contradicts": 0.9,
        "duplicates": 0.9,
    },
    "held-out": {
        "relations": 0.85,
        "current state": 0.8,
        "supersedes": 0.75,
        "contradicts": 0.75,
        "duplicates": 0.5,
    },
}


def test_extraction_and_reconciliation_meet_their_floors(tmp_path: Path) -> None:
    out = tmp_path / "scores.json"
    cmd = [
        sys.executable,
        str(ROOT / "bench" / "extraction.py"),
        "--latency",
        "0",
        "--out",
        "",
        "--json",
        str(out),
    ]
    subprocess.run(cmd, check=True, cwd=ROOT, capture_output=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    scores = json.loads(out.read_text())
    assert scores["development"]["cases"] >= 80
    assert scores["held-out"]["cases"] >= 20
    # Entity resolution (issue 15): never a silent false merge on the hand-written cases, and most true pairs
    # reach the user, linked or proposed. The floors sit just under what was measured when the cases with
    # nicknames and fewer words were added (0.727 and 0.714 recall), raised when the nickname tier came
    # (0.886 and 0.929 measured).
    for key, cases, recall, precision in (
        ("resolution", 60, 0.85, 0.85),
        ("resolution held-out", 20, 0.85, 0.75),
    ):
        resolution = scores[key]
        assert resolution["cases"] >= cases
        assert resolution["linked"]["precision"] == 1.0, resolution
        assert resolution["found"]["recall"] >= recall, resolution
        assert resolution["found"]["precision"] >= precision, resolution
    for name, floors in FLOORS.items():
        for metric, floor in floors.items():
            got = scores[name][metric]
            assert got["precision"] >= floor, (name, metric, got)
            assert got["recall"] >= floor, (name, metric, got)
