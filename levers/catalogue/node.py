"""node-quarantine: taint a GPU node NoSchedule with a reason, plus reason and ticket labels.

Guarded by the node's resourceVersion (one retry on conflict is the
executor's) and by the cell's budgets: a rate per hour and a minHealthy floor,
both reserved in one atomic step just before the write (levers/budgets.py).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import field_validator

from levers import budgets
from levers.base import Ctx, Kind, Lever, NoParams
from levers.catalogue.simple import merge_plan
from levers.plan import LABELS, Plan, container_pre, is_absent, ptr, read

_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)$")


class QuarantineParams(NoParams):
    reason: str
    ticket: str | None = None

    @field_validator("reason", "ticket")
    @classmethod
    def _label_value(cls, v: str | None) -> str | None:
        if v is not None and not _VALUE.match(v):
            raise ValueError("a label value: up to 63 letters, digits, - _ . (e.g. xid79)")
        return v


def taints_after(current: list[dict[str, Any]], taint: dict[str, Any]) -> list[dict[str, Any]]:
    """`kubectl taint --overwrite` order: the new taint first, then the others not matching key+effect."""
    keep = [t for t in current if not (t.get("key") == taint["key"] and t.get("effect") == taint["effect"])]
    return [taint, *keep]


class NodeQuarantine(Lever):
    name = "node-quarantine"
    kind = Kind("Node", "", "v1", "nodes", namespaced=False)
    summary = "taint a node <key>=<reason>:NoSchedule + reason/ticket labels, within the cell's budget"
    Params = QuarantineParams
    usage = "reason=<xid79> [ticket=<INC-7>]"

    async def plan(self, ctx: Ctx, obj: dict[str, Any]) -> Plan:
        p = ctx.params_as(QuarantineParams)
        key = ctx.policy.node_quarantine.taint_key
        ticket = p.ticket or ctx.incident
        taint = {"key": key, "value": p.reason, "effect": "NoSchedule"}
        current = read(obj, "/spec/taints")
        pre: dict[str, Any] = {}
        container_pre(obj, pre, LABELS)
        changes = {
            "/spec/taints": taints_after([] if is_absent(current) else current, taint),
            ptr("metadata", "labels", f"{key}-reason"): p.reason,
            ptr("metadata", "labels", f"{key}-ticket"): ticket,
        }
        return merge_plan(self, ctx, obj, changes, f"tainted {key}={p.reason}:NoSchedule, ticket {ticket}", pre)

    async def check(self, ctx: Ctx, plan: Plan, obj: dict[str, Any]) -> None:
        await budgets.check_rate(ctx)
        nodes = await ctx.kube.get("/api/v1/nodes", {"labelSelector": ctx.policy.node_quarantine.gpu_node_selector})
        plan.notes.append(budgets.check_floor(ctx, nodes.get("items") or [], ctx.target.name))

    async def reserve(self, ctx: Ctx, plan: Plan) -> None:
        await budgets.reserve(ctx)

    async def release(self, ctx: Ctx, plan: Plan) -> None:
        await budgets.release(ctx)

    async def applied(self, ctx: Ctx, plan: Plan) -> None:
        await budgets.landed(ctx)

    async def undone(self, ctx: Ctx) -> None:
        await budgets.freed(ctx)
