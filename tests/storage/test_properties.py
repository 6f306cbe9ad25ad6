"""Property test: any sequence of write / link / amend / retire / purge leaves the three stores in agreement,
and matches a plain-Python model of which memories are current in which scope."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage import CachedEmbedder, Conflict, Engine, NotFound

SCOPES = ["user:a", "user:b", "team:t"]
WORDS = ["apple", "river", "engine", "violet", "copper", "falcon"]

op = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(WORDS), st.sampled_from(WORDS), st.sampled_from(SCOPES)),
    st.tuples(st.just("amend"), st.integers(0, 30), st.sampled_from(WORDS)),
    st.tuples(st.just("retire"), st.integers(0, 30)),
    st.tuples(st.just("purge"), st.sampled_from(SCOPES)),
)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(op, min_size=1, max_size=14))
def test_random_operation_sequences_keep_stores_in_agreement(
    embedder: CachedEmbedder, ops: list[tuple]
) -> None:  # type: ignore[type-arg]
    with tempfile.TemporaryDirectory() as tmp, Engine.open(Path(tmp), embedder=embedder, warm=False) as eng:
        ids: list[str] = []
        current: dict[str, set[str]] = {}  # id -> scopes, for memories that are current
        for o in ops:
            if o[0] == "write":
                r = eng.write(f"{o[1]} {o[2]}", [o[3]])
                ids.append(r.id)
                current.setdefault(r.id, set()).add(o[3])
            elif o[0] in ("amend", "retire") and ids:
                target = ids[o[1] % len(ids)]
                try:
                    if o[0] == "amend":
                        a = eng.amend(target, f"{o[2]} amended {target[:6]}")
                        ids.append(a.id)
                        current.setdefault(a.id, set()).update(current.pop(target))
                    else:
                        eng.retire(target)
                        current.pop(target, None)
                except (Conflict, NotFound) as exc:
                    # only non-current or purged memories may refuse (or an amend to identical content)
                    refused_current = target in current and "identical" not in str(exc)
                    assert not refused_current
            elif o[0] == "purge":
                try:
                    eng.purge(o[1], confirm=o[1])
                except NotFound:
                    assert all(o[1] not in s for s in current.values())
                    continue
                for mid in list(current):
                    current[mid].discard(o[1])
                    if not current[mid]:
                        del current[mid]
        report = eng.verify()
        assert report.ok, report.drift
        assert report.live_memories == len(current)
        for mid, scopes in current.items():
            assert set(eng.read(mid).memory.scopes) == scopes
