"""The CRDs the fake Kubernetes server validates against are the upstream files, byte for byte."""
from __future__ import annotations

import hashlib
import re
from pathlib import Path

CRDS = Path(__file__).resolve().parents[1] / "fakes" / "kube" / "crds"
SHARED = Path(__file__).resolve().parents[3] / "shared" / "crds"


def test_vendored_crds_match_the_recorded_upstream_sha256():
    table = (CRDS / "README.md").read_text()
    recorded = dict(re.findall(r"^\| (\S+\.yaml) \|.*\| ([0-9a-f]{64}) \|$", table, re.MULTILINE))
    assert len(recorded) == 5
    for name, digest in recorded.items():
        assert hashlib.sha256((CRDS / name).read_bytes()).hexdigest() == digest, name


def test_vendored_crds_match_the_shared_copy_when_it_is_there():
    if not SHARED.is_dir():
        return  # a checkout without the workplace's shared/ folder: the sha256 test above still holds
    for f in SHARED.glob("*.yaml"):
        assert (CRDS / f.name).read_bytes() == f.read_bytes(), f.name
