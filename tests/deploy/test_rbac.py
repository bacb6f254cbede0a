"""The ClusterRole grants exactly what Firebreak's code calls in a cell: the union of every lever's
`needs` (levers/catalogue) and `changed`'s reads (bot/triage/access.py). A verb granted that nothing
uses fails here, and so does a need that is not granted; and nothing dangerous is ever granted."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from bot.triage.access import READS
from levers.base import Access, Ctx, Kind, Lever
from levers.catalogue import LEVERS
from levers.catalogue.killswitch import FLAGS_CONFIGMAP
from levers.plan import Plan
from tests.support.deploy import APPLIED, OVERLAYS, REPO, Grant, granted, needed, of_kind, rbac_diff, render

# What Firebreak never gets in any cell, whatever a lever someday asks for.
NEVER_RESOURCES = {
    "secrets",
    "pods/exec",
    "pods/attach",
    "pods/portforward",
    "pods/proxy",
    "nodes/proxy",
    "serviceaccounts/token",
    "roles",
    "clusterroles",
    "rolebindings",
    "clusterrolebindings",
    "certificatesigningrequests",
}
NEVER_VERBS = {"*", "create", "delete", "deletecollection", "update", "escalate", "bind", "impersonate", "watch"}


def cell_rbac() -> list[dict[str, Any]]:
    """What a cell gets: deploy/cell (the home cluster's own cell, overlays/example, gets the same)."""
    return render("cell")


def _show(grants: set[Grant]) -> list[str]:
    return sorted(f"{g or 'core'}/{r} {v}" + (f" ({n})" if n else "") for g, r, v, n in grants)


def test_the_clusterrole_grants_exactly_what_the_levers_and_changed_use():
    unused, missing = rbac_diff(granted(cell_rbac()), needed())
    assert not unused, f"granted in deploy/rbac but no lever's `needs` or triage's READS uses it: {_show(unused)}"
    assert not missing, f"a lever or `changed` needs it but deploy/rbac does not grant it: {_show(missing)}"


def test_the_example_overlay_grants_the_same_as_a_cell():
    """Where the home cluster is the cell, it gets exactly a cell's ClusterRole; the fleet's home gets none."""
    assert granted(render("overlays/example")) == granted(cell_rbac()) == needed()
    assert not of_kind(render("overlays/fleet"), "ClusterRole") and not of_kind(render("overlays/fleet"), "Role")


class _Widgets(Lever):
    """A lever someone adds without granting its verbs in deploy/rbac."""

    name = "widget-freeze"
    kind = Kind("Widget", "example.com", "v1", "widgets", namespaced=True)
    summary = "freeze a widget"
    needs = (Access.on(kind, "get", "patch"), Access.on(kind, "patch", sub="status"))

    async def plan(self, ctx: Ctx, obj: dict[str, Any]) -> Plan:
        raise NotImplementedError


def test_a_new_lever_whose_verbs_are_not_granted_fails():
    unused, missing = rbac_diff(granted(cell_rbac()), needed([*LEVERS.values(), _Widgets()]))
    assert not unused
    assert missing == {
        ("example.com", "widgets", "get", None),
        ("example.com", "widgets", "patch", None),
        ("example.com", "widgets/status", "patch", None),
    }


def test_a_granted_verb_no_lever_uses_fails():
    # Without keda-pause, its ScaledObject and /scale grants are used by nobody.
    others = [lever for lever in LEVERS.values() if lever.name != "keda-pause"]
    unused, missing = rbac_diff(granted(cell_rbac()), needed(others))
    assert not missing
    assert unused == {
        ("keda.sh", "scaledobjects", "get", None),
        ("keda.sh", "scaledobjects", "patch", None),
        ("apps", "deployments/scale", "get", None),
        ("apps", "statefulsets/scale", "get", None),
        ("argoproj.io", "rollouts/scale", "get", None),
    }
    # One verb too many on a rule that is otherwise needed.
    rbac = cell_rbac()
    [role] = of_kind(rbac, "ClusterRole")
    next(r for r in role["rules"] if r["resources"] == ["pods"])["verbs"].append("list")
    unused, missing = rbac_diff(granted(rbac), needed())
    assert unused == {("", "pods", "list", None)} and not missing


def test_the_killswitch_configmap_is_granted_by_name_only():
    grants = granted(cell_rbac())
    configmaps = {g for g in grants if g[1] == "configmaps"}
    assert configmaps == {("", "configmaps", "get", FLAGS_CONFIGMAP), ("", "configmaps", "patch", FLAGS_CONFIGMAP)}
    # A need of any ConfigMap would not be met by the named grant.
    _, missing = rbac_diff(grants, needed(reads=[*READS, Access("", "configmaps", ("get",))]))
    assert missing == {("", "configmaps", "get", None)}


def test_the_shipped_policy_names_the_configmap_rbac_grants():
    policy = yaml.safe_load((REPO / "policies" / "levers.yaml").read_text())
    assert policy["killswitch"]["configmap"].split("/")[-1] == FLAGS_CONFIGMAP


@pytest.mark.parametrize("path", APPLIED)
def test_nothing_dangerous_is_granted(path):
    objs = render(path)
    for role in of_kind(objs, "ClusterRole") + of_kind(objs, "Role"):
        assert "aggregationRule" not in role
        for rule in role["rules"]:
            assert "nonResourceURLs" not in rule, rule
            assert "*" not in rule["apiGroups"] and "*" not in rule["resources"], rule
            assert not set(rule["resources"]) & NEVER_RESOURCES, rule
            assert not any(r.endswith("/*") or r.startswith("*/") for r in rule["resources"]), rule
            assert not set(rule["verbs"]) & NEVER_VERBS, rule
    for binding in of_kind(objs, "ClusterRoleBinding") + of_kind(objs, "RoleBinding"):
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "firebreak",
        }
        for subject in binding["subjects"]:
            assert subject["kind"] == "ServiceAccount" and subject["name"] == "firebreak", subject
            assert not subject["name"].startswith("system:"), subject


@pytest.mark.parametrize("path", OVERLAYS)
def test_the_home_service_account_is_the_one_bound(path):
    objs = render(path)
    for binding in of_kind(objs, "ClusterRoleBinding"):
        for subject in binding["subjects"]:
            sa = [o for o in of_kind(objs, "ServiceAccount") if o["metadata"]["name"] == subject["name"]]
            assert sa and sa[0]["metadata"]["namespace"] == subject["namespace"]


def test_every_lever_declares_its_needs_on_its_own_kind():
    """Each lever may at least read and patch what it is pulled on (plan, apply, verify, undo)."""
    for lever in LEVERS.values():
        own = {(a.group, a.resource): set(a.verbs) for a in lever.needs}
        assert {"get", "patch"} <= own.get((lever.kind.group, lever.kind.plural), set()), lever.name
