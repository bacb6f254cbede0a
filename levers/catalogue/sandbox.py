"""sandbox-quarantine: label an agent sandbox pod so the deny-all policy cuts it off.

The pod is never deleted: its filesystem and flows are the evidence. The label does nothing by itself:
verify reads the namespace's NetworkPolicies and calls the pod isolated only when one selects it by the
label and denies all (policyTypes Ingress and Egress, no rules), and no policy selecting the pod allows
any traffic (NetworkPolicies are additive: an allow in any policy selecting a pod wins).
"""

from __future__ import annotations

from typing import Any

from bot.policy.levers import LeverRule
from bot.prom.promql import fill
from levers import pricing
from levers.base import Access, Ctx, Kind, Lever, Verified
from levers.catalogue.simple import merge_plan
from levers.plan import LABELS, Plan, container_pre, ptr
from levers.price import Cost, Price

LABEL = "ir.corp/quarantine"
DIRECTIONS = (("Ingress", "ingress"), ("Egress", "egress"))


def selects(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """metav1.LabelSelectorAsSelector's meaning: every matchLabels pair and matchExpressions requirement
    holds (an empty selector selects every pod)."""
    selector = selector or {}
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for req in selector.get("matchExpressions") or []:
        key, op, values = req.get("key"), req.get("operator"), req.get("values") or []
        ok = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }.get(op)
        if not ok:
            return False  # an unknown operator is invalid: the API server would not have stored it
    return True


def _types(spec: dict[str, Any]) -> set[str]:
    """policyTypes, or its default: Ingress always, Egress when the policy has egress rules."""
    if spec.get("policyTypes"):
        return set(spec["policyTypes"])
    return {"Ingress", *(["Egress"] if spec.get("egress") else [])}


def _names_label(selector: dict[str, Any]) -> bool:
    """The selector requires the quarantine label (so it is the quarantine's policy, not a catch-all)."""
    if (selector.get("matchLabels") or {}).get(LABEL) == "true":
        return True
    return any(
        r.get("key") == LABEL
        and (r.get("operator") == "Exists" or (r.get("operator") == "In" and r.get("values") == ["true"]))
        for r in selector.get("matchExpressions") or []
    )


def isolation(policies: list[dict[str, Any]], labels: dict[str, str]) -> tuple[str | None, str | None]:
    """(the deny-all policy isolating a pod with `labels`, or None; what breaks isolation, or None)."""
    selecting = [p for p in policies if selects((p.get("spec") or {}).get("podSelector"), labels)]
    deny_all = next(
        (
            p["metadata"]["name"]
            for p in selecting
            if _names_label(p["spec"].get("podSelector") or {})
            and {"Ingress", "Egress"} <= _types(p["spec"])
            and not p["spec"].get("ingress")
            and not p["spec"].get("egress")
        ),
        None,
    )
    for p in selecting:
        for ptype, rules in DIRECTIONS:
            if ptype in _types(p["spec"]) and p["spec"].get(rules):
                return deny_all, f"NetworkPolicy {p['metadata']['name']} also selects the pod and allows {rules}"
    return deny_all, None


class SandboxQuarantine(Lever):
    name = "sandbox-quarantine"
    default_rule = LeverRule(roles=["security"])
    kind = Kind("Pod", "", "v1", "pods", namespaced=True)
    needs = (
        Access.on(kind, "get", "patch"),  # the label; never delete, never exec
        Access("networking.k8s.io", "networkpolicies", ("list",)),  # verify: a deny-all policy selects it
    )
    summary = f"label the pod {LABEL}=true (deny-all keeps it for forensics; never deleted)"

    async def plan(self, ctx: Ctx, obj: dict[str, Any]) -> Plan:
        pre: dict[str, Any] = {}
        container_pre(obj, pre, LABELS)
        return merge_plan(self, ctx, obj, {ptr("metadata", "labels", LABEL): "true"}, f"{LABEL}=true", pre)

    async def price(self, ctx: Ctx, obj: dict[str, Any], plan: Plan) -> Price:
        """The sandbox's open sessions, cut off with it (policy price.sandbox-quarantine.sessions_query)."""
        what = f"open sessions of sandbox {ctx.target}, cut off"
        query = ctx.policy.price.sandbox_quarantine.sessions_query
        if query is None:
            why = (
                "policy price.sandbox-quarantine.sessions_query is not set (no exporter publishes a sandbox's "
                "sessions: name your sandbox controller's series there)"
            )
            return Price(costs=(Cost(what=what, unit="sessions", value=None, how=why),))
        rendered = fill(query, namespace=ctx.target.namespace or "default", pod=ctx.target.name)
        value, why = await pricing.figure(ctx.svc, rendered)
        how = why or "policy price.sandbox-quarantine.sessions_query, now"
        return Price(costs=(Cost(what=what, unit="sessions", value=value, how=how),))

    async def verify(self, ctx: Ctx, plan: Plan, after: dict[str, Any]) -> Verified:
        landed = await super().verify(ctx, plan, after)
        if not landed.ok:
            return landed
        ns = ctx.target.namespace or "default"
        found = await ctx.kube.get(f"/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies")
        labels = (after.get("metadata") or {}).get("labels") or {}
        deny_all, breach = isolation(found.get("items") or [], labels)
        if deny_all is None:
            why = (
                f"no NetworkPolicy in {ns} selects {LABEL}=true and denies all (podSelector on the label, "
                "policyTypes Ingress and Egress, no ingress or egress rules): apply one, the pod is still "
                "reachable"
            )
            return Verified(False, f"labelled {LABEL}=true, but NOT isolated: {why}")
        if breach is not None:
            return Verified(False, f"labelled {LABEL}=true, but NOT isolated: {breach}")
        return Verified(True, f"{plan.effect}; isolated by NetworkPolicy {deny_all} (denies all ingress and egress)")
