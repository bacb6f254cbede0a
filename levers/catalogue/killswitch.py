"""killswitch: narrow a tenant's max side effect in the tool gateway's flags ConfigMap.

It only narrows (containment never widens access); undo restores the previous value.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, field_validator

from bot.chat import quote
from bot.policy.levers import LeversPolicy
from levers.base import Ctx, Kind, Lever, LeverRefusal, NoParams, Target, params_as
from levers.catalogue.simple import merge_plan
from levers.plan import Plan, container_pre, is_absent, ptr, read

_TENANT = re.compile(r"^[a-z0-9]([-a-z0-9_.]{0,61}[a-z0-9])?$")


class KillswitchParams(NoParams):
    tenant: str
    level: str = "read"

    @field_validator("tenant")
    @classmethod
    def _tenant(cls, v: str) -> str:
        if not _TENANT.match(v):
            raise ValueError("a tenant id: lowercase letters, digits, - _ .")
        return v


class Killswitch(Lever):
    name = "killswitch"
    kind = Kind("ConfigMap", "", "v1", "configmaps", namespaced=True)
    summary = "narrow a tenant's max side effect (toolgw-flags), e.g. level=read"
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
        pointer = ptr("data", key)
        current = read(obj, pointer)
        if not is_absent(current):
            if current not in levels:
                raise LeverRefusal(
                    f"{key} is `{current}`, which policy does not rank ({', '.join(levels)}); change it by hand."
                )
            if levels.index(p.level) > levels.index(current):
                raise LeverRefusal(
                    f"The killswitch only narrows: {p.tenant} is at `{current}`; `{p.level}` would widen it."
                )
        pre: dict[str, Any] = {}
        container_pre(obj, pre, "/data")
        return merge_plan(self, ctx, obj, {pointer: p.level}, f"{key}={p.level}", pre)
