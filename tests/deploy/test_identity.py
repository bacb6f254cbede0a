"""Issue 35 item 13: Firebreak's identity in a cell is one setting of tools/deploygen. The RBAC bindings'
subjects and the admission policies' matchConditions are both generated from it, so a site with a cloud
identity cannot bind one identity and leave the policies matching another (the hand patch they replace).
tests/realkube/test_selftest.py shows the running bot catching a mismatch anyway."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tools import deploygen


def _docs(root: Path, rel: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((root / rel).read_text()) if d]


@pytest.mark.parametrize(
    ("setting", "subject", "expression"),
    [
        (
            "group:firebreak-cells",
            {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "firebreak-cells"},
            "'firebreak-cells' in request.userInfo.groups",
        ),
        (
            "user:firebreak@acme-prod.iam.gserviceaccount.com",
            {
                "kind": "User",
                "apiGroup": "rbac.authorization.k8s.io",
                "name": "firebreak@acme-prod.iam.gserviceaccount.com",
            },
            "request.userInfo.username == 'firebreak@acme-prod.iam.gserviceaccount.com'",
        ),
        (
            "serviceaccount:ops/bot",
            {"kind": "ServiceAccount", "name": "bot", "namespace": "ops"},
            "request.userInfo.username == 'system:serviceaccount:ops:bot'",
        ),
    ],
)
def test_one_setting_names_the_identity_in_the_bindings_and_the_policies(tmp_path, setting, subject, expression):
    assert deploygen.main(["--identity", setting, "--out", str(tmp_path)]) == 0
    bindings = _docs(tmp_path, "deploy/rbac/clusterrolebinding.yaml") + [
        d for d in _docs(tmp_path, "deploy/rbac/roles.yaml") if d["kind"] == "RoleBinding"
    ]
    assert len(bindings) > 1 and all(b["subjects"] == [subject] for b in bindings)
    policies = _docs(tmp_path, "deploy/admission/policies.yaml")
    assert policies and all(
        p["spec"]["matchConditions"] == [{"name": "firebreak", "expression": expression}] for p in policies
    )
    assert deploygen.main(["--identity", setting, "--out", str(tmp_path), "--check"]) == 0
    # The shipped files are the default setting's (the ServiceAccount firebreak/firebreak), unchanged.
    assert deploygen.main(["--check"]) == 0


@pytest.mark.parametrize("bad", ["firebreak", "serviceaccount:firebreak", "user:", "group:it's", "robot:x"])
def test_a_setting_that_names_no_identity_is_refused(tmp_path, bad, capsys):
    assert deploygen.main(["--identity", bad, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"deploygen: --identity {bad!r}: ") and "serviceaccount:<namespace>/<name>" in err, err
    assert not (tmp_path / "deploy").exists()
