"""The CRDs the fake Kubernetes server validates against are the upstream files, byte for byte."""

from __future__ import annotations

import hashlib
import re

from fbworld.kube import default_crd_dir

CRDS = default_crd_dir()


def test_vendored_crds_match_the_recorded_upstream_sha256():
    table = (CRDS / "README.md").read_text()
    recorded = dict(re.findall(r"^\| (\S+\.yaml) \|.*\| ([0-9a-f]{64}) \|$", table, re.MULTILINE))
    assert set(recorded) == {p.name for p in CRDS.glob("*.yaml")}  # every vendored CRD is recorded
    for name, digest in recorded.items():
        assert hashlib.sha256((CRDS / name).read_bytes()).hexdigest() == digest, name
