"""killswitch: narrow a tenant's max side effect in the tool gateway's flags ConfigMap.

It only narrows the tenant's EFFECTIVE level (containment never widens access): its own key,
else the `default` tenant's key (key_format with tenant=default), which the gateway applies to a
tenant without one. A level that would widen it is refused with the figures.

With neither key (or a value policy does not rank), the gateway's own built-in default applies,
which Firebreak cannot read: then only the narrowest level is accepted, the one level that can't
widen whatever that default is, so containment stays possible at 3 a.m. The plan's notes say so.
No Firebreak undo: the API server lets Firebreak's identity only narrow the kill switch
(deploy/admission, rule firebreak-configmaps), so a leaked bot token can't widen any tenant's tools.
Restoring a tenant is a person's write; the refusal of `undo` gives the kubectl line that puts back
exactly the value Firebreak found (or removes the key it added).
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, field_validator

from bot.chat import quote
from bot.policy.levers import LeverRule, LeversPolicy
from bot.prom.promql import fill
from levers import pricing
from levers.base import Access, Ctx, Kind, Lever, LeverRefusal, NoParams, Target, Writes, params_as
from levers.catalogue.simple import merge_plan
from levers.plan import Plan, container_pre, is_absent, ptr, read, unesc
from levers.price import Cost, Price

# The flags ConfigMap's name in the default policy (killswitch.configmap): RBAC grants that name only.
# A policy naming another ConfigMap needs the same change in deploy/rbac (and here).
FLAGS_CONFIGMAP = "toolgw-flags"
DEFAULT_TENANT = "default"  # the key the tool gateway applies to a tenant without its own
_TENANT = re.compile(r"^[a-z0-9]([-a-z0-9_.]{0,61}[a-z0-9])?$")


class KillswitchParams(NoParams):
    tenant: str
    level: str = "read"

    @field_validator("tenant")
    @classmethod
    def _tenant(cls, v: str) -> str:
        if not _TENANT.fullmatch(v):
            raise ValueError("a tenant id: lowercase letters, digits, - _ .")
        return v


class Killswitch(Lever):
    name = "killswitch"
    default_rule = LeverRule(roles=["security"])
    kind = Kind("ConfigMap", "", "v1", "configmaps", namespaced=True)
    needs = (Access.on(kind, "get", "patch", names=(FLAGS_CONFIGMAP,)),)  # that one ConfigMap, no other
    summary = "narrow a tenant's max side effect (toolgw-flags), e.g. level=read"
    reversible = False
    not_reversible_why = (
        "the API server lets Firebreak only narrow the kill switch (deploy/admission, firebreak-configmaps), "
        "so widening a tenant again is a person's write"
    )

    def manual_undo(self, target: str, context: str, pre_state: dict[str, Any]) -> str:
        data = {
            unesc(p.removeprefix("/data/")): (None if is_absent(v) else v)
            for p, v in pre_state.items()
            if p.startswith("/data/")
        }
        if not data:
            return ""
        ns, _, name = target.rpartition("/")
        patch = json.dumps({"data": data}, separators=(",", ":"), sort_keys=True)
        return f"kubectl --context {context} -n {ns or 'default'} patch configmap {name} --type merge -p '{patch}'"

    Params = KillswitchParams
    usage = "tenant=<tenant> [level=read]"

    def accepts(self, policy: LeversPolicy, target: Target, params: BaseModel) -> None:
        pol = policy.killswitch
        if str(target) != pol.configmap:
            raise LeverRefusal(f"killswitch acts on the ConfigMap {pol.configmap} (policy); target that.")
        level = params_as(params, KillswitchParams).level
        if level not in pol.levels:
            raise LeverRefusal(
                f"`level={quote(level)}` is not a level; use one of {', '.join(pol.levels)} (narrowest first)."
            )

    async def plan(self, ctx: Ctx, obj: dict[str, Any]) -> Plan:
        pol = ctx.policy.killswitch
        p = ctx.params_as(KillswitchParams)
        levels = pol.levels
        key = pol.key_format.format(tenant=p.tenant)
        default_key = pol.key_format.format(tenant=DEFAULT_TENANT)
        own = read(obj, ptr("data", key))
        fallback = read(obj, ptr("data", default_key))
        if not is_absent(own):
            effective, whose = own, f"{p.tenant}'s own `{key}`"
        elif p.tenant != DEFAULT_TENANT and not is_absent(fallback):
            effective, whose = fallback, f"{p.tenant} has no key; its effective level is {DEFAULT_TENANT}'s"
        else:
            effective, whose = None, ""
        narrowest = levels[0]
        if effective is None or effective not in levels:
            why = (
                f"neither `{key}` nor `{default_key}` is set, so the tool gateway's own default applies"
                if effective is None
                else f"{whose} is `{effective}`, which policy does not rank ({', '.join(levels)})"
            )
            if p.level != narrowest:
                raise LeverRefusal(
                    f"{why}, and Firebreak can't tell {p.tenant}'s effective level: only `level={narrowest}` "
                    f"(the narrowest) is certain to narrow it. Pull it with level={narrowest}."
                )
            note = f"{why}: `{narrowest}` is the narrowest level, so it narrows whatever that is"
        else:
            if levels.index(p.level) > levels.index(effective):
                figures = f"{whose} `{effective}`" if is_absent(own) else f"{whose} is `{effective}`"
                raise LeverRefusal(f"The killswitch only narrows: {figures}; `{p.level}` would widen it.")
            note = f"{p.tenant}: `{effective}` → `{p.level}`" + (
                "" if not is_absent(own) else f" (it had no key: `{effective}` was {DEFAULT_TENANT}'s)"
            )
        pre: dict[str, Any] = {}
        container_pre(obj, pre, "/data")
        plan = merge_plan(self, ctx, obj, {ptr("data", key): p.level}, f"{key}={p.level}", pre)
        plan.notes.append(note)
        # The levels the new one refuses that the tenant had: up to its effective level, or all wider.
        top = levels.index(effective) if effective in levels else len(levels) - 1
        plan.meta["refused"] = levels[levels.index(p.level) + 1 : top + 1]
        return plan

    def writes(self, ctx: Ctx, path: str) -> Writes:
        p = ctx.params_as(KillswitchParams)
        return {ptr("data", ctx.policy.killswitch.key_format.format(tenant=p.tenant)): p.level}

    async def price(self, ctx: Ctx, obj: dict[str, Any], plan: Plan) -> Price:
        """The tenant's tool calls per minute the new level refuses (policy price.killswitch.calls_query)."""
        p = ctx.params_as(KillswitchParams)
        refused: list[str] = list(plan.meta.get("refused") or [])
        what = f"{p.tenant}'s tool calls now refused ({', '.join(refused) or 'none'})"
        query = ctx.policy.price.killswitch.calls_query
        if not refused:
            return Price(costs=(Cost(what=what, unit="calls/min", value=0.0, how=f"already at `{p.level}`"),))
        if query is None:
            why = (
                "policy price.killswitch.calls_query is not set (no exporter publishes a tool gateway's calls: "
                "name your gateway's series there)"
            )
            return Price(costs=(Cost(what=what, unit="calls/min", value=None, how=why),))
        rendered = fill(query, tenant=p.tenant, refused="|".join(refused))
        value, why = await pricing.figure(ctx.svc, rendered)
        how = why or "policy price.killswitch.calls_query, now"
        return Price(costs=(Cost(what=what, unit="calls/min", value=value, how=how),))
