"""Rendering deploy/ the way `kubectl apply -k` does (kubectl's built-in kustomize) and reading what
came out: the objects, the RBAC they grant, and the RBAC Firebreak's code says it needs."""

from __future__ import annotations

import copy
import functools
import re
import shutil
import subprocess
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml

from bot.policy.levers import LeversPolicy
from bot.policy.loader import load_policy
from bot.signals.remediation.access import READS as ALARM_READS
from bot.triage.access import IN_NAMESPACES, READS, ROLLOUT_NAMESPACES
from levers.base import Access, Lever
from levers.catalogue import LEVERS
from levers.gitops import READS as GITOPS_READS
from levers.scope import READS as IDENTITY_READS

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
OVERLAYS = ("overlays/example", "overlays/fleet")
# Every kustomization a person applies: the overlays in the home cluster, deploy/cell in each cell.
APPLIED = (*OVERLAYS, "cell")
# The Kubernetes version the objects are validated against (kubernetes-validate's schemas): the oldest
# minor Firebreak's manifests promise to work on (PodDisruptionBudget policy/v1, NetworkPolicy v1,
# seccompProfile and the restricted Pod Security level are older still).
KUBERNETES_VERSION = "1.30"

Obj = dict[str, Any]
# One RBAC permission: (apiGroup, resource[/subresource], verb, resourceName or None for every name,
# namespace or None for every namespace: a ClusterRole's).
Grant = tuple[str, str, str, str | None, str | None]


def kubectl() -> str:
    found = shutil.which("kubectl")
    if found is None:
        raise RuntimeError("kubectl is required to render deploy/ (its built-in kustomize); see .ci/run")
    return found


@functools.cache
def _render(path: str) -> tuple[Obj, ...]:
    done = subprocess.run(
        [kubectl(), "kustomize", str(DEPLOY / path)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, f"kubectl kustomize deploy/{path} failed:\n{done.stderr}"
    return tuple(d for d in yaml.safe_load_all(done.stdout) if d)


def render(path: str) -> list[Obj]:
    """The objects `kubectl apply -k deploy/<path>` would send (copies: change them freely)."""
    return copy.deepcopy(list(_render(path)))


def of_kind(objs: Iterable[Obj], kind: str) -> list[Obj]:
    return [o for o in objs if o["kind"] == kind]


def one(objs: Iterable[Obj], kind: str, name: str) -> Obj:
    found = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"{len(found)} {kind} named {name}"
    return found[0]


def pod_specs(objs: Iterable[Obj]) -> Iterator[tuple[Obj, Obj]]:
    """(workload, its pod spec) for everything that runs pods."""
    for o in objs:
        if o["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
            yield o, o["spec"]["template"]["spec"]
        elif o["kind"] == "CronJob":
            yield o, o["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        elif o["kind"] == "Pod":
            yield o, o["spec"]


# ----------------------------------------------------------------------------------- RBAC


def rule_grants(rules: Iterable[Obj], namespace: str | None = None) -> set[Grant]:
    """Every permission a list of PolicyRules grants (in `namespace`, or everywhere: a ClusterRole's)."""
    out: set[Grant] = set()
    for r in rules:
        names = r.get("resourceNames") or [None]
        for g in r.get("apiGroups") or []:
            for res in r.get("resources") or []:
                for verb in r.get("verbs") or []:
                    for name in names:
                        out.add((g, res, verb, name, namespace))
    return out


def access_grants(needs: Iterable[Access], namespace: str | None = None) -> set[Grant]:
    out: set[Grant] = set()
    for a in needs:
        for verb in a.verbs:
            for name in a.names or (None,):
                out.add((a.group, a.resource, verb, name, namespace))
    return out


def policy() -> LeversPolicy:
    return load_policy(REPO / "policies", levers=list(LEVERS)).levers


def where(lever: Lever, pol: LeversPolicy) -> list[str | None]:
    """Where a lever's namespaced needs are: the killswitch ConfigMap's namespace, else the policy's
    namespaces for it (a cluster-scoped lever's price reads namespaced objects there, or nowhere)."""
    if lever.name == "killswitch":
        return [pol.killswitch.configmap.rpartition("/")[0]]
    return list(pol.namespaces.get(lever.name) or [])


def needed(
    levers: Iterable[Lever] | None = None,
    reads: Iterable[Access] = (*READS, *ALARM_READS, *GITOPS_READS, *IDENTITY_READS),
    pol: LeversPolicy | None = None,
) -> set[Grant]:
    """What Firebreak's code says it calls in a cell: each lever's `needs` on cluster-scoped kinds
    everywhere, its other needs in the namespaces the policy names for it, and `changed`'s reads
    everywhere. A namespaced need that a cluster-wide one already covers is not needed twice."""
    levers = LEVERS.values() if levers is None else levers
    pol = policy() if pol is None else pol
    out = access_grants(reads)
    for ns in pol.namespaces.get(ROLLOUT_NAMESPACES) or []:  # `changed`'s Rollouts and ReplicaSets
        out |= access_grants(IN_NAMESPACES, ns)
    levers = list(levers)
    cluster = {(lv.kind.group, lv.kind.plural) for lv in levers if not lv.kind.namespaced}
    for lever in levers:
        for a in lever.needs:
            # A need on a cluster-scoped kind (nodes, ClusterQueues, a clusterwide policy it reads) is
            # cluster-wide; any other need is in the namespaces where the lever acts or reads.
            scoped = a.cluster or (a.group, a.resource.split("/")[0]) in cluster
            for ns in [None] if scoped else where(lever, pol):
                out |= access_grants([a], ns)
    return {g for g in out if g[4] is None or (*g[:4], None) not in out}


def granted(objs: Iterable[Obj]) -> set[Grant]:
    """What the rendered ClusterRoles and Roles grant (a Role's, in its namespace)."""
    out: set[Grant] = set()
    for o in objs:
        if o["kind"] == "ClusterRole":
            out |= rule_grants(o.get("rules") or [])
        elif o["kind"] == "Role":
            out |= rule_grants(o.get("rules") or [], o["metadata"]["namespace"])
    return out


def rbac_diff(grants: set[Grant], needs: set[Grant]) -> tuple[set[Grant], set[Grant]]:
    """(granted but used by nothing, needed but not granted). A need limited to names is met by a grant
    of every name too, but then that grant is broader than needed: both are reported."""
    return grants - needs, needs - grants


DOCKERFILE = REPO / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments), continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out
