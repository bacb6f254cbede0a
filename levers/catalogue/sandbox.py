"""sandbox-quarantine: label an agent sandbox pod so the deny-all policy cuts it off.

The pod is never deleted: its filesystem and flows are the evidence. The label does nothing by itself:
verify reads every network policy that can select the pod and calls it isolated only when both its
ingress and its egress are cut and nothing lets traffic back in:
- Kubernetes NetworkPolicies in its namespace: one selecting the label that enforces the direction with
  no rules, and no policy selecting the pod that allows it (NetworkPolicies add up: any allow wins).
- Cilium (cilium.io/v2 CiliumNetworkPolicy in the namespace and CiliumClusterwideNetworkPolicy), when
  served: a deny rule to or from the entity `all` in a policy selecting the pod cuts that direction
  whatever else allows it (Cilium's deny rules take precedence over every allow). A Cilium policy on the
  label that has a direction's section puts it in default deny; its own rules may let in named endpoints
  (a forensics namespace: docs/levers.md has an example policy); any other allow breaks it.
- Calico (crd.projectcalico.org/v1 GlobalNetworkPolicy, as its Kubernetes datastore keeps it), when served: a policy
  on the label whose first rule in a direction is a catch-all Deny cuts it, unless a policy selecting
  the pod with a lower or equal `order` allows it first (Calico applies the first match, in order;
  Kubernetes NetworkPolicies are order 1000, no order is last).
A pod on the host network (spec.hostNetwork) is never isolated: network policies do not select host
traffic by pod labels.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from bot.clusters import KubeError
from bot.policy.levers import LeverRule
from bot.prom.promql import fill
from levers import pricing
from levers.base import Access, Ctx, Kind, Lever, Verified, Writes
from levers.catalogue.simple import merge_plan
from levers.plan import LABELS, Plan, container_pre, ptr
from levers.price import Cost, Price

LABEL = "ir.corp/quarantine"
DIRECTIONS = (("Ingress", "ingress"), ("Egress", "egress"))
# The labels a pod's namespace gives it in Cilium's and Calico's selectors (io.kubernetes.pod.namespace:
# Cilium's k8s source; projectcalico.org/namespace: Calico's), beside the pod's own labels.
CILIUM_NS = "io.kubernetes.pod.namespace"
CALICO_NS = "projectcalico.org/namespace"
CILIUM = "cilium.io"
# (kind, plural, namespaced) of Cilium's policies (pkg/k8s/apis/cilium.io/client/crds/v2).
CILIUM_KINDS = (
    ("CiliumNetworkPolicy", "ciliumnetworkpolicies", True),
    ("CiliumClusterwideNetworkPolicy", "ciliumclusterwidenetworkpolicies", False),
)
# Calico's GlobalNetworkPolicy as its Kubernetes datastore stores it (libcalico-go/config/crd); the
# projectcalico.org/v3 API of Calico's API server serves the same objects.
CALICO = ("crd.projectcalico.org", "v1")
K8S_ORDER = 1000.0  # Calico applies Kubernetes NetworkPolicies at order 1000 in the default tier


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


def _cilium_key(key: str) -> str:
    """A Cilium selector key without its source prefix (`k8s:app` and `any:app` select the label app)."""
    source, sep, rest = key.partition(":")
    return rest if sep and source in ("k8s", "any") else key


def _cilium_selector(selector: dict[str, Any]) -> dict[str, Any]:
    return {
        "matchLabels": {_cilium_key(k): v for k, v in (selector.get("matchLabels") or {}).items()},
        "matchExpressions": [
            {**r, "key": _cilium_key(str(r.get("key")))} for r in selector.get("matchExpressions") or []
        ],
    }


def _names_label(selector: dict[str, Any]) -> bool:
    """The selector requires the quarantine label (so it is the quarantine's policy, not a catch-all)."""
    if (selector.get("matchLabels") or {}).get(LABEL) == "true":
        return True
    return any(
        r.get("key") == LABEL
        and (r.get("operator") == "Exists" or (r.get("operator") == "In" and r.get("values") == ["true"]))
        for r in selector.get("matchExpressions") or []
    )


_CALICO_TERM = re.compile(
    r"""^(?:(?P<all>all\(\))|(?P<neg>!\s*)?has\(\s*(?P<has>[^)\s]+)\s*\)"""
    r"""|(?P<key>[\w./-]+)\s*(?P<op>==|!=|not\s+in|in)\s*(?P<val>"[^"]*"|'[^']*'|\{[^}]*\}))$"""
)


def calico_selects(selector: str | None, labels: dict[str, str]) -> bool | None:
    """Calico's selector syntax for terms joined by `&&` (`k == "v"`, `k != "v"`, `has(k)`, `!has(k)`,
    `k in {...}`, `k not in {...}`, `all()`); None when it uses more (`||`, parentheses) than that."""
    text = (selector or "").strip()
    if not text:
        return True  # an empty selector is all()
    if "||" in text:
        return None
    for term in (t.strip() for t in text.split("&&")):
        m = _CALICO_TERM.match(term)
        if m is None:
            return None
        if m["all"]:
            continue
        if m["has"]:
            if (m["has"] in labels) == bool(m["neg"]):
                return False
            continue
        key, op, raw = m["key"], re.sub(r"\s+", " ", m["op"]), m["val"]
        values = [v.strip().strip("'\"") for v in raw.strip("{}").split(",")] if raw.startswith("{") else [raw[1:-1]]
        have = labels.get(key)
        hit = have is not None and have in values
        if (op in ("==", "in") and not hit) or (op in ("!=", "not in") and hit):
            return False
    return True


def _calico_names_label(selector: str | None) -> bool:
    terms = [re.sub(r"\s+", "", t) for t in (selector or "").split("&&")]
    return any(t in (f'{LABEL}=="true"', f"{LABEL}=='true'", f"has({LABEL})") for t in terms)


@dataclass
class Pol:
    """One policy that selects the pod, as the verdict needs it, per direction ("ingress"/"egress")."""

    kind: str
    name: str
    on_label: bool  # its selector requires the quarantine label
    enforces: set[str] = field(default_factory=set)  # directions it puts in default deny
    allows: dict[str, list[str]] = field(default_factory=dict)  # direction -> what its allow rules let in
    narrow: set[str] = field(default_factory=set)  # directions whose allows name only specific endpoints
    denies_all: set[str] = field(default_factory=set)  # Cilium: a deny rule to/from every entity
    first_deny: set[str] = field(default_factory=set)  # Calico: its first rule there is a catch-all Deny
    order: float | None = None  # Calico's evaluation order (None: not a Calico-ordered policy)
    unknown: str | None = None  # why Firebreak cannot tell what it does

    @property
    def label(self) -> str:
        return f"{self.kind} {self.name}"


def _types(spec: dict[str, Any]) -> set[str]:
    """policyTypes (Calico: types), or its default: Ingress always, Egress when it has egress rules."""
    given = spec.get("policyTypes") or spec.get("types")
    if given:
        return {str(t).lower() for t in given}
    return {"ingress", *(["egress"] if spec.get("egress") else [])}


def from_network_policy(p: dict[str, Any], labels: dict[str, str]) -> Pol | None:
    spec = p.get("spec") or {}
    if not selects(spec.get("podSelector"), labels):
        return None
    pol = Pol("NetworkPolicy", p["metadata"]["name"], _names_label(spec.get("podSelector") or {}), order=K8S_ORDER)
    pol.enforces = _types(spec)
    pol.allows = {d: ["its rules"] for d in pol.enforces if spec.get(d)}
    return pol


_NARROW_KEYS = {"fromEndpoints", "toEndpoints", "toPorts"}


def _cilium_rule_peers(rule: dict[str, Any], d: str) -> list[str] | None:
    """What one Cilium allow rule lets in: the endpoints it names, [] when it is wider than named
    endpoints (entities, CIDRs, services, FQDNs, an empty endpoint selector, ports only), or None when it
    is an empty rule (`{}`, which allows nothing)."""
    given = {k for k, v in rule.items() if v}
    if not given:
        return None
    peers = rule.get("fromEndpoints" if d == "ingress" else "toEndpoints") or []
    if not peers or not all(peers) or not given <= _NARROW_KEYS:
        return []
    return [",".join(f"{k}={v}" for k, v in (p.get("matchLabels") or {}).items()) or "endpoints" for p in peers]


def _denies_all(rule: dict[str, Any], d: str) -> bool:
    """A Cilium deny rule to or from every entity, on every port (a port list narrows it)."""
    entities = "fromEntities" if d == "ingress" else "toEntities"
    return "all" in (rule.get(entities) or []) and not any(v for k, v in rule.items() if k != entities)


def from_cilium(p: dict[str, Any], kind: str, labels: dict[str, str]) -> Pol | None:
    specs = [s for s in [p.get("spec"), *(p.get("specs") or [])] if isinstance(s, dict)]
    # A spec with a nodeSelector (a host policy) or no endpointSelector does not select pods.
    mine = [s for s in specs if "endpointSelector" in s and selects(_cilium_selector(s["endpointSelector"]), labels)]
    if not mine:
        return None
    pol = Pol(kind, p["metadata"]["name"], any(_names_label(_cilium_selector(s["endpointSelector"])) for s in mine))
    wide: set[str] = set()
    for s in mine:
        # enableDefaultDeny: true for each direction that has rules (allow or deny) unless set to false.
        default_deny = s.get("enableDefaultDeny") or {}
        for d in ("ingress", "egress"):
            has_rules = bool(s.get(d) or s.get(f"{d}Deny"))
            if default_deny.get(d) is True or (has_rules and default_deny.get(d) is not False):
                pol.enforces.add(d)
            if any(_denies_all(r, d) for r in s.get(f"{d}Deny") or []):
                pol.denies_all.add(d)
            for rule in s.get(d) or []:
                peers = _cilium_rule_peers(rule, d)
                if peers is None:
                    continue
                pol.allows.setdefault(d, []).extend(peers or ["more than named endpoints"])
                if not peers:
                    wide.add(d)
    pol.narrow = set(pol.allows) - wide
    return pol


def _catch_all(rule: dict[str, Any]) -> bool:
    return not any(v for k, v in rule.items() if k not in ("action", "metadata"))


def from_calico(p: dict[str, Any], labels: dict[str, str]) -> Pol | None:
    spec = p.get("spec") or {}
    name = p["metadata"]["name"]
    hit = calico_selects(spec.get("selector"), labels)
    narrowing = ("namespaceSelector", "serviceAccountSelector")
    extra = [k for k in narrowing if str(spec.get(k) or "").strip() not in ("", "all()")]
    tier = spec.get("tier") or "default"
    pol = Pol("GlobalNetworkPolicy", name, _calico_names_label(spec.get("selector")))
    order = spec.get("order")
    pol.order = float(order) if isinstance(order, (int, float)) else math.inf
    if hit is False:
        return None
    if hit is None or extra or tier != "default":
        why = (
            f"its selector `{spec.get('selector')}` is more than Firebreak reads"
            if hit is None
            else (f"its {' and '.join(extra)}" if extra else f"it is in tier {tier}")
        )
        if not (spec.get("ingress") or spec.get("egress")):
            return None  # no rules: it allows nothing, whatever it selects
        pol.unknown = f"{why}, which Firebreak does not evaluate: check it lets nothing in"
        return pol
    pol.enforces = _types(spec)
    for d in ("ingress", "egress"):
        rules = spec.get(d) or []
        if d not in pol.enforces or not rules:
            continue
        first = next((r for r in rules if r.get("action") in ("Allow", "Deny", "Pass")), None)
        if first is not None and first.get("action") == "Deny" and _catch_all(first):
            pol.first_deny.add(d)
        allowing = [r for r in rules if r.get("action") == "Allow"]
        if allowing and d not in pol.first_deny:
            pol.allows[d] = ["its Allow rules"]
    return pol


@dataclass
class Isolation:
    cut: dict[str, str]  # direction -> what cuts it, in words
    breach: str | None  # what lets traffic back in, or None
    by: list[str]  # the policies that cut it


def isolation_of(pols: list[Pol]) -> Isolation:
    """Whether the policies selecting a pod cut both of its directions, and what breaks that."""
    cut: dict[str, str] = {}
    by: list[str] = []
    for _, d in DIRECTIONS:
        deny = next((p for p in pols if d in p.denies_all), None)
        if deny is not None:  # Cilium: deny wins over every allow, in any policy
            cut[d] = f"{d} denied to all by {deny.label}"
            by.append(deny.label)
            continue
        unknown = next((p for p in pols if p.unknown), None)
        if unknown is not None:
            return Isolation(cut, f"{unknown.label} selects the pod, but {unknown.unknown}", by)
        calico = sorted((p for p in pols if d in p.first_deny and p.on_label), key=lambda p: p.order or math.inf)
        if calico:
            first = calico[0]
            before = next(
                (p for p in pols if p is not first and d in p.allows and (p.order or math.inf) <= (first.order or 0)),
                None,
            )
            if before is not None:
                why = f"{before.label} also selects the pod and allows {d}, in Calico's order before {first.label}"
                return Isolation(cut, why, by)
            cut[d] = f"{d} denied by {first.label} (order {first.order:g})"
            by.append(first.label)
            continue
        own = next((p for p in pols if p.on_label and d in p.enforces and (d not in p.allows or d in p.narrow)), None)
        for p in pols:
            if d in p.allows and not (p is own and d in p.narrow):
                return Isolation(cut, f"{p.label} also selects the pod and allows {d}", by)
        if own is not None:
            way = "from" if d == "ingress" else "to"
            only = f" (only {way} {'; '.join(own.allows[d])})" if d in own.allows else ""
            cut[d] = f"{d} denied by {own.label}{only}"
            by.append(own.label)
    return Isolation(cut, None, by)


class SandboxQuarantine(Lever):
    name = "sandbox-quarantine"
    default_rule = LeverRule(roles=["security"])
    kind = Kind("Pod", "", "v1", "pods", namespaced=True)
    needs = (
        Access.on(kind, "get", "patch"),  # the label; never delete, never exec
        # verify: the policies that can select the pod (Cilium's and Calico's when their CRDs are served)
        Access("networking.k8s.io", "networkpolicies", ("list",)),
        Access(CILIUM, "ciliumnetworkpolicies", ("list",)),
        Access(CILIUM, "ciliumclusterwidenetworkpolicies", ("list",), cluster=True),
        Access(CALICO[0], "globalnetworkpolicies", ("list",), cluster=True),
    )
    summary = f"label the pod {LABEL}=true (deny-all keeps it for forensics; never deleted)"

    async def plan(self, ctx: Ctx, obj: dict[str, Any]) -> Plan:
        pre: dict[str, Any] = {}
        container_pre(obj, pre, LABELS)
        return merge_plan(self, ctx, obj, {ptr("metadata", "labels", LABEL): "true"}, f"{LABEL}=true", pre)

    def writes(self, ctx: Ctx, path: str) -> Writes:
        return {ptr("metadata", "labels", LABEL): "true"}

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

    async def _policies(self, ctx: Ctx, labels: dict[str, str]) -> tuple[list[Pol], list[str]]:
        """Every policy selecting a pod with ``labels``, and the policy kinds that were read."""
        ns = ctx.target.namespace or "default"
        read = ["NetworkPolicy"]
        found: list[Pol | None] = [
            from_network_policy(p, labels)
            for p in await ctx.kube.list_all(f"/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies")
        ]
        cilium = {**labels, CILIUM_NS: ns}
        for kind, plural, namespaced in CILIUM_KINDS:
            if await ctx.kube.served_version(CILIUM, ["v2"], plural) is None:
                continue
            path = f"/apis/{CILIUM}/v2/" + (f"namespaces/{ns}/{plural}" if namespaced else plural)
            found += [from_cilium(p, kind, cilium) for p in await ctx.kube.list_all(path)]
            read.append(kind)
        group, version = CALICO
        if await ctx.kube.served_version(group, [version], "globalnetworkpolicies") is not None:
            calico = {**labels, CALICO_NS: ns}
            path = f"/apis/{group}/{version}/globalnetworkpolicies"
            found += [from_calico(p, calico) for p in await ctx.kube.list_all(path)]
            read.append("GlobalNetworkPolicy")
        return [p for p in found if p is not None], read

    async def verify(self, ctx: Ctx, plan: Plan, after: dict[str, Any]) -> Verified:
        landed = await super().verify(ctx, plan, after)
        if not landed.ok:
            return landed
        ns = ctx.target.namespace or "default"
        not_isolated = f"labelled {LABEL}=true, but NOT isolated"
        if (after.get("spec") or {}).get("hostNetwork"):
            return Verified(
                False,
                f"{not_isolated}: the pod is on the host network (spec.hostNetwork), where network policies do "
                "not select it by its labels: cordon its node or stop the pod instead",
            )
        labels = (after.get("metadata") or {}).get("labels") or {}
        try:
            pols, read = await self._policies(ctx, labels)
        except KubeError as e:
            return Verified(False, f"{not_isolated} as far as Firebreak can tell: reading the policies failed ({e})")
        found = isolation_of(pols)
        if found.breach is not None:
            return Verified(False, f"{not_isolated}: {found.breach}")
        if not found.cut:
            also = f" (nor a {' or '.join(read[1:])})" if read[1:] else ""
            why = (
                f"no NetworkPolicy in {ns} selects {LABEL}=true and denies all (podSelector on the label, "
                f"policyTypes Ingress and Egress, no ingress or egress rules){also}: apply one, the pod is still "
                "reachable"
            )
            return Verified(False, f"{not_isolated}: {why}")
        if len(found.cut) < 2:
            open_ = next(d for _, d in DIRECTIONS if d not in found.cut)
            return Verified(
                False,
                f"{not_isolated}: {'; '.join(found.cut.values())}, but no policy on {LABEL}=true cuts {open_}",
            )
        if len(set(found.by)) == 1 and found.by[0].startswith("NetworkPolicy "):  # a NetworkPolicy has no exceptions
            return Verified(True, f"{plan.effect}; isolated by {found.by[0]} (denies all ingress and egress)")
        return Verified(True, f"{plan.effect}; isolated: {'; '.join(found.cut.values())}")
