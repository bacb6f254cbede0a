"""node-quarantine: taint a GPU node NoSchedule with a reason, plus reason and ticket labels.

Guarded by the node's resourceVersion (one retry on conflict is the
executor's) and by the cell's budgets: a rate per hour and a minHealthy floor,
both reserved in one atomic step just before the write (levers/budgets.py).

Undo removes only what the lever added: its taint (matched by key, effect and
value) and its reason/ticket labels while they still hold its values. Taints and
labels added since (a `kubectl cordon`, a node.kubernetes.io/not-ready taint)
stay; a taint the lever overwrote (same key and effect) is put back.

The price is what a NoSchedule taint does: it closes the node's GPUs to new pods and evicts nothing,
so the training gangs with pods on the node are named as running on, with no GPU-hours lost.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import field_validator

from bot.clusters import KubeError
from bot.policy.levers import LeverRule
from levers import budgets, gangs, returngate
from levers.base import Access, Ctx, Kind, Lever, NoParams, Target, Verified, Writes
from levers.catalogue.jobset import JOB_UID_LABEL, QUEUE_LABEL, WORKLOAD, JobSetSuspend, finished, owned_by
from levers.catalogue.simple import merge_plan
from levers.plan import ABSENT, ANNOTATIONS, LABELS, Plan, container_pre, is_absent, ptr, read, restore_ops
from levers.price import GPU_HOURS, Cost, Price

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


def _schedulable_gpus(node: dict[str, Any], name: str) -> Cost:
    """The node's GPUs the taint closes to new pods: its status.allocatable nvidia.com/gpu. Unknown,
    with why, when the node hands out its GPUs another way (MIG profiles, another vendor, DRA)."""
    what = f"Node {name}: GPUs closed to new pods"
    alloc = (node.get("status") or {}).get("allocatable")
    alloc = alloc if isinstance(alloc, dict) else {}
    if gangs.GPU not in alloc:
        others = sorted(k for k in alloc if "gpu" in k or k.startswith("nvidia.com/mig-"))
        why = (
            f"status.allocatable has {', '.join(others)}, not {gangs.GPU}"
            if others
            else f"no {gangs.GPU} in status.allocatable (GPUs handed out through DRA are not read)"
        )
        return Cost(what=what, unit="GPUs", value=None, how=why)
    raw = str(alloc[gangs.GPU])
    if not raw.isdigit():
        return Cost(
            what=what, unit="GPUs", value=None, how=f"status.allocatable {gangs.GPU}={raw!r}, not a whole number"
        )
    return Cost(what=what, unit="GPUs", value=int(raw), how=f"status.allocatable {gangs.GPU}")


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

    def writes(self, ctx: Ctx, path: str) -> Writes:
        """Its taint first in the list (the rest is the node's own, as read), and its two labels."""
        p = ctx.params_as(QuarantineParams)
        key = ctx.policy.node_quarantine.taint_key
        taint = {"key": key, "value": p.reason, "effect": "NoSchedule"}
        return {
            TAINTS: lambda v: isinstance(v, list) and bool(v) and v[0] == taint,
            ptr("metadata", "labels", f"{key}-reason"): p.reason,
            ptr("metadata", "labels", f"{key}-ticket"): p.ticket or ctx.incident,
        }

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
        """What the taint blocks: the node's GPUs, closed to new pods. A NoSchedule taint evicts
        nothing (the scheduler keeps new pods off; only NoExecute makes the taint manager evict), so
        the training gangs with pods on the node keep running and lose no progress: they are named,
        with their GPUs there, and the GPU-hours lost are 0."""
        node = ctx.target.name
        costs = [
            _schedulable_gpus(obj, node),
            Cost(
                what=f"Node {node}: training progress lost",
                unit=GPU_HOURS,
                value=0,
                how="a NoSchedule taint evicts nothing: the pods on it keep running",
            ),
        ]
        notes: list[str] = []
        if (obj.get("spec") or {}).get("unschedulable") is True:
            notes.append(f"{node} is already cordoned (spec.unschedulable): new pods are kept off it either way")
        names = ctx.policy.namespaces.get(self.name) or []
        if not names:
            notes.append(f"policies/levers.yaml `namespaces` names none for {self.name}: no pods read")
            return Price(costs=tuple(costs), notes=tuple(notes))
        kept: list[str] = []
        for ns in names:
            try:
                pods = await ctx.kube.list_all(
                    f"/api/v1/namespaces/{ns}/pods", {"fieldSelector": f"spec.nodeName={node}"}
                )
            except KubeError as e:
                notes.append(f"could not list the pods on {node} in {ns}: {e}")
                continue
            running = [p for p in pods if (p.get("status") or {}).get("phase") in ("Running", "Pending")]
            by_gang: dict[str, list[dict[str, Any]]] = {}
            for p in running:
                js_name = (p["metadata"].get("labels") or {}).get(gangs.JOBSET_LABEL)
                if js_name:
                    by_gang.setdefault(str(js_name), []).append(p)
            for js_name in sorted(by_gang):
                kept.append(await self._kept(ctx, ns, js_name, by_gang[js_name], notes))
        if kept:
            notes += [f"{k} keeps running on {node}" for k in kept]
        else:
            notes.append(f"no training gang has pods on {node} (namespaces read: {', '.join(names)})")
        return Price(costs=tuple(costs), notes=tuple(notes))

    async def _kept(self, ctx: Ctx, ns: str, name: str, pods: list[dict[str, Any]], notes: list[str]) -> str:
        """One gang with pods on the node, as the price names it: `JobSet ns/name (8 of its 512 GPUs there, 1 pod)`."""
        node = ctx.target.name
        try:
            here: int | None = sum(
                gangs.pod_gpus(p.get("spec") or {}, f"pod {ns}/{p['metadata']['name']}") for p in pods
            )
        except gangs.Unreadable as e:
            here = None
            notes.append(str(e))
        total: int | None = None
        try:
            js = await ctx.kube.get(JOBSET.path(Target(ns, name)))
            wl = await self._workload(ctx, ns, js)
            total = gangs.workload_gpus(wl) if wl is not None else gangs.jobset_gpus(js)
        except KubeError as e:
            notes.append(f"could not read JobSet {ns}/{name} (pods on {node}): {e}")
        except (gangs.Unreadable, ValueError, TypeError) as e:
            notes.append(
                f"JobSet {ns}/{name}: {e}"
                if isinstance(e, gangs.Unreadable)
                else f"JobSet {ns}/{name}: its replicas or parallelism are not numbers"
            )
        of = f" of its {total}" if total is not None else ""
        count = f"{len(pods)} pod" + ("" if len(pods) == 1 else "s")
        return f"JobSet {ns}/{name} ({'unknown' if here is None else here}{of} GPUs there, {count})"

    async def _workload(self, ctx: Ctx, ns: str, js: dict[str, Any]) -> dict[str, Any] | None:
        """The gang's live Kueue Workload (its podSets are the gang's GPUs), or None when it is not
        queued or has not exactly one. Listed by the job-uid label Kueue puts on each Workload it makes
        for a job (kueue v0.17.0 pkg/controller/jobframework/reconciler.go, constants.JobUIDLabel),
        not the whole namespace."""
        if QUEUE_LABEL not in ((js.get("metadata") or {}).get("labels") or {}):
            return None
        uid = js["metadata"].get("uid")
        version = await ctx.kube.served_version(WORKLOAD.group, WORKLOAD.versions, WORKLOAD.plural)
        if version is None or not uid:
            return None
        listing = f"/apis/{WORKLOAD.group}/{version}/namespaces/{ns}/{WORKLOAD.plural}"
        selected = await ctx.kube.list_all(listing, {"labelSelector": f"{JOB_UID_LABEL}={uid}"})
        # A finished Workload keeps its podSets but runs nothing; one being deleted admits nothing.
        live = [
            w
            for w in selected
            if owned_by(w, uid) and not w["metadata"].get("deletionTimestamp") and finished(w) is None
        ]
        return live[0] if len(live) == 1 else None

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
        """The return gate (levers/returngate.py): Ready; no new fatal XID, ECC DBE or row remap since."""
        gate = await returngate.check(ctx.svc, await ctx.kube.get(self.path(ctx)), ctx.cell, since)
        return Verified(gate.ok, gate.text)
