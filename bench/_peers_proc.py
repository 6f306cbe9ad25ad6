"""Processes from /proc, for bench/peers.py: the servers this process spawned and their resident memory.

A stdio MCP server is a child of the client that spawned it, and anything it starts (a model worker, an owner
process) is its descendant unless it detaches; a server that detaches one names it (Mnemograph's owner writes
its pid to a file), and the benchmark adds those. Resident memory is the sum of VmRSS over the tree: pages two
processes share count twice, as ``ps`` would show them to a user.
"""

from __future__ import annotations

import os
from pathlib import Path


def _ppid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def _parents() -> dict[int, int]:
    out: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (parent := _ppid(int(entry.name))) is not None:
            out[int(entry.name)] = parent
    return out


def descendants(root: int) -> list[int]:
    """``root``'s descendants (children, their children, ...), not ``root`` itself."""
    parents = _parents()
    out: list[int] = []
    frontier = [root]
    while frontier:
        pid = frontier.pop()
        kids = [child for child, parent in parents.items() if parent == pid]
        out += kids
        frontier += kids
    return out


def children() -> list[int]:
    """The processes this one spawned that are still running (the servers it drives)."""
    me = os.getpid()
    return [pid for pid, parent in _parents().items() if parent == me]


def rss_mib(pid: int) -> float:
    """VmRSS of ``pid`` in MiB; 0 if it has gone (or is a zombie)."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return 0.0
    for line in lines:
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def tree_rss(roots: list[int]) -> tuple[float, dict[str, float]]:
    """Total VmRSS (MiB) of ``roots`` and all their descendants, and each process's share ("pid name")."""
    pids: dict[int, None] = {}
    for root in roots:
        pids.setdefault(root, None)
        for pid in descendants(root):
            pids.setdefault(pid, None)
    each = {f"{pid} {name(pid)}": rss_mib(pid) for pid in pids}
    return sum(each.values()), each
