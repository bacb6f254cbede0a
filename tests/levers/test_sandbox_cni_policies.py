"""sandbox-quarantine's isolation check reads Cilium's and Calico's policies where their CRDs are served,
not only namespaced NetworkPolicies (issue 34): docs/levers.md's quarantine is a CiliumClusterwideNetworkPolicy
whose egress deny wins over any allow, a Calico GlobalNetworkPolicy is applied in its `order`, and a pod on
the host network is never isolated.

The fake cells serve Cilium's (cilium.io/v2, pkg/k8s/apis/cilium.io/client/crds/v2) and Calico's
(crd.projectcalico.org/v1, libcalico-go/config/crd) policy kinds here, with their upstream names and scope
and an open schema: what is tested is how the verdict reads them."""

from __future__ import annotations

import pytest

from tests.support import extra_crds
from tests.support.levers import SEC, say

NS = "sbx-tenant-acme"
POD = "sess-7f3a9c-0"
PULL = f"lever sandbox-quarantine {NS}/{POD} --cell us-east-3"
LABEL = {"ir.corp/quarantine": "true"}


@pytest.fixture(autouse=True)
def cni_crds(tmp_path_factory, monkeypatch) -> None:
    """The cells (built after this fixture) serve the vendored CRDs and Cilium's and Calico's policies."""
    extra_crds.serve(monkeypatch, tmp_path_factory, [*extra_crds.CILIUM, *extra_crds.CALICO])


@pytest.fixture
def no_policies(cells):
    for p in cells.east3.list("networkpolicy", NS):
        cells.east3.delete("networkpolicy", p["metadata"]["name"], NS)


def ir_quarantine_ccnp() -> dict:
    """docs/levers.md's quarantine policy: forensics may reach in, egress is denied to everything."""
    return {
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumClusterwideNetworkPolicy",
        "metadata": {"name": "ir-quarantine"},
        "spec": {
            "endpointSelector": {"matchLabels": LABEL},
            "ingress": [{"fromEndpoints": [{"matchLabels": {"k8s:io.kubernetes.pod.namespace": "ir-forensics"}}]}],
            "egressDeny": [{"toEntities": ["all"]}],
        },
    }


def allow(name: str, **rules: list) -> dict:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"podSelector": {"matchLabels": {"app": "agent-sandbox"}}, "policyTypes": ["Egress"], **rules},
    }


def gnp(name: str, order: int | None) -> dict:
    spec: dict = {
        "selector": 'ir.corp/quarantine == "true"',
        "types": ["Ingress", "Egress"],
        "ingress": [{"action": "Deny"}],
        "egress": [{"action": "Deny"}],
    }
    if order is not None:
        spec["order"] = order
    return {
        "apiVersion": "crd.projectcalico.org/v1",
        "kind": "GlobalNetworkPolicy",
        "metadata": {"name": name},
        "spec": spec,
    }


async def pull(app) -> str:
    inc = await app.declare(roles={"security": SEC})
    return await say(app, PULL, SEC, inc.channel_id)


async def test_the_documented_clusterwide_cilium_policy_isolates(app, cells, no_policies):
    cells.east3.put(ir_quarantine_ccnp())
    out = await pull(app)
    assert "applied and verified (ir.corp/quarantine=true; isolated: " in out, out
    assert "ingress denied by CiliumClusterwideNetworkPolicy ir-quarantine (only from " in out, out
    assert "io.kubernetes.pod.namespace=ir-forensics" in out, out
    assert "egress denied to all by CiliumClusterwideNetworkPolicy ir-quarantine" in out, out


async def test_a_cilium_egress_deny_wins_over_a_networkpolicy_allow(app, cells, no_policies):
    cells.east3.put(ir_quarantine_ccnp())
    cells.east3.put(allow("agents-egress", egress=[{}]))
    out = await pull(app)
    assert "applied and verified" in out and "egress denied to all by CiliumClusterwideNetworkPolicy" in out, out


async def test_a_cilium_allow_of_ingress_breaks_it(app, cells, no_policies):
    cells.east3.put(ir_quarantine_ccnp())
    cells.east3.put(
        {
            "apiVersion": "cilium.io/v2",
            "kind": "CiliumNetworkPolicy",
            "metadata": {"name": "agents-from-world", "namespace": NS},
            "spec": {
                "endpointSelector": {"matchLabels": {"app": "agent-sandbox"}},
                "ingress": [{"fromEntities": ["world"]}],
            },
        }
    )
    out = await pull(app)
    assert "NOT isolated: CiliumNetworkPolicy agents-from-world also selects the pod and allows ingress" in out, out


async def test_a_calico_deny_ordered_first_isolates(app, cells, no_policies):
    cells.east3.put(gnp("ir-quarantine", order=10))
    cells.east3.put(allow("agents-egress", egress=[{}]))  # order 1000 in Calico: after the deny
    out = await pull(app)
    assert "applied and verified" in out, out
    assert "egress denied by GlobalNetworkPolicy ir-quarantine (order 10)" in out, out


async def test_a_calico_deny_without_order_comes_last(app, cells, no_policies):
    cells.east3.put(gnp("ir-quarantine", order=None))
    cells.east3.put(allow("agents-egress", egress=[{}]))
    out = await pull(app)
    assert (
        "NOT isolated: NetworkPolicy agents-egress also selects the pod and allows egress, in Calico's order "
        "before GlobalNetworkPolicy ir-quarantine"
    ) in out, out


async def test_a_pod_on_the_host_network_is_never_isolated(app, cells):
    pod = cells.east3.get("pod", POD, NS)
    pod["spec"]["hostNetwork"] = True
    cells.east3.put(pod)
    out = await pull(app)  # the namespace's deny-all NetworkPolicy selects it, but cannot isolate it
    assert "NOT isolated: the pod is on the host network (spec.hostNetwork)" in out, out


async def test_a_cilium_deny_limited_to_ports_lets_another_allow_through(app, cells, no_policies):
    ccnp = ir_quarantine_ccnp()
    ccnp["spec"]["egressDeny"] = [{"toEntities": ["all"], "toPorts": [{"ports": [{"port": "443", "protocol": "TCP"}]}]}]
    cells.east3.put(ccnp)
    cells.east3.put(allow("agents-egress", egress=[{}]))  # every other port is allowed by this
    out = await pull(app)
    assert "NOT isolated: NetworkPolicy agents-egress also selects the pod and allows egress" in out, out
