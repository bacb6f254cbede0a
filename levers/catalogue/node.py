"""node-quarantine: taint a GPU node NoSchedule with a reason, plus reason and ticket labels.

Guarded by the node's resourceVersion (one retry on conflict is the
executor's) and by the cell's budgets: a rate per hour and a minHealthy floor,
both reserved in one atomic step just before the write (levers/budgets.py).

Undo removes only what the lever added: its taint (matched by key, effect and
value) and its reason/ticket labels while they still hold its values. Taints and
labels added since (a `kubectl cordon`, a node.kubernetes.io/not-ready taint)
stay; a taint the lever overwrote (same key and effect) is put back.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import field_validator

from bot.policy.levers import LeverRule
from levers import budgets, returngate
from levers.base import Access, Ctx, Kind, Lever, NoParams, Verified
from levers.catalogue.simple import merge_plan
from levers.plan import ABSENT, ANNOTATIONS, LABELS, Plan, container_pre, is_absent, ptr, read, restore_ops

_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)$")


class QuarantineParams(NoParams):
    reason: str
    ticket: str | None = None

    @field_validator("reason", "ticket")
    @classmethod
    def _label_value(cls, v: str | None) -> str | None:
        if v is not None and not _VALUE.fullmatch(v):
            raise ValueError("a label value: up to 63 letters, digits, - _ . (e.g. xid79)")
        return v


def taints_after(current: list[dict[str, Any]], taint: dict[str, Any]) -> list[dict[str, Any]]:
    """`kubectl taint --overwrite` order: the new taint first, then the others not matching key+effect."""
    keep = [t for t in current if not (t.get("key") == taint["key"] and t.get("effect") == taint["effect"])]
    return [taint, *keep]


TAINTS = "/spec/taints"


def _same(a: dict[str, Any], b: dict[str, Any], value: bool = True) -> bool:
    """One taint as kubectl matches it: key and effect (and value); timeAdded is the server's."""
    keys = ("key", "effect", "value") if value else ("key", "effect")
    return all(a.get(k) == b.get(k) for k in keys)


def _taints(obj_or_list: Any) -> list[dict[str, Any]]:
    return [] if is_absent(obj_or_list) or obj_or_list is None else list(obj_or_list)


def _added(changes: dict[str, Any]) -> dict[str, Any] | None:
    """The lever's own taint: first in the list it set (taints_after)."""
    after = changes.get(TAINTS)
    return after[0] if isinstance(after, list) and after else None


def _replaced(pre: dict[str, Any], ours: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
    """The taint ours overwrote (same key and effect, another value), with its place in the list."""
    for i, t in enumerate(_taints(pre.get(TAINTS, ABSENT))):
        if _same(t, ours, value=False):
            return None if _same(t, ours) else (i, t)
    return None


def _had(pre: dict[str, Any], ours: dict[str, Any]) -> bool:
    return any(_same(t, ours) for t in _taints(pre.get(TAINTS, ABSENT)))


class NodeQuarantine(Lever):
    name = "node-quarantine"
    default_rule = LeverRule(roles=["ops"])
    kind = Kind("Node", "", "v1", "nodes", namespaced=False)
    # get and patch the node (taint, labels, undo); list the GPU nodes for the quarantine floor (check).
    needs = (Access.on(kind, "get", "list", "patch"),)
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
        # Every GPU node counts for the floor: a large cell's list comes in pages.
        selector = ctx.policy.node_quarantine.gpu_node_selector
        nodes = await ctx.kube.list_all("/api/v1/nodes", {"labelSelector": selector})
        plan.notes.append(budgets.check_floor(ctx, nodes, ctx.target.name))

    def undo_ops(self, changes: dict[str, Any], pre_state: dict[str, Any], current: dict[str, Any]) -> list[Any]:
        ours = _added(changes)
        if ours is None:  # not a plan of this lever's shape: restore field by field
            return super().undo_ops(changes, pre_state, current)
        ops: list[Any] = []
        now = read(current, TAINTS)
        taints = _taints(now)
        if not _had(pre_state, ours) and any(_same(t, ours) for t in taints):
            left = [t for t in taints if not _same(t, ours)]
            replaced = _replaced(pre_state, ours)
            if replaced is not None:
                i, old = replaced
                left.insert(min(i, len(left)), old)
            # Tested against the exact list just read: one changed since makes the patch fail (422)
            # instead of dropping a taint added in between.
            ops.append({"op": "test", "path": TAINTS, "value": now})
            if left or not is_absent(pre_state.get(TAINTS, ABSENT)):
                ops.append({"op": "replace", "path": TAINTS, "value": left})
            else:
                ops.append({"op": "remove", "path": TAINTS})
        # Labels only while they still hold the lever's values (one set since is someone's); the
        # provenance annotations as every lever restores them (guarded by their values).
        rest = {
            p: v
            for p, v in changes.items()
            if p != TAINTS and (not p.startswith(LABELS + "/") or (read(current, p) == v and pre_state.get(p) != v))
        }
        return ops + restore_ops(rest, pre_state, current)

    def not_restored(self, changes: dict[str, Any], pre_state: dict[str, Any], obj: dict[str, Any]) -> list[str]:
        ours = _added(changes)
        if ours is None:
            return super().not_restored(changes, pre_state, obj)
        left = []
        # As undo_ops decides: the taint is restored once the lever's own is gone (a taint someone
        # set since under that key is theirs, not put back over).
        if not _had(pre_state, ours) and any(_same(t, ours) for t in _taints(read(obj, TAINTS))):
            left.append(TAINTS)
        for p, v in changes.items():
            ours_still = read(obj, p) == v and pre_state.get(p) != v
            if (p.startswith(LABELS + "/") and ours_still) or (
                p.startswith(ANNOTATIONS + "/") and read(obj, p) != pre_state.get(p, ABSENT)
            ):
                left.append(p)
        return left

    async def reserve(self, ctx: Ctx, plan: Plan) -> None:
        await budgets.reserve(ctx)

    async def release(self, ctx: Ctx, plan: Plan) -> None:
        await budgets.release(ctx)

    async def applied(self, ctx: Ctx, plan: Plan) -> None:
        await budgets.landed(ctx)

    async def undone(self, ctx: Ctx) -> None:
        await budgets.freed(ctx)

    async def undo_check(self, ctx: Ctx, since: float) -> Verified | None:
        """The return gate (levers/returngate.py): Ready, no fatal XID, ECC DBE or row-remap failure since."""
        gate = await returngate.check(ctx.svc, await ctx.kube.get(self.path(ctx)), ctx.cell, since)
        return Verified(gate.ok, gate.text)
