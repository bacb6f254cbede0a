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
from levers import budgets, gangs, returngate
from levers.base import Access, Ctx, Kind, Lever, NoParams, Target, Verified
from levers.catalogue.jobset import QUEUE_LABEL, WORKLOAD, JobSetSuspend, owned_by
from levers.catalogue.simple import merge_plan
from levers.kube import KubeError
from levers.plan import ABSENT, ANNOTATIONS, LABELS, Plan, container_pre, is_absent, ptr, read, restore_ops
from levers.price import Cost, Price

POD = Kind("Pod", "", "v1", "pods", namespaced=True)
JOBSET = JobSetSuspend.kind
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
    # The price: the pods on the node, their JobSets and Kueue Workloads, in the policy's namespaces.
    needs = (
        Access.on(kind, "get", "list", "patch"),
        Access.on(POD, "list"),
        Access.on(JOBSET, "get"),
        Access.on(WORKLOAD, "list"),
    )
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

    async def price(self, ctx: Ctx, obj: dict[str, Any], plan: Plan) -> Price:
        """The training gangs with pods on the node: their GPUs and the GPU-hours since their last
        checkpoint, lost when the gang restarts elsewhere (levers/gangs.py)."""
        names = ctx.policy.namespaces.get(self.name) or []
        if not names:
            return Price(notes=(f"policies/levers.yaml `namespaces` names none for {self.name}: no pods read",))
        costs: list[Cost] = []
        notes: list[str] = []
        for ns in names:
            try:
                pods = await ctx.kube.list_all(
                    f"/api/v1/namespaces/{ns}/pods", {"fieldSelector": f"spec.nodeName={ctx.target.name}"}
                )
            except KubeError as e:
                notes.append(f"could not list the pods on {ctx.target.name} in {ns}: {e}")
                continue
            running = [p for p in pods if (p.get("status") or {}).get("phase") in ("Running", "Pending")]
            labels = [(p["metadata"].get("labels") or {}).get(gangs.JOBSET_LABEL) for p in running]
            for js_name in sorted({str(n) for n in labels if n}):
                costs += await self._gang(ctx, ns, js_name, notes)
        if not costs:
            notes.append(f"no training gang has pods on {ctx.target.name} (namespaces read: {', '.join(names)})")
        return Price(costs=tuple(costs), notes=tuple(notes))

    async def _gang(self, ctx: Ctx, ns: str, name: str, notes: list[str]) -> list[Cost]:
        try:
            js = await ctx.kube.get(JOBSET.path(Target(ns, name)))
            wl = None
            if QUEUE_LABEL in ((js.get("metadata") or {}).get("labels") or {}):
                version = await ctx.kube.served_version(WORKLOAD.group, WORKLOAD.versions)
                if version is not None:
                    listing = f"/apis/{WORKLOAD.group}/{version}/namespaces/{ns}/{WORKLOAD.plural}"
                    uid = js["metadata"].get("uid")
                    owned = [w for w in await ctx.kube.list_all(listing, {}) if owned_by(w, uid)]
                    wl = owned[0] if len(owned) == 1 else None
        except KubeError as e:
            notes.append(f"could not read JobSet {ns}/{name} (pods on {ctx.target.name}): {e}")
            return []
        return await gangs.gang_costs(ctx, js, wl, f"(pods on {ctx.target.name})")

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
