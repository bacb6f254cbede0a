"""The project virtualenv is bootstrapped in one place (.ci/venv.sh), for ./firebreak and .ci/run alike."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CALLERS = ("firebreak", ".ci/run")

# A python3 without venv's pip bootstrap, as Debian's is until python3-venv is installed: it passes
# the version check and fails `-m venv` the way the real one does.
NO_ENSUREPIP = """#!/usr/bin/env bash
case "$*" in
  *ensurepip*) exit 1 ;;
  "-m venv"*)
    echo "The virtual environment was not created successfully because ensurepip is not available." >&2
    exit 1 ;;
  *) exit 0 ;;
esac
"""


@pytest.mark.parametrize("caller", CALLERS)
def test_each_caller_sources_the_one_bootstrap(caller: str) -> None:
    text = (REPO / caller).read_text()
    assert ". .ci/venv.sh" in text.splitlines()
    for own_copy in ("-m venv", "venv_usable()", "import ensurepip", "-m pip install"):
        assert own_copy not in text, f"{caller} bootstraps the venv itself ({own_copy!r}); .ci/venv.sh does"


@pytest.mark.parametrize("caller", [*CALLERS, ".ci/venv.sh"])
def test_parses(caller: str) -> None:
    subprocess.run(["bash", "-n", str(REPO / caller)], check=True)


def test_launcher_names_the_missing_package(tmp_path: Path) -> None:
    """A fresh checkout on a python3 without ensurepip: ./firebreak says what to install, in one line."""
    (tmp_path / ".ci").mkdir()
    shutil.copy2(REPO / "firebreak", tmp_path / "firebreak")
    shutil.copy2(REPO / ".ci/venv.sh", tmp_path / ".ci/venv.sh")
    fake = tmp_path / "python3"
    fake.write_text(NO_ENSUREPIP)
    fake.chmod(0o755)
    run = subprocess.run(
        [str(tmp_path / "firebreak"), "--help"],
        env={"PATH": "/usr/bin:/bin", "PYTHON": str(fake)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert run.returncode == 1
    assert run.stderr.splitlines()[-1] == (
        f"firebreak: '{fake} -m venv' cannot install pip: install the python3-venv package "
        "(sudo apt-get install python3-venv) and run again"
    )
    assert not (tmp_path / ".venv").exists()
