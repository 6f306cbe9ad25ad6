"""How the owner tells that its data directory was removed or replaced (``server.owner._Home``): removed,
renamed or replaced means gone; a path the file system cannot answer for at the moment (a network file system's
EIO or ESTALE, which cannot be produced here, so ``os.stat`` is made to raise it) does not, since stopping then
would leave the stores unclosed for nothing."""

from __future__ import annotations

import errno
import logging
import os
import shutil
from pathlib import Path

import pytest

from server import owner
from server.owner import _Home


def test_a_removed_renamed_or_replaced_directory_is_gone(tmp_path: Path) -> None:
    for how in ("remove", "rename", "replace"):
        data = tmp_path / how
        data.mkdir()
        home = _Home(data)
        assert not home.gone()
        if how == "remove":
            shutil.rmtree(data)
        elif how == "rename":
            data.rename(tmp_path / f"{how}-moved")
        else:
            shutil.rmtree(data)
            data.mkdir()
        assert home.gone(), how


def test_a_path_the_file_system_cannot_answer_for_is_not_taken_for_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    home = _Home(data)
    real = os.stat

    def stale(path: object, *args: object, **kwargs: object) -> os.stat_result:
        if Path(str(path)) == data:
            raise OSError(errno.ESTALE, os.strerror(errno.ESTALE), str(path))
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(owner.os, "stat", stale)
    with caplog.at_level(logging.WARNING, logger=owner.log.name):
        assert not home.gone()
        assert not home.gone()
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1  # once, not every 0.2 s
    assert "cannot check the data directory" in said[0]
    monkeypatch.setattr(owner.os, "stat", real)
    assert not home.gone()
    shutil.rmtree(data)
    monkeypatch.setattr(owner.os, "stat", stale)
    assert home.gone()  # removed: the held descriptor says so, whatever the path answers


def test_a_held_directory_the_file_system_cannot_answer_for_is_not_taken_for_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``os.fstat`` of the held descriptor fails too on a network file system (ESTALE, EIO): it raised out of the
    owner's watch, which stopped the owner as a crash would, the stores unclosed."""
    data = tmp_path / "data"
    data.mkdir()
    home = _Home(data)

    def stale(fd: int) -> os.stat_result:
        raise OSError(errno.ESTALE, os.strerror(errno.ESTALE))

    monkeypatch.setattr(owner.os, "fstat", stale)
    assert not home.gone()
    monkeypatch.undo()
    assert not home.gone()
    shutil.rmtree(data)
    assert home.gone()
