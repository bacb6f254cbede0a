"""deploy/rbac grants exactly what Firebreak's code calls in a cell: every lever's `needs`
(levers/catalogue) in the namespaces policies/levers.yaml names for it (a Role in each), the cluster-scoped
kinds and `changed`'s reads (bot/triage/access.py) in the ClusterRole. A verb granted that nothing uses
fails here, and so does a need that is not granted, or one granted in a namespace the policy does not
name; and nothing dangerous is ever granted."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from bot.triage.access import READS
from levers.base import Access, Ctx, Kind, Lever
from levers.catalogue import LEVERS
from levers.catalogue.killswitch import FLAGS_CONFIGMAP
from levers.plan import Plan
from tests.support.deploy import (
    APPLIED,
    OVERLAYS,
    REPO,
    Grant,
    granted,
    needed,
    of_kind,
    one,
    policy,
    rbac_diff,
    render,
)
from tools import deploygen

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
    return sorted(
        f"{g or 'core'}/{r} {v}" + (f" ({n})" if n else "") + (f" in {ns}" if ns else " everywhere")
        for g, r, v, n, ns in grants
    )


def test_the_rbac_grants_exactly_what_the_levers_and_changed_use_where_the_policy_says():
    unused, missing = rbac_diff(granted(cell_rbac()), needed())
    assert not unused, f"granted in deploy/rbac but no lever's `needs` or triage's READS uses it: {_show(unused)}"
    assert not missing, f"a lever or `changed` needs it but deploy/rbac does not grant it: {_show(missing)}"


def test_the_example_overlay_grants_the_same_as_a_cell():
    """Where the home cluster is the cell, it gets exactly a cell's RBAC; the fleet's home gets none."""
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
    pol = policy()
    pol = pol.model_copy(update={"namespaces": {**pol.namespaces, "widget-freeze": ["widgets"]}})
    unused, missing = rbac_diff(granted(cell_rbac()), needed([*LEVERS.values(), _Widgets()], pol=pol))
    assert not unused
    assert missing == {
        ("example.com", "widgets", "get", None, "widgets"),
        ("example.com", "widgets", "patch", None, "widgets"),
        ("example.com", "widgets/status", "patch", None, "widgets"),
    }


def test_the_generator_refuses_a_namespaced_lever_the_policy_gives_no_namespace():
    with pytest.raises(deploygen.GenError, match=r"namespaces: \{widget-freeze: \[<namespace>"):
        deploygen.rbac_files([*LEVERS.values(), _Widgets()], READS, policy())


def test_a_granted_verb_no_lever_uses_fails():
    # Without keda-pause, its ScaledObject, /scale and HPA grants are used by nobody.
    others = [lever for lever in LEVERS.values() if lever.name != "keda-pause"]
    unused, missing = rbac_diff(granted(cell_rbac()), needed(others))
    assert not missing
    ns = "serve-chat"
    assert unused == {
        ("keda.sh", "scaledobjects", "get", None, ns),
        ("keda.sh", "scaledobjects", "patch", None, ns),
        ("apps", "deployments/scale", "get", None, ns),
        ("apps", "statefulsets/scale", "get", None, ns),
        ("argoproj.io", "rollouts/scale", "get", None, ns),
        ("autoscaling", "horizontalpodautoscalers", "get", None, ns),
    }
    # One verb too many on a rule that is otherwise needed.
    rbac = cell_rbac()
    sandbox = next(r for r in of_kind(rbac, "Role") if r["metadata"]["namespace"] == "sbx-tenant-acme")
    next(r for r in sandbox["rules"] if r["resources"] == ["pods"])["verbs"].append("list")
    unused, missing = rbac_diff(granted(rbac), needed())
    assert unused == {("", "pods", "list", None, "sbx-tenant-acme")} and not missing
    # The same rule cluster-wide instead of in its namespace: granted where it is not needed.
    rbac = cell_rbac()
    [cluster] = of_kind(rbac, "ClusterRole")
    cluster["rules"].append({"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "patch"]})
    unused, _ = rbac_diff(granted(rbac), needed())
    assert unused == {("", "pods", "get", None, None), ("", "pods", "patch", None, None)}


# What each namespaced lever patches (its `needs`), from the catalogue. killswitch's namespace is its
# ConfigMap's, not the policy's `namespaces` (the test after this one).
NAMESPACED_WRITES = [
    (lever.name, access.resource)
    for lever in LEVERS.values()
    if lever.kind.namespaced and lever.name != "killswitch"
    for access in lever.needs
    if "patch" in access.verbs
]


@pytest.mark.parametrize(("lever", "resource"), NAMESPACED_WRITES)
def test_a_namespaced_lever_may_write_only_in_the_namespaces_the_policy_names(lever, resource):
    """Sandbox pods only in the sandbox namespaces, routes only in the route table's, and so on."""
    writes = {g for g in granted(cell_rbac()) if g[1] == resource and g[2] == "patch"}
    assert {g[4] for g in writes} == set(policy().namespaces[lever])
    assert all(g[4] is not None for g in writes)


def test_the_killswitch_configmap_is_granted_by_name_only_in_its_namespace():
    grants = granted(cell_rbac())
    configmaps = {g for g in grants if g[1] == "configmaps"}
    ns = "toolgw"
    assert configmaps == {
        ("", "configmaps", "get", FLAGS_CONFIGMAP, ns),
        ("", "configmaps", "patch", FLAGS_CONFIGMAP, ns),
    }
    # A need of any ConfigMap would not be met by the named grant.
    _, missing = rbac_diff(grants, needed(reads=[*READS, Access("", "configmaps", ("get",))]))
    assert missing == {("", "configmaps", "get", None, None)}


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
    roles = {o["metadata"]["namespace"] for o in of_kind(objs, "Role")}
    for binding in of_kind(objs, "ClusterRoleBinding") + of_kind(objs, "RoleBinding"):
        kind = "ClusterRole" if binding["kind"] == "ClusterRoleBinding" else "Role"
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": "firebreak"}
        assert kind == "ClusterRole" or binding["metadata"]["namespace"] in roles, binding
        for subject in binding["subjects"]:
            assert subject["kind"] == "ServiceAccount" and subject["name"] == "firebreak", subject
            assert not subject["name"].startswith("system:"), subject


def bound(objs: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    """(kind, name, namespace) of every subject a ClusterRoleBinding or RoleBinding binds."""
    bindings = of_kind(objs, "ClusterRoleBinding") + of_kind(objs, "RoleBinding")
    return {(s["kind"], s["name"], s.get("namespace", "")) for b in bindings for s in b["subjects"]}


def home(objs: list[dict[str, Any]]) -> tuple[str, str, str]:
    """The ServiceAccount Firebreak's pods run as, rendered in their namespace."""
    dep = one(objs, "Deployment", "firebreak")
    name, ns = dep["spec"]["template"]["spec"]["serviceAccountName"], dep["metadata"]["namespace"]
    assert one(objs, "ServiceAccount", name)["metadata"]["namespace"] == ns
    return ("ServiceAccount", name, ns)


@pytest.mark.parametrize("path", OVERLAYS)
def test_the_home_service_account_is_the_one_bound(path):
    """An overlay that grants anything binds it to Firebreak's own ServiceAccount and nobody else; the
    fleet's home cluster grants and binds nothing (it reaches its cells with the kubeconfig)."""
    objs = render(path)
    grants = of_kind(objs, "ClusterRole") + of_kind(objs, "Role")
    assert bound(objs) == ({home(objs)} if grants else set()), path
    assert grants or path == "overlays/fleet", f"{path} grants nothing"


def test_a_binding_of_another_service_account_is_caught():
    objs = render("overlays/example")
    of_kind(objs, "RoleBinding")[0]["subjects"][0]["name"] = "default"
    assert bound(objs) == {home(objs), ("ServiceAccount", "default", "firebreak")}


def test_every_lever_declares_its_needs_on_its_own_kind():
    """Each lever may at least read and patch what it is pulled on (plan, apply, verify, undo)."""
    for lever in LEVERS.values():
        own = {(a.group, a.resource): set(a.verbs) for a in lever.needs}
        assert {"get", "patch"} <= own.get((lever.kind.group, lever.kind.plural), set()), lever.name
