"""On the real kube-apiserver, as the bot's ServiceAccount through deploy/'s RBAC (issue 34):
sandbox-quarantine reads Cilium's and Calico's policies where their CRDs are served, and a lever on an
object Flux manages reads the Kustomization's spec.interval. Neither Cilium, Calico nor Flux runs here:
their CRDs are served (tests/realkube/crds/README.md) so the server checks the objects and the bot's
reads go through the real authorizer; what is tested is what the bot reads and says."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fbworld.kube import samples
from levers import hooks
from levers.executor import execute_approved
from levers.store import lever_store
from tests.support.kube_apiserver import KubeAPIServer
from tests.support.levers import OPS, SEC, replace_hook, say

CRDS = Path(__file__).resolve().parent / "crds"
SBX = "sbx-tenant-acme"
POD = "sess-7f3a9c-0"


def cilium_crd(kind: str, plural: str, scope: str) -> dict:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.cilium.io"},
        "spec": {
            "group": "cilium.io",
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower()},
            "scope": scope,
            "versions": [
                {
                    "name": "v2",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                }
            ],
        },
    }


CILIUM = [
    cilium_crd("CiliumNetworkPolicy", "ciliumnetworkpolicies", "Namespaced"),
    cilium_crd("CiliumClusterwideNetworkPolicy", "ciliumclusterwidenetworkpolicies", "Cluster"),
]
CRD_NAMES = [
    "ciliumnetworkpolicies.cilium.io",
    "ciliumclusterwidenetworkpolicies.cilium.io",
    "globalnetworkpolicies.crd.projectcalico.org",
    "kustomizations.kustomize.toolkit.fluxcd.io",
]


@pytest.fixture(scope="module")
def served(deployed: KubeAPIServer) -> Iterator[KubeAPIServer]:
    s = deployed
    s.kubectl("apply", "--server-side", "--field-manager", "test-setup", "-f", str(CRDS))
    s.apply(*CILIUM)
    s.kubectl("wait", "--for", "condition=Established", "--timeout", "60s", *(f"crd/{n}" for n in CRD_NAMES))
    for _ in range(300):  # Established is not yet listable (the watch cache fills first)
        if s.kubectl_result("get", ",".join(CRD_NAMES), "-A", "-o", "name").returncode == 0:
            break
    s.namespace("flux-system")
    try:
        yield s
    finally:
        s.kubectl("delete", "crd", *CRD_NAMES, "--ignore-not-found")


async def quarantine(app) -> str:
    """Pull sandbox-quarantine as the security lead; this server is the cell and the fleet context, so the
    IC's approval is asked, and given here."""
    asked = []

    async def ask(svc, inc, rec):
        asked.append(rec)

    replace_hook(app, hooks.APPROVAL_REQUESTED, ask)
    inc = await app.declare(roles={"security": SEC})
    out = await say(app, f"lever sandbox-quarantine {SBX}/{POD} --cell us-east-3", SEC, inc.channel_id, timeout=60)
    if asked:
        assert "needs approval" in out, out
        assert await lever_store(app.services).transition(asked[-1].id, {"pending_approval"}, "approved")
        out = (await execute_approved(app.services, asked[-1].id, "U_IC")).message
    return out


@pytest.fixture
def sandbox_pod(served: KubeAPIServer) -> Iterator[KubeAPIServer]:
    pod = samples.pod()
    pod.pop("status", None)
    served.put(pod)
    try:
        yield served
    finally:
        served.delete("pod", POD, namespace=SBX)


async def test_the_documented_clusterwide_cilium_policy_isolates_on_the_real_server(app, sandbox_pod):
    s = sandbox_pod
    ccnp = {
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumClusterwideNetworkPolicy",
        "metadata": {"name": "ir-quarantine"},
        "spec": {
            "endpointSelector": {"matchLabels": {"ir.corp/quarantine": "true"}},
            "ingress": [{"fromEndpoints": [{"matchLabels": {"k8s:io.kubernetes.pod.namespace": "ir-forensics"}}]}],
            "egressDeny": [{"toEntities": ["all"]}],
        },
    }
    s.put(ccnp)
    try:
        out = await quarantine(app)
        assert "applied and verified (ir.corp/quarantine=true; isolated: " in out, out
        assert "egress denied to all by CiliumClusterwideNetworkPolicy ir-quarantine" in out, out
    finally:
        s.delete("ciliumclusterwidenetworkpolicy.cilium.io", "ir-quarantine")


async def test_a_calico_policy_checked_by_its_real_schema_isolates_in_its_order(app, sandbox_pod):
    s = sandbox_pod
    gnp = {
        "apiVersion": "crd.projectcalico.org/v1",
        "kind": "GlobalNetworkPolicy",
        "metadata": {"name": "ir-quarantine"},
        "spec": {
            "order": 10,
            "selector": "ir.corp/quarantine == 'true'",
            "types": ["Ingress", "Egress"],
            "ingress": [{"action": "Deny"}],
            "egress": [{"action": "Deny"}],
        },
    }
    allow = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "agents-egress", "namespace": SBX},
        "spec": {"podSelector": {"matchLabels": {"app": "agent-sandbox"}}, "policyTypes": ["Egress"], "egress": [{}]},
    }
    s.put(gnp, allow)
    try:
        out = await quarantine(app)
        assert "applied and verified" in out, out
        assert "egress denied by GlobalNetworkPolicy ir-quarantine (order 10)" in out, out
    finally:
        s.delete("globalnetworkpolicy.crd.projectcalico.org", "ir-quarantine")
        s.delete("networkpolicy", "agents-egress", namespace=SBX)


async def test_the_plan_names_the_flux_kustomizations_interval_read_through_the_bots_rbac(app, served):
    s = served
    ks = {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": "queues", "namespace": "flux-system"},
        "spec": {
            "interval": "1h30m",
            "path": "./queues",
            "prune": True,
            "sourceRef": {"kind": "GitRepository", "name": "fleet"},
        },
    }
    cq = samples.cluster_queue(name="flux-managed")
    cq.pop("status", None)
    cq["metadata"]["labels"] = {
        "kustomize.toolkit.fluxcd.io/name": "queues",
        "kustomize.toolkit.fluxcd.io/namespace": "flux-system",
    }
    s.put(ks, cq)
    try:
        inc = await app.declare(roles={"ops": OPS})
        out = await say(
            app, "lever kueue-hold flux-managed --cell us-east-3 --dry-run", OPS, inc.channel_id, timeout=60
        )
        assert (
            "managed by Flux Kustomization flux-system/queues: it may revert this, at its next reconcile, every "
            "5400s (its spec.interval, 1h30m)"
        ) in out, out
        assert "`flux suspend kustomization queues -n flux-system`" in out, out
    finally:
        s.delete("clusterqueue.kueue.x-k8s.io", "flux-managed")
        s.delete("kustomization.kustomize.toolkit.fluxcd.io", "queues", namespace="flux-system")
