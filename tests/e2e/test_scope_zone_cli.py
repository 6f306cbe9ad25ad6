"""`mnemograph scope zone`: a person shows and sets the time zone a scope's day and week digests are counted in;
a zone the machine does not know is refused with what to give instead, and nothing changes."""

from __future__ import annotations

import json
import os

import anyio
import pytest

from tests.e2e.conftest import MNEMOGRAPH, Store

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def run(store: Store, *args: str) -> tuple[int, str, str]:
    done = await anyio.run_process([MNEMOGRAPH, *args], env={**os.environ, **store.env()}, check=False)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def test_scope_zone_shows_sets_and_refuses_an_unknown_zone(store: Store) -> None:
    d = ("--data-dir", str(store.data_dir))
    status, _, err = await run(store, "scope", "create", "user:ana", *d)
    assert status == 0, err
    status, out, err = await run(store, "scope", "zone", "user:ana", "--json", *d)
    assert status == 0, err
    assert json.loads(out) == {"scope": "user:ana", "zone": "UTC"}
    status, out, err = await run(store, "scope", "zone", "user:ana", "Mars/Olympus", *d)
    assert status == 2
    assert "Mars/Olympus" in err
    assert "IANA" in err
    assert "nothing was changed" in err
    status, out, err = await run(store, "scope", "zone", "user:ana", "Asia/Tokyo", *d)
    assert status == 0, err
    assert out.strip() == "user:ana: days and weeks in Asia/Tokyo"
    status, out, _ = await run(store, "scope", "zone", "user:ana", "--json", *d)
    assert json.loads(out)["zone"] == "Asia/Tokyo"


async def test_scope_zone_refuses_a_scope_that_does_not_exist_and_a_machine_only_zone(store: Store) -> None:
    d = ("--data-dir", str(store.data_dir))
    status, _, err = await run(store, "scope", "create", "user:ana", *d)
    assert status == 0, err
    status, out, err = await run(store, "scope", "zone", "user:anna", *d)  # a typo: not "in UTC"
    assert status == 2
    assert "no scope user:anna" in err
    assert "UTC" not in out
    status, _, err = await run(store, "scope", "zone", "user:ana", "localtime", *d)
    assert status == 2
    assert "nothing was changed" in err
    status, _, err = await run(store, "scope", "zone", "user:ana", "europe/berlin", *d)
    assert status == 2
    assert "did you mean Europe/Berlin?" in err
    status, out, _ = await run(store, "scope", "zone", "user:ana", "--json", *d)
    assert json.loads(out)["zone"] == "UTC"
