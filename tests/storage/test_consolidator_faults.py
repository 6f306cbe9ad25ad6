"""The background consolidator with a poisoned key: one key whose digest build raises and one whose due time
cannot be worked out do not stop the others, are logged, and are tried again only after ``RETRY_AFTER``."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

from storage.enrich.consolidate import Consolidator


def test_a_key_whose_build_or_due_time_raises_stops_no_other_key() -> None:
    changed = datetime.now(UTC) - timedelta(hours=1)
    pending = {"a": changed, "bad-build": changed, "bad-hold": changed, "b": changed}
    lock = threading.Lock()
    built: list[str] = []
    tries = {"bad-build": 0, "bad-hold": 0}

    def current() -> list[tuple[str, datetime]]:
        with lock:
            return sorted(pending.items())

    def build(key: str) -> bool:
        if key in tries:
            tries[key] += 1
        if key == "bad-build":
            raise RuntimeError("a corrupt source")
        with lock:
            pending.pop(key, None)
        built.append(key)
        return True

    def hold(key: str, _changed: datetime) -> datetime | None:
        if key == "bad-hold":
            raise ValueError("a day that cannot be read")
        return None

    c = Consolidator(current, build, quiet=0, hold=hold)
    c.start()
    try:
        assert c.wait_idle(30)  # the poisoned keys wait for their retry: nothing else is left
        assert sorted(built) == ["a", "b"]
        assert c.builds == 2
        assert tries == {"bad-build": 1, "bad-hold": 0}  # tried once, not again before RETRY_AFTER
        # A flush (`mnemograph digests`) tries every key again at once (it does not ask when one is due), and
        # reports what it built.
        assert c.flush() == 1
        assert tries["bad-hold"] == 1
        assert (
            tries["bad-build"] > 1
        )  # tried again (in each of the flush's passes), and still reported unbuilt
        assert sorted(built) == ["a", "b", "bad-hold"]
    finally:
        c.close()
