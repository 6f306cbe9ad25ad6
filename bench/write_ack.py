"""Write acknowledgement latency with the consolidator on, off, and on a baseline commit: one run, interleaved.

    git archive 8bbfbdc | tar -x -C /tmp/base-8bbfbdc
    .venv/bin/python bench/write_ack.py --base /tmp/base-8bbfbdc --rounds 6 --writes 30 \
        --out docs/benchmarks/write-ack-conversations.md

Three long-lived child processes, each with its own store in a temporary directory and ``import storage``
resolved to its checkout (``PYTHONPATH``): ``base`` (the baseline checkout), ``on`` (this checkout, the
consolidator on with ``--quiet`` seconds of quiet time, default 10 as in the product) and ``off``
(this checkout, ``stop_consolidation``). Enrichment by an LLM is off everywhere. Every text is embedded before
the timed calls (the embedder's cache), so the write path, not the model, is compared. Per round, each
variant in a rotating order runs two blocks of W calls, each timed until acknowledged:

* ``note``: ``Engine.write`` of a short note (the ``memory_write`` path);
* ``message``: one message of one of 5 running conversations: ``write_conversation`` with one message on this
  checkout, and on the baseline (which has no such tool) ``Engine.write`` of kind ``message`` with the
  conversation in its metadata, as a client wrote messages there.

The projections settle (untimed) after each call. Medians and ratios to ``base`` are printed and written.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
NAMES = ("Ana Lima", "Rui Costa", "Ines Sousa", "Bo Chen", "Karen Patel", "Tom Weber")
PLACES = ("Lisbon", "Porto", "Berlin", "Madrid", "Oslo", "Kyoto")
TOPICS = ("the budget", "a new job", "the wedding", "their trip", "the garden", "a book on birds")


def text(kind: str, n: int) -> str:
    who, where, what = NAMES[n % 6], PLACES[(n // 6) % 6], TOPICS[(n // 36) % 6]
    if kind == "note":
        return f"Note {n}: {who} met me in {where} and we talked about {what}."
    return f"I told {who} about {what} when we were in {where} (message {n})."


# -- child ------------------------------------------------------------------------------------------------


def child(variant: str, total: int, quiet: float) -> None:
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    from storage import CachedEmbedder, Engine, MiniLMEmbedder

    emb = CachedEmbedder(MiniLMEmbedder())
    emb.warm()
    data = tempfile.mkdtemp(prefix=f"ack-{variant}-")
    engine = Engine.open(data, embedder=emb, warm=False)
    if variant == "on":
        engine.digest_quiet = quiet
    elif variant == "off":
        engine.stop_consolidation()
    emb.embed([text(k, n) for k in ("note", "message") for n in range(total)])
    t0 = datetime(2024, 1, 1, tzinfo=UTC)
    out.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["op"] == "stop":
            break
        lat = []
        for n in range(cmd["start"], cmd["start"] + cmd["count"]):
            content = text(cmd["op"], n)
            start = time.perf_counter()
            if cmd["op"] == "note":
                engine.write(content, ["user:ana"], kind="note")
            elif variant == "base":
                engine.write(
                    content,
                    ["user:ana"],
                    kind="message",
                    event_time=t0 + timedelta(minutes=n),
                    metadata={"conversation": f"c{n % 5}", "role": "user"},
                )
            else:
                from storage.domain.models import MessageIn

                engine.write_conversation(
                    f"c{n % 5}", [MessageIn("user", content, t0 + timedelta(minutes=n))], ["user:ana"]
                )
            lat.append((time.perf_counter() - start) * 1000)
            engine.reconciler.wait_projected()
        out.write(json.dumps({"lat": lat}) + "\n")
    engine.close()


# -- parent -----------------------------------------------------------------------------------------------


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base", default="", help="a checkout of the baseline commit (required)")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--writes", type=int, default=30)
    p.add_argument("--out", default=str(HERE / "docs" / "benchmarks" / "write-ack-conversations.md"))
    p.add_argument(
        "--quiet", type=float, default=10.0, help="the consolidator's quiet time in `on` (seconds)"
    )
    p.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child(args.child[0], int(args.child[1]), float(args.child[2]))
        return
    if not args.base:
        p.error("--base (a checkout of the baseline commit) is required")
    total = args.rounds * args.writes
    checkouts = {"base": Path(args.base).resolve(), "on": HERE, "off": HERE}
    procs = {}
    for name, where in checkouts.items():
        env = {**os.environ, "PYTHONPATH": str(where), "HF_HUB_OFFLINE": "1"}
        procs[name] = subprocess.Popen(
            [sys.executable, __file__, "--child", name, str(total), str(args.quiet)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=where,
            env=env,
        )
    for proc in procs.values():
        assert proc.stdout is not None
        json.loads(proc.stdout.readline())
    lat: dict[tuple[str, str], list[float]] = {}
    order = list(procs)
    for r in range(args.rounds):
        for name in order[r % 3 :] + order[: r % 3]:
            proc = procs[name]
            assert proc.stdin is not None
            assert proc.stdout is not None
            for op in ("note", "message"):
                proc.stdin.write(
                    json.dumps({"op": op, "start": r * args.writes, "count": args.writes}) + "\n"
                )
                proc.stdin.flush()
                lat.setdefault((name, op), []).extend(json.loads(proc.stdout.readline())["lat"])
    for proc in procs.values():
        assert proc.stdin is not None
        proc.stdin.write(json.dumps({"op": "stop"}) + "\n")
        proc.stdin.flush()
        proc.wait()
    rows = []
    for op in ("note", "message"):
        base = statistics.median(lat[("base", op)])
        for name in order:
            xs = lat[(name, op)]
            med = statistics.median(xs)
            p90 = statistics.quantiles(xs, n=10)[-1]
            rows.append(f"| {op} | {name} | {len(xs)} | {med:.2f} | {p90:.2f} | {med / base:.3f} |")
    load = os.getloadavg()
    table = [
        "| write | variant | calls | median ms | p90 ms | median / base |",
        "|---|---|---:|---:|---:|---:|",
        *rows,
    ]
    print("\n".join(table))
    cmd = "python bench/write_ack.py " + " ".join(argv)
    doc = [
        "# Write acknowledgement latency: conversations and the consolidator",
        "",
        f"Generated by `{cmd}` on {datetime.now():%Y-%m-%d %H:%M}; load average at the end "
        f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (2 shared cores).",
        "",
        f"`base` is the baseline checkout; `on` this checkout with the background consolidator on ({args.quiet:g} s "
        "quiet time); `off` with it stopped. LLM enrichment is off. Every "
        "text was embedded before the timed calls. `message` is one message per call: `conversation_write` "
        "here, `memory_write` of kind message on the baseline. Rounds are interleaved in a rotating order.",
        "",
        *table,
        "",
    ]
    Path(args.out).write_text("\n".join(doc))


if __name__ == "__main__":
    main(sys.argv[1:])
