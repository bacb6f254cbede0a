"""The product's wheel and image carry none of the simulated world (world/, fbworld): no emulator
module, no fake, no demo fleet, no CRD. The wheel is built from a copy of this checkout; the
image's build context and COPY lines are read from the Dockerfile and .dockerignore."""

from __future__ import annotations

import fnmatch
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import PurePosixPath

import pytest

from tests.support.deploy import REPO, instructions

WORLD_NAMES = re.compile(r"(^|/)(fbworld|world|demo|emulators?|fakes?)(/|\.py$|$)|emulator|fake_", re.IGNORECASE)
# Files of the world a Dockerfile or wheel must not hold, as checkout paths (one per kind of thing).
WORLD_SAMPLES = [
    "world/pyproject.toml",
    "world/fbworld/__init__.py",
    "world/fbworld/kube/server.py",
    "world/fbworld/kube/crds/keda.sh_scaledobjects.yaml",
    "world/fbworld/slack/server.py",
    "world/fbworld/drills/xid-storm.yaml",
    "tests/conftest.py",
    "bench/ack_bench.py",
]


def _is_crd(name: str, data: bytes) -> bool:
    return name.endswith((".yaml", ".yml")) and b"kind: CustomResourceDefinition" in data


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    # A copy, so the in-tree build (build/, *.egg-info) never touches the checkout.
    src = tmp_path_factory.mktemp("checkout") / "firebreak"
    shutil.copytree(
        REPO, src, ignore=shutil.ignore_patterns(".git", ".venv", "__pycache__", "*.egg-info", "build", "dist")
    )
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run(
        # Build isolation: the backend pyproject.toml asks for, as `pip install .` in the Dockerfile gets it.
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(src)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (built,) = out.glob("firebreak-*.whl")
    return zipfile.ZipFile(built)


def test_the_wheel_is_the_product(wheel: zipfile.ZipFile):
    names = wheel.namelist()
    # Not vacuous: the product is there.
    for expected in ("bot/cli.py", "bot/console/main.py", "levers/__init__.py", "policies/levers.yaml"):
        assert expected in names, expected
    world = [n for n in names if WORLD_NAMES.search(n.split(".dist-info/")[0]) and ".dist-info/" not in n]
    assert world == [], f"emulator or demo modules in the product's wheel: {world}"
    crds = [n for n in names if _is_crd(n, wheel.read(n))]
    assert crds == [], f"CRDs in the product's wheel: {crds}"
    requires = [ln for ln in wheel.read(next(n for n in names if n.endswith("METADATA"))).decode().splitlines()]
    deps = [ln for ln in requires if ln.startswith("Requires-Dist:") and "extra ==" not in ln]
    assert not any("jsonschema" in d or "firebreak-world" in d for d in deps), deps


def test_the_name_check_catches_the_world():
    """The patterns above would see each kind of world file (so the wheel test can fail)."""
    for path in [*WORLD_SAMPLES, "bot/demo/fleet.py", "bot/console/emulator.py", "tests/fakes/slack/server.py"]:
        assert WORLD_NAMES.search(path) or path.startswith(("tests/", "bench/")), path
    crd = REPO / "world/fbworld/kube/crds/keda.sh_scaledobjects.yaml"
    assert _is_crd(crd.name, crd.read_bytes())


# ------------------------------------------------------------------ the image


def _dockerignore_excludes(path: str) -> bool:
    """Docker's rule: the last matching line wins; `!` re-includes. A pattern matches the path or
    one of its parent directories."""
    excluded = False
    lines = (REPO / ".dockerignore").read_text().splitlines()
    parts = PurePosixPath(path).parts
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    for raw in lines:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = line.removeprefix("!").strip("/")
        if pattern.startswith("**/"):
            hit = any(fnmatch.fnmatch(p.split("/")[-1], pattern[3:]) for p in prefixes)
        else:
            hit = any(fnmatch.fnmatch(p, pattern) for p in prefixes)
        if hit:
            excluded = not negate
    return excluded


def test_the_build_context_leaves_out_the_world():
    for path in WORLD_SAMPLES:
        assert _dockerignore_excludes(path), f".dockerignore lets {path} into the image's build context"
    for path in ("pyproject.toml", "bot/cli.py", "levers/__init__.py", "policies/levers.yaml"):
        assert not _dockerignore_excludes(path), f".dockerignore leaves out {path}, which the image needs"


def test_the_dockerfile_copies_only_the_product():
    copies = [args for word, args in instructions() if word in ("COPY", "ADD")]
    assert copies, "no COPY in the Dockerfile"
    for args in copies:
        words = [w for w in args.split() if not w.startswith("--")]
        if any(w.startswith("--from") for w in args.split()):
            continue  # from a build stage, not from the context
        *sources, _dest = words
        for src in sources:
            clean = src.strip("./") or "."
            assert clean != ".", f"COPY {args}: the whole context (world/ included) goes in"
            assert not WORLD_NAMES.search(clean) and not clean.startswith(("tests", "bench")), f"COPY {args}"


def test_the_console_without_the_world_says_in_one_line_how_to_get_it():
    # As an install of the product's wheel alone: fbworld cannot be found.
    code = "import sys; sys.modules['fbworld'] = None; from bot.cli import main; sys.exit(main(['console']))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "./firebreak console" in done.stderr and "pip install ./world" in done.stderr
