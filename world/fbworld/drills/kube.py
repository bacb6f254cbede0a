"""A drill's changes to the demo fleet's Kubernetes API emulators, written as the components that
make them in a real cluster would (NVSentinel's node condition, the kubelet's Warning event, Argo's
new ReplicaSet, someone's route edit), with the real field names, so `/incident changed`, kubectl
and the levers read them as they would read the real thing."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from fbworld.drills.model import (
    BackendWeight,
    Event,
    KubeChange,
    NodeCondition,
    NodeLabels,
    NodeRemediation,
    RolloutRevision,
)
from fbworld.kube import FakeKubeCluster, samples

REVISION = "rollout.argoproj.io/revision"
POD_HASH = "rollouts-pod-template-hash"
# Self Node Remediation's taint (medik8s/self-node-remediation, controllers: NoSchedule while it
# remediates) and the field manager its controller-runtime binary writes with.
SNR_TAINT = "remediation.medik8s.io/self-node-remediation"
SNR_MANAGER = "self-node-remediation-manager"


class KubeChangeError(Exception):
    """The change names a context or object the demo fleet does not have."""


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def apply(clusters: Mapping[str, FakeKubeCluster], change: KubeChange) -> str:
    """Make the change; a short line saying what changed."""
    what = change.what
    cluster = clusters.get(what.context)
    if cluster is None:
        raise KubeChangeError(f"no kube context {what.context!r} in the demo fleet ({', '.join(clusters)})")
    if isinstance(what, NodeCondition):
        return _condition(cluster, what)
    if isinstance(what, Event):
        return _event(cluster, what)
    if isinstance(what, RolloutRevision):
        return _revision(cluster, what)
    if isinstance(what, BackendWeight):
        return _weight(cluster, what)
    if isinstance(what, NodeRemediation):
        return _remediate(cluster, what)
    assert isinstance(what, NodeLabels)
    return _labels(cluster, what)


def _get(cluster: FakeKubeCluster, kind: str, name: str, ns: str | None = None) -> dict[str, Any]:
    obj = cluster.get(kind, name, ns)
    if obj is None:
        where = f"{ns}/{name}" if ns else name
        raise KubeChangeError(f"{cluster.name}: no {kind} {where}")
    return obj


def _split(ref: str) -> tuple[str, str]:
    ns, _, name = ref.partition("/")
    if not name:
        raise KubeChangeError(f"{ref!r}: use <namespace>/<name>")
    return ns, name


def _condition(cluster: FakeKubeCluster, c: NodeCondition) -> str:
    node = _get(cluster, "nodes", c.node)
    conds = node.setdefault("status", {}).setdefault("conditions", [])
    t = now_rfc3339()
    old = next((x for x in conds if x.get("type") == c.type), None)
    moved = old is None or old.get("status") != c.status
    conds[:] = [x for x in conds if x.get("type") != c.type]
    conds.append(
        {
            "type": c.type,
            "status": c.status,
            "reason": c.reason,
            "message": c.message,
            "lastHeartbeatTime": t,
            "lastTransitionTime": t if moved or old is None else old.get("lastTransitionTime", t),
        }
    )
    cluster.put(node)
    return f"node {c.node} ({c.context}): {c.type}={c.status}"


def _event(cluster: FakeKubeCluster, e: Event) -> str:
    t = now_rfc3339()
    ns = e.namespace or "default"
    involved: dict[str, Any] = {"kind": e.kind, "name": e.name, "apiVersion": _api_version(e.kind)}
    if e.namespace:
        involved["namespace"] = e.namespace
    cluster.put(
        {
            "apiVersion": "v1",
            "kind": "Event",
            # The kubelet names an event after its object and a unique suffix.
            "metadata": {"name": f"{e.name}.{uuid.uuid4().hex[:16]}", "namespace": ns},
            "involvedObject": involved,
            "reason": e.reason,
            "message": e.message,
            "type": e.type,
            "count": e.count,
            "firstTimestamp": t,
            "lastTimestamp": t,
            "source": {"component": e.component},
            "reportingComponent": e.component,
        }
    )
    return f"{e.type} event {e.reason} on {e.kind} {e.name} ({e.context})"


def _api_version(kind: str) -> str:
    return {"Rollout": "argoproj.io/v1alpha1", "ReplicaSet": "apps/v1", "Deployment": "apps/v1"}.get(kind, "v1")


def _revision(cluster: FakeKubeCluster, r: RolloutRevision) -> str:
    ns, name = _split(r.rollout)
    ro = _get(cluster, "rollouts", name, ns)
    meta, spec, status = ro["metadata"], ro["spec"], ro.setdefault("status", {})
    meta.setdefault("annotations", {})[REVISION] = str(r.revision)
    meta["generation"] = meta.get("generation", 1) + 1
    spec["template"]["spec"]["containers"][0]["args"] = list(r.args)
    total = spec.get("replicas", 1)
    canary = max(1, round(total * r.canary_weight / 100)) if r.canary_weight else 0
    old_canary, stable = status.get("currentPodHash"), status.get("stableRS")
    for rs in cluster.list("replicasets", ns):
        h = (rs["metadata"].get("labels") or {}).get(POD_HASH)
        if h == old_canary and h != stable:
            _scale(cluster, rs, 0)  # the superseded canary goes away
        elif h == stable:
            _scale(cluster, rs, total - canary)
    cluster.put(samples.replica_set(ro, r.pod_hash, canary, str(r.revision)))
    _canary_status(status, r, total, canary)
    cluster.put(ro)
    return f"rollout {r.rollout} ({r.context}): revision {r.revision} at {r.canary_weight}% canary"


def _scale(cluster: FakeKubeCluster, rs: dict[str, Any], replicas: int) -> None:
    rs["spec"]["replicas"] = replicas
    rs["status"] = {
        **(rs.get("status") or {}),
        "replicas": replicas,
        "fullyLabeledReplicas": replicas,
        "readyReplicas": replicas,
        "availableReplicas": replicas,
    }
    cluster.put(rs)


def _canary_status(status: dict[str, Any], r: RolloutRevision, total: int, canary: int) -> None:
    status.update(
        phase="Paused",
        message="CanaryPauseStep",
        currentStepIndex=1,
        currentPodHash=r.pod_hash,
        currentStepHash=r.pod_hash[::-1],
        updatedReplicas=canary,
        replicas=total,
        readyReplicas=total,
        availableReplicas=total,
        pauseConditions=[{"reason": "CanaryPauseStep", "startTime": now_rfc3339()}],
    )
    status.pop("abort", None)
    status.pop("abortedAt", None)
    weights = copy.deepcopy((status.get("canary") or {}).get("weights") or {})
    weights["canary"] = {**weights.get("canary", {}), "weight": r.canary_weight, "podTemplateHash": r.pod_hash}
    weights["stable"] = {**weights.get("stable", {}), "weight": 100 - r.canary_weight}
    status.setdefault("canary", {})["weights"] = weights


def _weight(cluster: FakeKubeCluster, w: BackendWeight) -> str:
    ns, name = _split(w.route)
    route = _get(cluster, "httproutes", name, ns)
    refs = [b for rule in route["spec"].get("rules") or [] for b in rule.get("backendRefs") or []]
    hit = [b for b in refs if b.get("name") == w.backend]
    if not hit:
        raise KubeChangeError(f"{w.route} has no backend {w.backend}")
    for b in hit:
        b["weight"] = w.weight
    route["metadata"]["generation"] = route["metadata"].get("generation", 1) + 1
    cluster.put(route)
    return f"route {w.route} ({w.context}): {w.backend} weight {w.weight}"


def _labels(cluster: FakeKubeCluster, n: NodeLabels) -> str:
    for name in n.nodes:
        node = _get(cluster, "nodes", name)
        node["metadata"].setdefault("labels", {}).update(n.labels)
        cluster.put(node)
    return f"{len(n.nodes)} node(s) in {n.context} relabelled"


def _remediate(cluster: FakeKubeCluster, r: NodeRemediation) -> str:
    nhc = _get(cluster, "nodehealthchecks", r.nhc)
    t = now_rfc3339()
    for name in r.nodes:
        node = _get(cluster, "nodes", name)
        taints = node.setdefault("spec", {}).setdefault("taints", [])
        if not any(x.get("key") == SNR_TAINT for x in taints):
            taints.append({"key": SNR_TAINT, "effect": "NoSchedule", "timeAdded": t})
        fields = node["metadata"].setdefault("managedFields", [])
        fields.append(
            {
                "manager": SNR_MANAGER,
                "operation": "Update",
                "apiVersion": "v1",
                "time": t,
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:taints": {}}},
            }
        )
        cluster.put(node)
    status = nhc.setdefault("status", {})
    unhealthy = status.setdefault("unhealthyNodes", [])
    known = {u.get("name") for u in unhealthy}
    for name in r.nodes:
        if name in known:
            continue
        snr = {"apiVersion": "self-node-remediation.medik8s.io/v1alpha1", "kind": "SelfNodeRemediation", "name": name}
        unhealthy.append({"name": name, "remediations": [{"resource": snr, "started": t}]})
        status.setdefault("inFlightRemediations", {})[name] = t
    status["healthyNodes"] = max(0, int(status.get("observedNodes", 0)) - len(unhealthy))
    cluster.put(nhc)
    return f"NodeHealthCheck {r.nhc} ({r.context}): Self Node Remediation on {len(r.nodes)} node(s)"
