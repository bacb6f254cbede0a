"""Every lever, `changed` and the remediation alarm, against the fake API server with ONLY the rules of the rendered
ClusterRole and Roles (world/fbworld/kube answers 403 as RBAC would, a Role's rules only in its
namespace): dry run, pull, verify and undo each, and nothing is forbidden. And every permission
deploy/rbac grants is used by some call: the grant is exactly what the code does, checked on the wire
as well as against the declared `needs`. (tests/realkube runs the same RBAC on a real kube-apiserver.)"""

from __future__ import annotations

import asyncio
import re

import pytest
import yaml

from bot.signals.remediation import watch
from fbworld.kube import FakeKubeCluster, Rule, samples
from fbworld.kube.auth import request_info
from levers import hooks
from levers.catalogue import LEVERS
from levers.executor import execute_approved
from levers.store import lever_store
from tests.support import extra_crds
from tests.support.catalogue import assert_every_lever, lever_of
from tests.support.deploy import Grant, granted, of_kind, render
from tests.support.levers import MODEL, OPS, SEC, replace_hook, say

# Self Node Remediation's fence, a remediation cause as levers/outofservice.py reads it.
SNR_TAINT_KEY = "remediation.medik8s.io/self-node-remediation"

NS = "serve-chat"


@pytest.fixture(autouse=True)
def cni_and_flux(tmp_path_factory, monkeypatch) -> None:
    """The cells serve Cilium's, Calico's and Flux's kinds, so sandbox-quarantine lists those policies and
    a Flux-managed object's Kustomization or HelmRelease is read (tests/support/extra_crds.py)."""
    extra_crds.serve(monkeypatch, tmp_path_factory, [*extra_crds.CILIUM, *extra_crds.CALICO, *extra_crds.FLUX])


@pytest.fixture
def policy_overrides() -> dict:
    # The Flux-managed objects below are read back again this soon (their intervals are longer).
    return {"rollout_verify_seconds": 2, "api_timeout_seconds": 2, "gitops_resync_seconds": 0.2}


def flux_manage(cell: FakeKubeCluster) -> None:
    """The kill-switch ConfigMap from a Flux Kustomization, the JobSet from a HelmRelease."""
    cell.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "flux-system"}})
    source = {"kind": "GitRepository", "name": "fleet"}
    meta = {"namespace": "flux-system"}
    cell.put(
        {
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
            "kind": "Kustomization",
            "metadata": {"name": "toolgw", **meta},
            "spec": {"interval": "10m", "prune": True, "sourceRef": source},
        }
    )
    cell.put({"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
              "metadata": {"name": "train", **meta}, "spec": {"interval": "5m"}})  # fmt: skip
    for kind, name, ns, group, owner in (
        ("configmap", "toolgw-flags", "toolgw", "kustomize.toolkit.fluxcd.io", "toolgw"),
        ("jobset", "pretrain-405b", "train-llm", "helm.toolkit.fluxcd.io", "train"),
    ):
        obj = cell.get(kind, name, ns)
        obj["metadata"].setdefault("labels", {}).update({f"{group}/name": owner, f"{group}/namespace": "flux-system"})
        cell.put(obj)


@pytest.fixture
def app_settings(prometheus) -> dict:
    """route-weight checks the receivers' headroom in Prometheus; `changed` reads demand there."""
    return {"prometheus_url": prometheus.url}


def clusterrole_rules() -> list[Rule]:
    """The rendered ClusterRole's rules and every Role's, each Role's limited to its namespace."""
    objs = render("overlays/example")
    out = []
    for role in of_kind(objs, "ClusterRole") + of_kind(objs, "Role"):
        ns = role["metadata"].get("namespace") if role["kind"] == "Role" else None
        out += [
            Rule(r["verbs"], r["apiGroups"], r["resources"], r.get("resourceNames") or (), namespace=ns)
            for r in role["rules"]
        ]
    return out


def scaled(name: str, api_version: str, kind: str, target: str) -> dict:
    so = samples.scaled_object(name=name, target=target)
    so["spec"]["scaleTargetRef"] = {"apiVersion": api_version, "kind": kind, "name": target}
    return so


def req_of(reply: str) -> str:
    found = re.search(r"\bREQ-\d+\b", reply)
    assert found, reply
    return found.group(0)


async def admitted(cell: FakeKubeCluster, ns: str, seconds: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while loop.time() < deadline:
        for wl in cell.list("workloads", ns):
            if any(c["type"] == "Admitted" and c["status"] == "True" for c in wl["status"].get("conditions") or []):
                return
        await asyncio.sleep(0.05)
    raise AssertionError("Kueue did not admit the JobSet")


# (command, who pulls it): every lever, each scale-target kind keda-pause is granted, and both ways
# jobset-suspend stops a JobSet (spec.suspend; a Kueue-queued one through its Workload).
PULLS = [
    ("lever kueue-hold research-h100 --cell us-east-3", OPS),
    ("lever kueue-hold-drain research-h100 --cell us-east-3", OPS),
    ("lever keda-pause serve-chat/llm-70b --cell us-east-3", OPS),  # paused=true: reads no scale target
    # The count option reads the scale target: a Deployment (KEDA's default kind), a StatefulSet, a Rollout.
    ("lever keda-pause serve-chat/llm-70b --cell us-east-3 replicas=current", OPS),
    ("lever keda-pause serve-chat/llm-sts --cell us-east-3 replicas=current", OPS),
    ("lever keda-pause serve-chat/llm-ro --cell us-east-3 replicas=current", OPS),
    # Scale-in only: verify reads KEDA's HPA (no KEDA runs on these cells: read, found unchanged).
    ("lever keda-pause serve-chat/llm-70b --cell us-east-3 only=scale-in", OPS),
    ("lever node-quarantine gpu-a3-0001 --cell us-east-3 reason=xid79", OPS),
    ("lever remediation-pause nhc-gpu --cell us-east-3", OPS),  # a NodeHealthCheck's own pause entry
    ("lever jobset-suspend train-llm/pretrain-405b --cell us-east-3", OPS),
    ("lever jobset-suspend train-llm/finetune-8b --cell us-east-1", OPS),  # Kueue-queued
    ("lever killswitch toolgw/toolgw-flags --cell us-east-3 tenant=acme level=read", SEC),
    ("lever sandbox-quarantine sbx-tenant-acme/sess-7f3a9c-0 --cell us-east-3", SEC),
    ("lever route-weight edge/chat-global backend=cell-us-east-1", OPS),  # the fleet context
    ("lever rollout-abort serve-chat/llm-70b --cell us-east-3", MODEL),  # last: no undo
]


def test_the_pulls_name_every_lever():
    assert_every_lever((lever_of(command) for command, _ in PULLS), "tests/deploy/test_rbac_live.py PULLS")


async def test_every_lever_and_changed_run_under_exactly_the_clusterrole(app, cells):
    east3, east1, fleet = cells.east3, cells.east1, cells.fleet
    east3.put(samples.stateful_set(NS, "llm-sts"))
    east3.put(scaled("llm-sts", "apps/v1", "StatefulSet", "llm-sts"))
    # The HPA KEDA keeps for llm-70b (keda-hpa-<name>), scale-down enabled: what scale-in-only verify reads.
    east3.put(
        {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "keda-hpa-llm-70b", "namespace": NS},
            "spec": {
                "scaleTargetRef": {"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "name": "llm-70b"},
                "minReplicas": 2,
                "maxReplicas": 12,
            },
        }
    )
    east3.put(scaled("llm-ro", "argoproj.io/v1alpha1", "Rollout", "llm-70b"))
    for rs in samples.rollout_replica_sets(east3.get("rollout", "llm-70b", NS)):
        east3.put(rs)
    east3.start_controller("argo", interval=0.1)
    east1.put(samples.kueue_jobset(name="finetune-8b"))
    flux_manage(east3)
    east1.start_controller("kueue", interval=0.1)
    await admitted(east1, "train-llm")

    rules = clusterrole_rules()
    for cell in (east3, east1, fleet):
        cell.allow_only(*rules)
        cell.requests.clear()
    asked = []

    async def ask(svc, inc, rec):
        asked.append(rec)

    replace_hook(app, hooks.APPROVAL_REQUESTED, ask)
    inc = await app.declare(cells=("us-east-3", "us-east-1"), roles={"ops": OPS, "model": MODEL, "security": SEC})
    store = lever_store(app.services)

    for command, user in PULLS:
        dry = await say(app, f"{command} --dry-run", user, inc.channel_id)
        assert "(dry run)" in dry and "Nothing was changed" in dry, dry
        planned = await store.get(req_of(dry))
        assert planned.result["ok"] is True, (command, planned.result)  # the API server accepted each call

        asked.clear()
        out = await say(app, command, user, inc.channel_id)
        req = req_of(out)
        if asked:  # needs approval: the IC approves
            assert "needs approval" in out, out
            rec = asked[-1]
            assert await store.transition(rec.id, {"pending_approval"}, "approved", approved_by="U_IC")
            out = (await execute_approved(app.services, rec.id, "U_IC")).message
        rec = await store.get(req)
        # Without KEDA, nobody disables the HPA's scale-down: the pull is done and says NOT verified.
        verified = "only=scale-in" not in command
        assert rec.state == "done" and rec.result.get("verified") is verified, (command, out)
        if LEVERS[rec.lever].reversible:  # rollout-abort and killswitch: a person puts them back
            undo = await app.run(f"undo {req}", user=user, channel=inc.channel_id)
            assert "undone" in undo and (await store.get(req)).state == "undone", undo

    # changed: Rollouts, their ReplicaSets, GPU nodes, Warning events in each of the incident's cells.
    out = await app.reply(await app.command("changed", user=OPS, channel=inc.channel_id), timeout=30)
    assert out.startswith(f"What changed in the last 6h for {inc.id} posted"), out
    [post] = [m for m in app.slack.messages(inc.channel_id) if str(m.get("text", "")).startswith("What changed")]
    shown = yaml.safe_dump(post["blocks"])
    assert "Warning events" in shown and "403" not in shown and "Forbidden" not in shown, shown

    # The remediation alarm: each cell's GPU nodes every poll and, to offer remediation-pause, the
    # NodeHealthChecks. One node fenced by Self Node Remediation twice in a few minutes makes it post
    # (a remediation cause: a bare cordon is not one).
    await watch.watch_all(app.services)
    for fenced in (True, False, True):
        node = east3.get("node", "gpu-a3-0002")
        others = [t for t in node["spec"].get("taints") or [] if t["key"] != SNR_TAINT_KEY]
        node["spec"]["taints"] = [*others, {"key": SNR_TAINT_KEY, "effect": "NoSchedule"}] if fenced else others
        east3.put(node)
        app.clock.advance(60)
        await watch.watch_all(app.services)
    alarm = [
        str(m.get("text", ""))
        for m in app.slack.messages(inc.channel_id)
        if "*Remediation alarm, " in str(m.get("text", ""))
    ]
    assert len(alarm) == 1 and "`/incident lever remediation-pause nhc-gpu --cell us-east-3`" in alarm[0], alarm

    calls = [(c.name, r) for c in (east3, east1, fleet) for r in c.requests]
    forbidden = [(name, r.method, r.path) for name, r in calls if r.status == 403]
    assert not forbidden, forbidden
    assert all(r.status is not None and r.status < 400 for _, r in calls), [
        (name, r.method, r.path, r.status) for name, r in calls if (r.status or 500) >= 400
    ]
    used: set[Grant] = set()
    for _, r in calls:
        info = request_info(r.method, r.path, r.query)
        if info.is_resource:
            resource = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
            used.add((info.group, resource, info.verb, None, info.namespace or None))
    # A grant is used when a call fell under it: a cluster-wide one by a call in any namespace.
    grants = {(g, res, verb, None, ns) for g, res, verb, _, ns in granted(render("overlays/example"))}
    unused = {g for g in grants if not any(u[:3] == g[:3] and g[4] in (None, u[4]) for u in used)}
    assert unused == set(), (
        f"granted, but no lever, `changed` or the remediation alarm called it: {sorted(unused, key=str)}"
    )
    uncovered = {u for u in used if not any(u[:3] == g[:3] and g[4] in (None, u[4]) for g in grants)}
    assert uncovered == set()


async def test_without_its_rule_a_lever_gets_the_api_servers_403(app, cells):
    """The negative control: the same fake, the RBAC less `rollouts/status`, and rollout-abort is
    refused by the API server, naming what is missing (so the test above would catch a missing verb)."""
    rules = [r for r in clusterrole_rules() if list(r.resources) != ["rollouts/status"]]
    assert len(rules) == len(clusterrole_rules()) - 1
    cells.east3.allow_only(*rules)
    inc = await app.declare(roles={"model": MODEL})
    out = await say(app, "lever rollout-abort serve-chat/llm-70b --cell us-east-3", MODEL, inc.channel_id)
    assert "403" in out and 'cannot patch resource "rollouts/status"' in out, out
    assert (await lever_store(app.services).get(req_of(out))).state != "done"
    assert [r.status for r in cells.east3.requests if r.path.endswith("/status")] == [403]
