"""deploy/rbac and deploy/admission are what `python -m tools.deploygen` writes from the lever catalogue
and policies/levers.yaml: a hand edit, or a catalogue or policy change without regenerating, fails here.
And what it writes follows the policy (the taint key, the kill switch's levels, the namespaces)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest
import yaml

from bot.policy.loader import PolicyError, load_policy
from levers.catalogue import LEVERS
from tests.support.deploy import KUBERNETES_VERSION, REPO, of_kind, one, policy, render
from tests.support.lever_fixtures import write_policy
from tools import deploygen


def test_the_committed_files_are_what_the_generator_writes():
    assert deploygen.differing() == [], "run `python -m tools.deploygen` and commit the result"


def test_the_check_names_a_file_edited_by_hand(tmp_path):
    for rel in deploygen.files():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / rel, tmp_path / rel)
    assert deploygen.differing(tmp_path) == []
    roles = tmp_path / "deploy/rbac/roles.yaml"
    roles.write_text(roles.read_text().replace("verbs: [get, patch]", "verbs: [get, list, patch]", 1))
    assert deploygen.differing(tmp_path) == ["deploy/rbac/roles.yaml"]


def test_the_cli_check_exits_0_on_the_committed_tree():
    done = subprocess.run(
        [sys.executable, "-m", "tools.deploygen", "--check"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr


def test_what_it_writes_follows_the_policy():
    pol = policy()
    pol = pol.model_copy(
        update={
            "namespaces": {
                **pol.namespaces,
                "sandbox-quarantine": ["sbx-a", "sbx-b"],
                "node-quarantine": ["train-a"],  # where its price lists the pods on a node
            },
            "node_quarantine": pol.node_quarantine.model_copy(update={"taint_key": "acme.io/bad-gpu"}),
            "killswitch": pol.killswitch.model_copy(update={"levels": ["off", "ro", "rw"]}),
        }
    )
    out = deploygen.files(pol)
    roles = list(yaml.safe_load_all(out["deploy/rbac/roles.yaml"]))
    pods = {
        r["metadata"]["namespace"]: sorted(v for x in r["rules"] if "pods" in x["resources"] for v in x["verbs"])
        for r in of_kind(roles, "Role")
        if any("pods" in x["resources"] for x in r["rules"])
    }
    assert pods == {"sbx-a": ["get", "patch"], "sbx-b": ["get", "patch"], "train-a": ["list"]}
    policies = {p["metadata"]["name"]: p for p in yaml.safe_load_all(out["deploy/admission/policies.yaml"])}
    nodes = yaml.safe_dump(policies["firebreak-nodes"])
    assert "acme.io/bad-gpu-reason" in nodes and "gpu.corp/" not in nodes
    rank = next(v for v in policies["firebreak-configmaps"]["spec"]["variables"] if v["name"] == "rank")
    assert rank["expression"] == "{'off': 0, 'ro': 1, 'rw': 2}"


def test_every_policy_is_bound_and_matches_only_firebreaks_identity():
    objs = render("cell")
    policies = of_kind(objs, "ValidatingAdmissionPolicy")
    bindings = {b["spec"]["policyName"]: b for b in of_kind(objs, "ValidatingAdmissionPolicyBinding")}
    assert {p["metadata"]["name"] for p in policies} == set(bindings)
    for p in policies:
        assert p["spec"]["failurePolicy"] == "Fail"
        assert p["spec"]["matchConditions"] == [
            {
                "name": "firebreak",
                "expression": "request.userInfo.username == 'system:serviceaccount:firebreak:firebreak'",
            }
        ]
        assert bindings[p["metadata"]["name"]]["spec"]["validationActions"] == ["Deny"]
        for v in p["spec"]["validations"]:
            assert v["message"].startswith(p["metadata"]["name"] + ": "), v  # each refusal names its rule
    [sa] = of_kind(objs, "ServiceAccount")
    assert (sa["metadata"]["namespace"], sa["metadata"]["name"]) == (deploygen.SA_NAMESPACE, deploygen.SA_NAME)


def test_every_kind_a_lever_patches_has_its_policy():
    """The catch-all allows updates of exactly what levers patch, and each of those has its own policy."""
    objs = render("cell")
    covered = set()
    for p in of_kind(objs, "ValidatingAdmissionPolicy"):
        if p["metadata"]["name"] == "firebreak-writes":
            continue
        for rule in p["spec"]["matchConstraints"]["resourceRules"]:
            covered |= {f"{g}/{r}" for g in rule["apiGroups"] for r in rule["resources"]}
    patched = set(deploygen.patched_resources(deploygen.LEVERS.values()))
    assert patched <= covered, patched - covered
    catch_all = one(objs, "ValidatingAdmissionPolicy", "firebreak-writes")
    [check] = catch_all["spec"]["validations"]
    assert f" in {sorted(patched)!s}" in check["expression"]


@pytest.mark.parametrize(
    ("namespaces", "expect"),
    [
        ({"kueue-yolo": ["x"]}, "namespaces: unknown lever(s) ['kueue-yolo']"),
        ({"sandbox-quarantine": ["Sandbox_1"]}, "sandbox-quarantine: ['Sandbox_1'] are not namespace names"),
    ],
)
def test_a_bad_namespaces_entry_is_refused_with_file_and_line(tmp_path, namespaces, expect):
    d = write_policy(tmp_path, namespaces=namespaces)
    with pytest.raises(PolicyError) as err:
        load_policy(d, levers=list(LEVERS))
    msg = str(err.value)
    assert msg.startswith(f"{d / 'levers.yaml'}:") and expect in msg, msg


# CEL the API server gained after Kubernetes 1.30 (k8s.io/apiserver/pkg/cel/environment/base.go):
# two-variable comprehensions (1.32), the format (1.31), semver (1.33) and lists (1.34) libraries.
NEWER_CEL = re.compile(
    r"\.(all|exists|exists_one|existsOne)\(\s*\w+\s*,\s*\w+\s*,|transform(List|Map|MapEntry)\(|\bformat\.|"
    r"\bsemver\(|isSemver\(|\blists\.|\.sortBy\(|\.distinct\(|\.flatten\("
)


def test_the_policies_use_only_the_cel_of_the_oldest_kubernetes_deploy_supports():
    """deploy/ promises Kubernetes 1.30 (tests.support.deploy.KUBERNETES_VERSION): a policy using newer CEL
    would be refused when applied there."""
    assert KUBERNETES_VERSION == "1.30"
    assert NEWER_CEL.search("variables.rules_new.all(i, r, r.x == 1)")  # the check catches what it is for
    for p in of_kind(render("cell"), "ValidatingAdmissionPolicy"):
        spec = p["spec"]
        exprs = [c["expression"] for c in spec.get("matchConditions") or []]
        exprs += [v["expression"] for v in spec.get("variables") or []]
        exprs += [v[k] for v in spec["validations"] for k in ("expression", "messageExpression") if k in v]
        for e in exprs:
            assert not NEWER_CEL.search(e), (p["metadata"]["name"], e)
