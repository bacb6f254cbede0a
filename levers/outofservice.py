"""Which GPU nodes cannot take work, and who made them so: Firebreak, Medik8s, NVSentinel, kubectl,
the node lifecycle controller, the cloud.

Automation is part of the blast radius (docs/levers.md, "Safety"): the quarantine floor counts every node that
cannot take new work, whoever did it, not only Firebreak's own quarantines. A node is out when it is
cordoned (`spec.unschedulable`) or carries a NoSchedule or NoExecute taint other than the ones that
only dedicate a node to some pods (policy `node_quarantine.dedicated_taints`, e.g. the GPU pool's
`nvidia.com/gpu`). PreferNoSchedule is a preference, not a fence: not counted.

Who: first by the taint key, which the remediators own (below, each checked against its source):
  Medik8s Self Node Remediation `remediation.medik8s.io/self-node-remediation` (NoSchedule) and
  Fence Agents Remediation `remediation.medik8s.io/fence-agents-remediation`, both started by a
  NodeHealthCheck; their `node.kubernetes.io/out-of-service` (NoExecute, value `nodeshutdown`);
  Node Maintenance `medik8s.io/drain`; the node lifecycle controller's `node.kubernetes.io/not-ready`,
  `unreachable` and the pressure taints; the cloud controller manager's
  `node.cloudprovider.kubernetes.io/shutdown` and `uninitialized`; Karpenter `karpenter.sh/disrupted`;
  cluster-autoscaler `ToBeDeletedByClusterAutoscaler`; GKE `cloud.google.com/impending-node-termination`;
  AWS Node Termination Handler `aws-node-termination-handler/*`. NVSentinel's taints are configurable:
  its `quarantineHealthEvent` annotation names it. A cordon is told by the field manager owning
  `spec.unschedulable` in managedFields (`kubectl-cordon`, `kubectl-drain`, a controller's name).
  `node.kubernetes.io/unschedulable` is only the controller's mirror of a cordon: the cordon says who.
  Anything else: the manager owning `spec.taints`, by name. Taints are an atomic list, so that is
  whoever wrote the list last: a guess the text marks as such.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

FIREBREAK = "Firebreak"
NHC = "NodeHealthCheck (medik8s)"
NMO = "Node Maintenance (medik8s)"
NVSENTINEL = "NVSentinel"
KUBECTL = "kubectl"
LIFECYCLE = "node lifecycle (kube-controller-manager)"
CLOUD = "cloud (cloud-controller-manager)"
UNKNOWN = "unknown"

# Taint key (exact, or a prefix ending in /) -> who puts it there.
_BY_KEY: tuple[tuple[str, str], ...] = (
    ("remediation.medik8s.io/", NHC),
    ("node.kubernetes.io/out-of-service", NHC),
    ("medik8s.io/drain", NMO),
    ("node.kubernetes.io/not-ready", LIFECYCLE),
    ("node.kubernetes.io/unreachable", LIFECYCLE),
    ("node.kubernetes.io/memory-pressure", LIFECYCLE),
    ("node.kubernetes.io/disk-pressure", LIFECYCLE),
    ("node.kubernetes.io/pid-pressure", LIFECYCLE),
    ("node.kubernetes.io/network-unavailable", LIFECYCLE),
    ("node.cloudprovider.kubernetes.io/", CLOUD),
    ("cloud.google.com/impending-node-termination", "cloud (GKE)"),
    ("aws-node-termination-handler/", "cloud (AWS Node Termination Handler)"),
    ("karpenter.sh/", "Karpenter"),
    ("ToBeDeletedByClusterAutoscaler", "cluster-autoscaler"),
)
CORDON_TAINT = "node.kubernetes.io/unschedulable"
NVSENTINEL_ANNOTATIONS = ("quarantineHealthEvent", "nvsentinel.nvidia.com/quarantineHealthEvent")
FENCES = ("NoSchedule", "NoExecute")


@dataclass(frozen=True)
class Cause:
    who: str
    what: str  # "taint remediation.medik8s.io/self-node-remediation:NoSchedule", "cordoned"
    since: float | None = None  # when that manager last wrote the field (managedFields time), if known


@dataclass(frozen=True)
class OutNode:
    name: str
    causes: tuple[Cause, ...]

    @property
    def who(self) -> str:
        """The first cause's actor (the one the floor text groups by)."""
        return self.causes[0].who


def _ts(value: object) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def actor_of(manager: str, taint_key: str = "") -> str:
    """Who a managedFields manager is, in the words the incident uses."""
    m = manager.lower()
    if m == "firebreak":
        return FIREBREAK
    if m.startswith("kubectl"):
        return f"{KUBECTL} ({manager.removeprefix('kubectl-')})" if "-" in manager else KUBECTL
    if m == "kube-controller-manager":
        return LIFECYCLE
    if m == "cloud-controller-manager":
        return CLOUD
    if "node-healthcheck" in m or "self-node-remediation" in m or "fence-agents" in m:
        return NHC
    if "nvsentinel" in m or "fault-quarantine" in m:
        return NVSENTINEL
    if "karpenter" in m:
        return "Karpenter"
    return manager


def _owner(node: dict[str, Any], field: str) -> tuple[str, float | None] | None:
    """The manager owning spec.<field> (the newest entry, if several), with when it wrote."""
    best: tuple[str, float | None] | None = None
    for e in (node.get("metadata") or {}).get("managedFields") or []:
        if not isinstance(e, dict):
            continue
        spec = ((e.get("fieldsV1") or {}).get("f:spec")) or {}
        if isinstance(spec, dict) and f"f:{field}" in spec:
            when = _ts(e.get("time"))
            if best is None or (when or 0) >= (best[1] or 0):
                best = (str(e.get("manager") or UNKNOWN), when)
    return best


def _by_key(key: str, firebreak_key: str) -> str | None:
    if key == firebreak_key:
        return FIREBREAK
    for k, who in _BY_KEY:
        if key == k or (k.endswith("/") and key.startswith(k)):
            return who
    return None


def causes(node: dict[str, Any], firebreak_key: str, dedicated: Iterable[str]) -> tuple[Cause, ...]:
    """Why `node` can't take new work, each with who did it; () when it can."""
    spec = node.get("spec") or {}
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    nvsentinel = any(a in annotations for a in NVSENTINEL_ANNOTATIONS)
    skip = set(dedicated)
    out: list[Cause] = []
    if spec.get("unschedulable") is True:
        owner = _owner(node, "unschedulable")
        who = NVSENTINEL if nvsentinel else actor_of(owner[0]) if owner else UNKNOWN
        out.append(Cause(who, "cordoned", owner[1] if owner else None))
    taints_owner = _owner(node, "taints")
    for t in spec.get("taints") or []:
        if not isinstance(t, dict) or t.get("effect") not in FENCES:
            continue
        key = str(t.get("key") or "")
        if key in skip or (key == CORDON_TAINT and spec.get("unschedulable") is True):
            continue
        value = f"={t['value']}" if t.get("value") else ""
        what = f"taint {key}{value}:{t.get('effect')}"
        by = _by_key(key, firebreak_key)
        if by is None and nvsentinel:
            by = NVSENTINEL
        if by is None:
            by = f"{actor_of(taints_owner[0])} (last wrote the taints)" if taints_owner else UNKNOWN
        out.append(Cause(by, what, _ts(t.get("timeAdded")) or (taints_owner[1] if taints_owner else None)))
    # Firebreak's own quarantine first (it is the one the lever reasons about), then as found.
    out.sort(key=lambda c: c.who != FIREBREAK)
    return tuple(out)


def out_of_service(nodes: Sequence[dict[str, Any]], firebreak_key: str, dedicated: Iterable[str]) -> list[OutNode]:
    """The listed nodes that can't take new work, by name."""
    dedicated = tuple(dedicated)
    found = [OutNode(str(n["metadata"]["name"]), c) for n in nodes if (c := causes(n, firebreak_key, dedicated))]
    return sorted(found, key=lambda o: o.name)


def by_who(out: Sequence[OutNode], limit: int = 5) -> str:
    """ "NodeHealthCheck (medik8s) 5 (gpu-1, gpu-2, …); kubectl (cordon) 1 (gpu-9)" """
    groups: dict[str, list[str]] = {}
    for o in out:
        groups.setdefault(o.who, []).append(o.name)
    parts = []
    for who, names in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        shown = ", ".join(names[:limit]) + (", …" if len(names) > limit else "")
        parts.append(f"{who} {len(names)} ({shown})")
    return "; ".join(parts)
