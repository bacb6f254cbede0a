"""keda-pause finds its scale target's /scale through the cluster's discovery (the resource name the
cluster serves for scaleTargetRef's apiVersion + kind), and says so plainly when that kind is not served
or the target is missing."""

from __future__ import annotations

import shlex
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml

from fbworld.kube import FakeKubeCluster, default_crd_dir, samples, write_kubeconfig
from levers.store import lever_store
from tests.support.harness import audit_entries
from tests.support.lever_fixtures import seed_cell
from tests.support.levers import OPS, Cells, comparable, kubectl, patches, say

NS = "serve-chat"
PAUSED = "autoscaling.keda.sh/paused-replicas"


# prometheus-operator v0.93.0 (f8fafd475f3d), example/prometheus-operator-crd/monitoring.coreos.com_prometheuses.yaml:
# its names and subresources as upstream; the 830 KB schema is left open (the lever reads only /scale).
# Its kind is Prometheus and its resource `prometheuses`, so no spelling rule gets from one to the other.
PROMETHEUS_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "prometheuses.monitoring.coreos.com"},
    "spec": {
        "group": "monitoring.coreos.com",
        "names": {
            "categories": ["prometheus-operator"],
            "kind": "Prometheus",
            "listKind": "PrometheusList",
            "plural": "prometheuses",
            "shortNames": ["prom"],
            "singular": "prometheus",
        },
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                "served": True,
                "storage": True,
                "subresources": {
                    "scale": {
                        "labelSelectorPath": ".status.selector",
                        "specReplicasPath": ".spec.shards",
                        "statusReplicasPath": ".status.shards",
                    },
                    "status": {},
                },
            }
        ],
    },
}


@pytest.fixture
async def cells(tmp_path: Path) -> AsyncIterator[Cells]:
    """The usual cells, us-east-3 also running prometheus-operator (its Prometheus CRD installed)."""
    crds = tmp_path / "crds"
    crds.mkdir()
    for f in default_crd_dir().glob("*.yaml"):
        (crds / f.name).symlink_to(f)
    (crds / "monitoring.coreos.com_prometheuses.yaml").write_text(yaml.safe_dump(PROMETHEUS_CRD))
    east3 = FakeKubeCluster("us-east-3", crd_dir=crds)
    east1, fleet = FakeKubeCluster("us-east-1"), FakeKubeCluster("global")
    for c in (east3, east1, fleet):
        await c.start()
    seed_cell(east3)
    seed_cell(east1)
    kubeconfig = write_kubeconfig(
        tmp_path / "kubeconfig", {"us-east-3": east3.url, "us-east-1": east1.url, "global": fleet.url}
    )
    yield Cells(east3, east1, fleet, kubeconfig)
    for c in (east3, east1, fleet):
        await c.stop()


def prometheus_cr(name: str, shards: int) -> dict:
    """A sharded Prometheus; KEDA (through the HPA it makes) scales its shards via /scale."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "Prometheus",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"shards": shards, "replicas": 2, "serviceAccountName": "prometheus"},
        "status": {"shards": shards, "selector": f"app.kubernetes.io/instance={name}"},
    }


def scaled_object(name: str, ref: dict) -> dict:
    so = samples.scaled_object(name=name)
    so["spec"]["scaleTargetRef"] = ref
    return so


TARGETS = {
    # KEDA's usual kinds beyond a Deployment: a StatefulSet (apps/v1) and an Argo Rollout (a CRD);
    # and a kind whose resource name is not its lowercased plural (Prometheus -> prometheuses).
    "StatefulSet": (
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "llm-shards"},
        5,
        r"^/apis/apps/v1/namespaces/serve-chat/statefulsets/llm-shards/scale$",
    ),
    "Rollout": (
        {"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "name": "llm-70b"},
        8,
        r"^/apis/argoproj.io/v1alpha1/namespaces/serve-chat/rollouts/llm-70b/scale$",
    ),
    "Prometheus": (
        {"apiVersion": "monitoring.coreos.com/v1", "kind": "Prometheus", "name": "k8s"},
        3,
        r"^/apis/monitoring.coreos.com/v1/namespaces/serve-chat/prometheuses/k8s/scale$",
    ),
}


@pytest.mark.parametrize("kind", sorted(TARGETS))
async def test_pause_reads_the_targets_scale_and_matches_kubectl(kind, app, cells):
    ref, replicas, scale_re = TARGETS[kind]
    cell = cells.east3
    if kind == "StatefulSet":
        cell.put(samples.stateful_set(NS, "llm-shards", replicas))
    if kind == "Prometheus":
        cell.put(prometheus_cr("k8s", replicas))
    cell.put(scaled_object("llm-frozen", ref))
    original = cell.get("scaledobject", "llm-frozen", NS)
    inc = await app.declare(roles={"ops": OPS})
    command = "lever keda-pause serve-chat/llm-frozen --cell us-east-3 replicas=current"  # the count option

    dry = await say(app, command + " --dry-run", OPS, inc.channel_id)
    assert f"paused at {replicas} replicas ({kind} {ref['name']})" in dry, dry
    planned = await lever_store(app.services).get("REQ-1")
    # The printed kubectl line, run with real kubectl on the object as planned, is the reference.
    argv = shlex.split(planned.plan["kubectl"], comments=True)
    assert argv[:3] == ["kubectl", "--context", "us-east-3"], argv
    await kubectl(cells.kubeconfig, "us-east-3", *argv[3:])
    reference = comparable(cell.get("scaledobject", "llm-frozen", NS))
    assert reference["metadata"]["annotations"][PAUSED] == str(replicas)
    cell.put(original)
    original = cell.get("scaledobject", "llm-frozen", NS)
    cell.requests.clear()

    out = await say(app, command, OPS, inc.channel_id)
    assert "applied and verified" in out and f"paused at {replicas} replicas ({kind} {ref['name']})" in out, out
    assert cell.find_requests("GET", scale_re), [r.path for r in cell.requests]
    assert [r.path for r in patches(cell)] == ["/apis/keda.sh/v1alpha1/namespaces/serve-chat/scaledobjects/llm-frozen"]
    assert comparable(cell.get("scaledobject", "llm-frozen", NS)) == reference

    undo = await app.run("undo REQ-2", user=OPS, channel=inc.channel_id)
    assert "undone" in undo, undo
    assert comparable(cell.get("scaledobject", "llm-frozen", NS), False) == comparable(original, False)


async def test_a_target_kind_the_cluster_does_not_serve_is_refused_by_name(app, cells):
    # OpenKruise's Advanced StatefulSet: same kind name as apps/v1, another group, not installed here.
    ref = {"apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet", "name": "llm-shards"}
    cells.east3.put(scaled_object("llm-kruise", ref))
    original = cells.east3.get("scaledobject", "llm-kruise", NS)
    inc = await app.declare(roles={"ops": OPS})
    cells.east3.requests.clear()

    out = await say(
        app, "lever keda-pause serve-chat/llm-kruise --cell us-east-3 replicas=current", OPS, inc.channel_id
    )
    assert "not pulled, nothing changed" in out, out
    assert "scales a StatefulSet (apps.kruise.io/v1beta1), a kind this cluster does not serve" in out, out
    assert not patches(cells.east3)
    assert not cells.east3.find_requests("GET", r"/scale$")  # no path was guessed and tried
    assert cells.east3.get("scaledobject", "llm-kruise", NS) == original
    actions = [e["action"] for e in await audit_entries(app, inc.id)]
    assert "command.lever" in actions, actions


async def test_a_missing_target_is_refused_plainly(app, cells):
    ref = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "llm-gone"}
    cells.east3.put(scaled_object("llm-orphan", ref))
    inc = await app.declare(roles={"ops": OPS})
    cells.east3.requests.clear()

    out = await say(
        app, "lever keda-pause serve-chat/llm-orphan --cell us-east-3 replicas=current", OPS, inc.channel_id
    )
    assert "not pulled, nothing changed" in out, out
    assert "the scale target Deployment serve-chat/llm-gone was not found, or has no /scale" in out, out
    assert not patches(cells.east3)
