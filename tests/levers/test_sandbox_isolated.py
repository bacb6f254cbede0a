"""sandbox-quarantine is verified only when a NetworkPolicy in the pod's namespace selects the quarantine
label and denies all traffic (policyTypes Ingress and Egress, no rules), and no other policy selecting
the pod lets traffic back in (NetworkPolicies add up: any allow wins). Otherwise NOT isolated (issue 25)."""

from __future__ import annotations

import pytest

from tests.support.levers import SEC, say

NS = "sbx-tenant-acme"
PULL = "lever sandbox-quarantine sbx-tenant-acme/sess-7f3a9c-0 --cell us-east-3"


def policy(name: str, selector: dict, types: list[str], **rules: list) -> dict:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"podSelector": selector, "policyTypes": types, **rules},
    }


DENY_ALL = policy("quarantine-deny-all", {"matchLabels": {"ir.corp/quarantine": "true"}}, ["Ingress", "Egress"])


@pytest.fixture
def no_policies(cells):
    for p in cells.east3.list("networkpolicy", NS):
        cells.east3.delete("networkpolicy", p["metadata"]["name"], NS)


async def test_no_deny_all_policy_is_not_isolated(app, cells, no_policies):
    inc = await app.declare(roles={"security": SEC})
    out = await say(app, PULL, SEC, inc.channel_id)
    assert "but NOT verified: labelled ir.corp/quarantine=true, but NOT isolated: " in out, out
    assert f"no NetworkPolicy in {NS} selects ir.corp/quarantine=true and denies all" in out, out
    assert cells.east3.get("pod", "sess-7f3a9c-0", NS)["metadata"]["labels"]["ir.corp/quarantine"] == "true"


async def test_ingress_only_is_not_isolated(app, cells, no_policies):
    cells.east3.put(policy("half", {"matchLabels": {"ir.corp/quarantine": "true"}}, ["Ingress"]))
    inc = await app.declare(roles={"security": SEC})
    out = await say(app, PULL, SEC, inc.channel_id)
    assert "NOT isolated" in out, out


async def test_another_policy_allowing_egress_breaks_isolation(app, cells, no_policies):
    cells.east3.put(DENY_ALL)
    cells.east3.put(policy("agents-egress", {"matchLabels": {"app": "agent-sandbox"}}, ["Egress"], egress=[{}]))
    inc = await app.declare(roles={"security": SEC})
    out = await say(app, PULL, SEC, inc.channel_id)
    assert "NOT isolated: NetworkPolicy agents-egress also selects the pod and allows egress" in out, out


async def test_deny_all_policy_is_isolated(app, cells, no_policies):
    selector = {"matchExpressions": [{"key": "ir.corp/quarantine", "operator": "In", "values": ["true"]}]}
    cells.east3.put(policy("quarantine-deny-all", selector, ["Ingress", "Egress"]))
    inc = await app.declare(roles={"security": SEC})
    out = await say(app, PULL, SEC, inc.channel_id)
    assert (
        "applied and verified (ir.corp/quarantine=true; isolated by NetworkPolicy quarantine-deny-all "
        "(denies all ingress and egress)" in out
    ), out
