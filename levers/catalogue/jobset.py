"""jobset-suspend: the training-hang move; keeps the object and its history. Undo resumes.

A JobSet queued through Kueue (label kueue.x-k8s.io/queue-name) is stopped through its Kueue
Workload, `spec.active: false`: Kueue unsuspends an admitted job whose spec.suspend someone set
(jobframework reconciler, "Job admitted, unsuspending"), but a deactivated Workload is evicted
(reason Deactivated) and Kueue itself keeps the JobSet suspended. Undo restores spec.active as it
was, and Kueue re-admits it. The Workload is the one whose ownerReference carries the JobSet's
uid (Kueue names it jobset-<name>-<hash>, so the name is never guessed).
"""

from __future__ import annotations

import asyncio
from typing import Any

from bot.policy.levers import LeverRule
from levers import gangs
from levers.base import Access, Ctx, Kind, Lever, LeverRefusal, Target, Verified
from levers.catalogue.simple import merge_plan
from levers.plan import MERGE, ApiCall, Plan, is_absent, kubectl_patch, merge_body, read, with_provenance
from levers.price import Price

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
WORKLOAD = Kind("Workload", "kueue.x-k8s.io", "v1beta2", "workloads", namespaced=True, older=("v1beta1",))
ACTIVE = "/spec/active"


def owned_by(wl: dict[str, Any], uid: str) -> bool:
    return any(ref.get("uid") == uid for ref in (wl.get("metadata") or {}).get("ownerReferences") or [])


def _evicted(wl: dict[str, Any]) -> str:
    """The Workload's Evicted condition, as `kubectl describe` would show it (or that it has none)."""
    for c in (wl.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Evicted":
            return f"Evicted={c.get('status')} ({c.get('reason')})"
    return "no Evicted condition"


class JobSetSuspend(Lever):
    name = "jobset-suspend"
    default_rule = LeverRule(roles=["ops"])
    kind = Kind("JobSet", "jobset.x-k8s.io", "v1alpha2", "jobsets", namespaced=True)
    needs = (
        Access.on(kind, "get", "patch"),  # read (and verify's wait for Kueue), spec.suspend when not queued
        # A Kueue-queued one: find its Workload by owner uid (list), deactivate it, read back, undo.
        Access.on(WORKLOAD, "get", "list", "patch"),
    )
    summary = "JobSet spec.suspend=true (a Kueue-queued one through its Workload, spec.active=false)"

    async def plan(self, ctx: Ctx, obj: dict[str, Any]) -> Plan:
        queue = ((obj.get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL)
        if not queue:
            return merge_plan(self, ctx, obj, {"/spec/suspend": True}, "suspend=true")
        return await self._through_workload(ctx, obj, queue)

    async def _through_workload(self, ctx: Ctx, obj: dict[str, Any], queue: str) -> Plan:
        ns = ctx.target.namespace or "default"
        uid = obj["metadata"].get("uid")
        if not uid:
            raise LeverRefusal(f"JobSet {ctx.target} has no metadata.uid, so its Kueue Workload can't be found.")
        version = await ctx.kube.served_version(WORKLOAD.group, WORKLOAD.versions)
        if version is None:
            raise LeverRefusal(
                f"JobSet {ctx.target} is queued through Kueue ({QUEUE_LABEL}={queue}), but this cluster serves "
                f"no Kueue Workload API ({', '.join(WORKLOAD.versions)}), so it can't be stopped through one. "
                "If Kueue is not installed there, the label is stale: remove it and pull again."
            )
        listing = f"/apis/{WORKLOAD.group}/{version}/namespaces/{ns}/{WORKLOAD.plural}"
        owned = [w for w in await ctx.kube.list_all(listing, {}) if owned_by(w, uid)]
        # A Workload being deleted (Kueue's finalizer holds it) no longer admits the JobSet.
        live = [w for w in owned if not w["metadata"].get("deletionTimestamp")]
        if not live:
            going = f" ({len(owned)} being deleted)" if owned else ""
            raise LeverRefusal(
                f"JobSet {ctx.target} is queued through Kueue ({QUEUE_LABEL}={queue}) but has no Workload "
                f"yet{going}: Kueue has not picked it up, so there is nothing to deactivate. "
                f"Check `kubectl get workloads -n {ns}` and pull the lever again."
            )
        if len(live) > 1:
            names = ", ".join(sorted(w["metadata"]["name"] for w in live))
            raise LeverRefusal(
                f"JobSet {ctx.target} has {len(live)} Kueue Workloads ({names}); Firebreak won't pick one. "
                "Deactivate the right one by hand (spec.active=false)."
            )
        wl = live[0]
        ctx.scratch["workload"] = wl  # its podSets are the gang's GPUs (price)
        name = wl["metadata"]["name"]
        changes: dict[str, Any] = {ACTIVE: False}
        pre: dict[str, Any] = {ACTIVE: read(wl, ACTIVE)}
        with_provenance(wl, changes, pre, ctx.req_id, ctx.incident)
        body = merge_body(changes, wl["metadata"].get("resourceVersion"))
        line = kubectl_patch(ctx.context, WORKLOAD.resource, name, ns, "merge", body)
        why = f"stops JobSet {ctx.target} through its Kueue Workload"
        call = ApiCall("PATCH", WORKLOAD.path(Target(ns, name), version=version), MERGE, body, f"{line}  # {why}")
        return Plan(
            [call],
            changes,
            pre,
            f"stopped through Workload {ns}/{name} (spec.active=false)",
            notes=[f"Kueue-managed (queue {queue}): a bare spec.suspend would be undone by Kueue's re-admission"],
            meta={"workload": name},
            path=call.path,
        )

    async def price(self, ctx: Ctx, obj: dict[str, Any], plan: Plan) -> Price:
        """The gang it stops: its GPUs and the GPU-hours since its last checkpoint (levers/gangs.py)."""
        if obj.get("spec", {}).get("suspend") is True and not plan.path:
            return Price(notes=(f"JobSet {ctx.target} is already suspended: no training progress to lose",))
        return Price(costs=tuple(await gangs.gang_costs(ctx, obj, ctx.scratch.get("workload"))))

    async def verify(self, ctx: Ctx, plan: Plan, after: dict[str, Any]) -> Verified:
        landed = await super().verify(ctx, plan, after)
        if not plan.path or not landed.ok:
            return landed
        # `after` is the Workload; Kueue's job reconciler then suspends the JobSet: give it a bounded while.
        seconds = ctx.policy.rollout_verify_seconds
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while True:
            jobset = await ctx.kube.get(self.path(ctx))
            suspend = read(jobset, "/spec/suspend")
            if suspend is True:
                return Verified(True, f"{plan.effect}; Kueue suspended the JobSet")
            if loop.time() >= deadline:
                break
            await asyncio.sleep(min(0.5, max(0.0, deadline - loop.time())))
        wl = await ctx.kube.get(plan.path)
        seen = "absent" if is_absent(suspend) else str(suspend).lower()
        return Verified(
            False,
            f"Workload {ctx.target.namespace}/{plan.meta.get('workload')} has spec.active=false ({_evicted(wl)}), "
            f"but JobSet spec.suspend={seen} after {seconds:g}s: is Kueue's controller running? Watch "
            f"`kubectl get jobset {ctx.target.name} -n {ctx.target.namespace}`",
        )
