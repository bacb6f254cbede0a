"""The real controllers the lever tests run (Argo Rollouts, KEDA, Kueue, JobSet): where
`.ci/build-controllers.sh` put them, and a child process running one against the session's real
kube-apiserver.

Each is built from its upstream Go module through the wrapper module in .ci/controllers/<name>/ into
  ${FIREBREAK_CONTROLLERS_DIR:-$HOME/.cache/firebreak/controllers}/<name>-<version>/
with bin/<binary> and data/ (the CRDs and webhook manifests of that same version, from the module).
.ci/run builds them and exports FIREBREAK_CONTROLLERS_DIR. A controller that is not built fails its
test with the command that builds it: never a skip, never a fall-back to a stand-in.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WRAPPERS = REPO / ".ci" / "controllers"
BUILD = ".ci/build-controllers.sh"


def controllers_root() -> Path:
    return Path(os.environ.get("FIREBREAK_CONTROLLERS_DIR") or Path.home() / ".cache" / "firebreak" / "controllers")


def _env(name: str) -> dict[str, str]:
    """controller.env's assignments (MODULE, PKG, BINARY, DATA), read as the build script's `source` does."""
    out: dict[str, str] = {}
    for line in (WRAPPERS / name / "controller.env").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            words = shlex.split(value)
            out[key] = words[0] if words else ""
    return out


def _version(name: str, module: str) -> str:
    """The version the wrapper's go.mod requires of the upstream module (a direct require)."""
    for line in (WRAPPERS / name / "go.mod").read_text().splitlines():
        words = line.split()
        if words[:2] == ["require", module]:
            return words[2]
        if words[:1] == [module] and "indirect" not in line:
            return words[1]
    raise RuntimeError(f"{module} is not required in .ci/controllers/{name}/go.mod")


@dataclass(frozen=True)
class BuiltController:
    name: str
    version: str
    binary: Path
    data: Path  # the upstream module's files the build copied (CRDs, webhook manifests)


def built(name: str) -> BuiltController:
    """The built controller `name` (a folder of .ci/controllers); fails the test when it is not built."""
    env = _env(name)
    version = _version(name, env["MODULE"])
    home = controllers_root() / f"{name}-{version}"
    binary = home / "bin" / env["BINARY"]
    if not os.access(binary, os.X_OK):
        pytest.fail(
            f"{name} {version} is not built ({binary} is missing): run `bash {BUILD} {name}`"
            " (or set FIREBREAK_CONTROLLERS_DIR to its output)",
            pytrace=False,
        )
    return BuiltController(name=name, version=version, binary=binary, data=home / "data")


def build(name: str) -> subprocess.CompletedProcess[str]:
    """Run the build script for one controller (for a developer's first run; .ci/run builds them all)."""
    return subprocess.run(["bash", str(REPO / BUILD), name], capture_output=True, text=True, check=False)
