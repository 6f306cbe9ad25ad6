"""Runtime paths: one short, private directory per data directory, whatever the data directory's length."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from server._runtime import RuntimeDirError, RuntimePaths


def test_the_same_data_directory_always_maps_to_the_same_sockets(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    link = tmp_path / "link"
    link.symlink_to(data)
    a = RuntimePaths.of(tmp_path / "rt", data)
    b = RuntimePaths.of(tmp_path / "rt", link)  # a symlink resolves to the same directory
    assert a == b
    assert a.mcp_socket != RuntimePaths.of(tmp_path / "rt", tmp_path / "other").mcp_socket


def test_a_very_deep_data_directory_still_gets_a_short_socket_path(tmp_path: Path) -> None:
    deep = tmp_path.joinpath(*["a-rather-long-directory-name"] * 12)
    paths = RuntimePaths.of(Path("/tmp/mnemograph-test"), deep)
    assert len(os.fsencode(paths.mcp_socket)) < 100


def test_a_runtime_directory_too_long_for_sockets_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RuntimeDirError, match="too long for Unix sockets"):
        RuntimePaths.of(tmp_path / ("x" * 120), tmp_path)


def test_the_runtime_directory_is_created_private_and_must_stay_private(tmp_path: Path) -> None:
    paths = RuntimePaths.of(tmp_path / "rt", tmp_path / "data")
    paths.ensure()
    assert paths.root.stat().st_mode & 0o777 == 0o700
    paths.root.chmod(0o755)
    with pytest.raises(RuntimeDirError, match="accessible to other users"):
        paths.ensure()
