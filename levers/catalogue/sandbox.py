"""sandbox-quarantine: label an agent sandbox pod so the deny-all policy cuts it off.

The pod is never deleted: its filesystem and flows are the evidence.
"""

from __future__ import annotations

from typing import Any

from bot.policy.levers import LeverRule
from levers.base import Access, Ctx, Kind, Lever
from levers.catalogue.simple import merge_plan
from levers.plan import LABELS, Plan, container_pre, ptr

LABEL = "ir.corp/quarantine"


class SandboxQuarantine(Lever):
    name = "sandbox-quarantine"
    default_rule = LeverRule(roles=["security"])
    kind = Kind("Pod", "", "v1", "pods", namespaced=True)
    needs = (Access.on(kind, "get", "patch"),)  # the label; never delete, never exec
    summary = f"label the pod {LABEL}=true (deny-all keeps it for forensics; never deleted)"

    async def plan(self, ctx: Ctx, obj: dict[str, Any]) -> Plan:
        pre: dict[str, Any] = {}
        container_pre(obj, pre, LABELS)
        return merge_plan(self, ctx, obj, {ptr("metadata", "labels", LABEL): "true"}, f"{LABEL}=true", pre)
