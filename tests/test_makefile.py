"""The Makefile's install step writes nothing on stdout: `make serve` may be what an MCP client runs, and over
stdio stdout is the protocol stream (a newcomer saw make echo every install command and pip's output there).

Run for real, with a stand-in Python whose venv's ``python -m pip`` only prints: no network, no packages."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

FAKE_PYTHON = """#!/bin/sh
# Stands in for python3: "-m venv DIR" makes DIR/bin/python, a python whose every run says something on stdout.
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
  mkdir -p "$3/bin"
  printf '#!/bin/sh\\necho "pip says: $*"\\n' > "$3/bin/python"
  chmod +x "$3/bin/python"
fi
"""


def test_the_install_step_says_nothing_on_stdout(tmp_path: Path) -> None:
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    fake = tmp_path / "fake-python3"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    # As a person's shell or a client runs it: not as a sub-make of `make test` (whose MAKELEVEL and MAKEFLAGS
    # would make this make print "Entering directory" on stdout, which a make started by a client never does).
    env = {
        k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES")
    }
    done = subprocess.run(
        ["make", "install", f"PYTHON={fake}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert (
        "pip says: -m pip install --quiet --retries 1 --extra-index-url" in done.stderr
    )  # it ran, on stderr
    assert "torch==2.13.0" in done.stderr
    assert "installing into .venv" in done.stderr
    assert list(tmp_path.glob(".venv/.installed-*"))  # and a second make does nothing
