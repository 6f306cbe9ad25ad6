"""Shared benchmark helpers: latency statistics, the machine description, and realistic synthetic memories.

Everything here is deterministic given a seed, so two runs measure the same workload.
"""

from __future__ import annotations

import os
import platform
import random
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import anyio

PACKAGES = ("lancedb", "tantivy", "kuzu", "torch", "sentence-transformers")


@dataclass(frozen=True, slots=True)
class Latency:
    """Percentiles of a list of durations, in milliseconds."""

    n: int
    p50: float
    p95: float
    p99: float = 0.0

    @classmethod
    def of(cls, seconds: list[float]) -> Latency:
        ms = sorted(s * 1000 for s in seconds)
        return cls(len(ms), _quantile(ms, 0.50), _quantile(ms, 0.95), _quantile(ms, 0.99))


def _quantile(ordered: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    pos = (len(ordered) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


async def wait_listening(port: int, within: float = 120) -> None:
    """Return once something accepts TCP connections on 127.0.0.1:``port`` (a server a benchmark started)."""
    with anyio.fail_after(within):
        while True:
            try:
                stream = await anyio.connect_tcp("127.0.0.1", port)
            except OSError:
                await anyio.sleep(0.02)
                continue
            await stream.aclose()
            return


def machine() -> dict[str, str]:
    """Cores, CPU model, RAM, Python and the versions of the packages whose speed we measure."""
    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = next(
        (ln.split(":", 1)[1].strip() for ln in cpuinfo.splitlines() if ln.startswith("model name")), "?"
    )
    meminfo = Path("/proc/meminfo").read_text() if Path("/proc/meminfo").exists() else "MemTotal: 0 kB"
    kib = int(next(ln.split()[1] for ln in meminfo.splitlines() if ln.startswith("MemTotal")))
    info = {
        "cores": str(os.cpu_count()),
        "cpu": model,
        "ram": f"{kib / 2**20:.1f} GiB",
        "python": platform.python_version(),
        "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "unset"),
    }
    for pkg in PACKAGES:
        try:
            info[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            info[pkg] = "not installed"
    return info


def load() -> str:
    """The 1/5/15-minute load averages: how busy the machine was besides us."""
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


# -- synthetic memories ---------------------------------------------------------------------------------


def _split(words: str) -> tuple[str, ...]:
    return tuple(words.split())


_WORDS: dict[str, tuple[str, ...]] = {
    "name": _split(
        "Ana Bruno Chen Dara Elif Farah Gustavo Hana Ivan Jia Kofi Lena Mateo Nadia Omar Priya Quinn Rosa "
        "Sven Tomás Uma Viktor Wen Ximena Yusuf Zara Aiko Bilal Carmen Dmitri Esme Felix Greta Hugo Ines "
        "Jonas Kiran Leila Marco Noor"
    ),
    "city": _split(
        "Lisbon Porto Berlin Nairobi Osaka Toronto Lyon Krakow Austin Seville Bergen Hanoi Lagos Quito "
        "Tbilisi Dublin Montreal Valencia Utrecht Busan Adelaide Tallinn Marrakesh Cusco Ghent"
    ),
    "company": _split(
        "Acme Globex Initech Umbrella Hooli Stark Wayne Vandelay Tyrell Cyberdyne Soylent Dunder"
    ),
    "project": _split("Atlas Borealis Cobalt Dynamo Ember Falcon Granite Helix Iris Juniper Kestrel Lumen"),
    "tool": _split(
        "Postgres Kubernetes Figma Terraform Grafana Airflow Redis Kafka Jira Notion Sentry Snowflake"
    ),
    "drink": ("oat milk flat whites", "green tea", "sparkling water", "cold brew", "chai lattes", "espresso"),
    "food": _split("peanuts shellfish gluten lactose sesame kiwi eggs soy"),
    "pet": _split("dog cat parrot rabbit tortoise"),
    "petname": _split("Biscuit Mochi Pepper Luna Olive Ziggy Pretzel Nori Tofu Waffles"),
    "day": _split("Monday Tuesday Wednesday Thursday Friday Saturday Sunday"),
    "month": _split("January February March April May June July August September October November December"),
    "hobby": ("bouldering", "sourdough baking", "trail running", "chess", "pottery", "birdwatching", "salsa"),
    "language": _split("Portuguese Japanese Swahili German Korean Spanish Georgian Dutch"),
    "book": ("Dune", "Middlemarch", "The Overstory", "Piranesi", "Klara and the Sun", "The Dispossessed"),
    "role": ("data engineer", "product designer", "site reliability engineer", "analyst", "team lead"),
}

_MEMORIES = (
    "{name} prefers {drink} and usually orders them at the café near the {city} office.",
    "{name} moved to {city} in {month} {year} and now works at {company} as a {role}.",
    "The {project} migration to {tool} is blocked on ticket {ticket}; {name} owns the fix.",
    "{name}'s flight to {city} leaves on {day} at {hour}:{minute:02d} from gate {gate}.",
    "{name} is allergic to {food}, so avoid it when booking the team dinner in {city}.",
    "{name} ran {km} km along the river in {city} on {day} and wants to go under {minutes} minutes next time.",
    "Budget for {project} in Q{quarter} is {amount} euros; {name} approved it after a review with {name2}.",
    "{name} and {name2} agreed to ship {project} v{major}.{minor} by {month} {dom}.",
    "{name} uses {tool} for reporting and finds {tool2} too slow for anything over {n} rows.",
    "The wifi password at the {city} office changed; ask {name} at desk {desk} for the new one.",
    "{name} has a {pet} called {petname} who needs medication every {hours} hours.",
    "{name} is reading {book} and is on chapter {chapter}; recommend {book2} next.",
    "{company} reported {n} failed payments on {day}; {name} is checking the {tool} logs.",
    "{name} wants to learn {language} before the trip to {city} in {month}.",
    "{name} spends weekends on {hobby} and joined a club in {city} with {n} members.",
    "Standup moved to {hour}:{minute:02d} on {day}s because {name} is in {city} until {month}.",
    "{name} asked for invoices from {company} to go to {name2} from {month} onwards, reference {ticket}.",
    "{name} rates the {tool} on-call runbook {score}/10 and wants {name2} to rewrite the {project} section.",
)

_QUESTIONS = (
    "What does {name} usually drink near the {city} office?",
    "When does {name}'s flight to {city} leave?",
    "Who owns the fix for the {project} migration to {tool}?",
    "What is {name} allergic to for the dinner in {city}?",
    "What is the budget for {project} that {name} approved?",
    "When will {project} ship according to {name}?",
    "Which tool does {name} find too slow compared with {tool}?",
    "Who knows the new wifi password for the {city} office, {name}?",
    "What is the name of {name}'s {pet}?",
    "Which book is {name} reading before going to {city}?",
    "Why is {name} checking the {tool} logs for {company}?",
    "Which language is {name} learning for {city}?",
    "What does {name} do on weekends in {city}?",
    "Where did {name} move to and does {name} still work at {company}?",
)


class Sentences:
    """An endless supply of distinct, realistic memory sentences and questions (never the same text twice),
    so no cache can answer for the embedder."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)
        self._seen: set[str] = set()

    def memories(self, n: int) -> list[str]:
        return self._take(n, _MEMORIES)

    def questions(self, n: int) -> list[str]:
        return self._take(n, _QUESTIONS)

    def _take(self, n: int, templates: tuple[str, ...]) -> list[str]:
        out: list[str] = []
        for text in self._fill(templates):
            if text not in self._seen:
                self._seen.add(text)
                out.append(text)
                if len(out) == n:
                    return out
        raise AssertionError("unreachable: the generator is endless")

    def _fill(self, templates: tuple[str, ...]) -> Iterator[str]:
        r = self._rng
        while True:
            slots: dict[str, object] = {key: r.choice(values) for key, values in _WORDS.items()}
            slots.update(
                name2=r.choice(_WORDS["name"]),
                tool2=r.choice(_WORDS["tool"]),
                book2=r.choice(_WORDS["book"]),
                year=r.randint(2015, 2025),
                ticket=f"{r.choice(('OPS', 'PAY', 'WEB', 'DATA'))}-{r.randint(100, 9999)}",
                hour=r.randint(6, 21),
                minute=r.choice((0, 5, 15, 20, 30, 40, 45, 50)),
                gate=f"{r.choice('ABCDE')}{r.randint(1, 60)}",
                km=r.randint(3, 42),
                minutes=r.randint(15, 240),
                quarter=r.randint(1, 4),
                amount=f"{r.randint(2, 900) * 1000:,}",
                major=r.randint(1, 9),
                minor=r.randint(0, 20),
                dom=r.randint(1, 28),
                n=r.randint(2, 50_000),
                desk=r.randint(1, 400),
                hours=r.choice((4, 6, 8, 12, 24)),
                chapter=r.randint(1, 60),
                score=r.randint(1, 10),
            )
            yield r.choice(templates).format(**slots)
