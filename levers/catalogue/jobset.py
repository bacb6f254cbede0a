"""jobset-suspend: the training-hang move; keeps the object and its history. Undo resumes.

A JobSet queued through Kueue (label kueue.x-k8s.io/queue-name) is stopped through its Kueue
Workload, `spec.active: false`: Kueue unsuspends an admitted job whose spec.suspend someone set
(jobframework reconciler, "Job admitted, unsuspending"), but a deactivated Workload is evicted
(reason Deactivated) and Kueue itself keeps the JobSet suspended. Undo restores spec.active as it
was, and Kueue re-admits it. The Workload is the one whose ownerReference carries the JobSet's
uid (Kueue names it jobset-<name>-<hash>, so the name is never guessed), listed by the job-uid label
Kueue puts on it (jobframework: constants.JobUIDLabel), not the whole namespace. A Finished Workload
(Kueue keeps it, admission and all, after its JobSet completed) is not deactivated: Kueue's Workload
reconciler returns early for a finished one, so nothing would ever suspend the JobSet.

Either way, verify waits (bounded) for the controller that acts on the write, not for the write
itself: Kueue suspending the JobSet, or the JobSet controller suspending its child Jobs, which it
reports as the JobSet's Suspended=True condition (jobset_controller.go suspendJobs,
setJobSetSuspendedCondition, reason SuspendedJobs). A JobSet whose spec.managedBy names another
controller is skipped by the JobSet controller (managedByExternalController): nothing here can say
whether its Jobs stopped, so it is not verified. One no JobSet controller has reported on yet (no
status.replicatedJobsStatus) has no Jobs: they are created suspended. A finished JobSet (Completed
or Failed) is refused: the JobSet controller ignores its spec.suspend.
"""

from __future__ import annotations

from typing import Any

from bot.policy.levers import LeverRule
from levers import gangs
from levers.base import Access, Ctx, Kind, Lever, LeverRefusal, Target, Verified, Writes, awaited
from levers.catalogue.simple import merge_plan
from levers.plan import MERGE, ApiCall, Plan, is_absent, kubectl_patch, merge_body, read, with_provenance
from levers.price import Price

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"  # on each Workload Kueue makes for a job: the job's uid
WORKLOAD = Kind("Workload", "kueue.x-k8s.io", "v1beta2", "workloads", namespaced=True, older=("v1beta1",))
ACTIVE = "/spec/active"
SUSPENDED = "Suspended"  # the JobSet's condition type (jobset.JobSetSuspended)
JOBSET_CONTROLLER = "jobset.sigs.k8s.io/jobset-controller"  # spec.managedBy's reserved value (JobSetControllerName)


def owned_by(wl: dict[str, Any], uid: str) -> bool:
    return any(ref.get("uid") == uid for ref in (wl.get("metadata") or {}).get("ownerReferences") or [])


def finished(wl: dict[str, Any]) -> dict[str, Any] | None:
    """The Workload's Finished=True condition (Kueue's record that its job completed or failed), or None."""
    for c in (wl.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Finished" and c.get("status") == "True":
            return dict(c)
    return None


def _jobset_finished(js: dict[str, Any]) -> dict[str, Any] | None:
    """jobset_controller.go jobSetFinished: a Completed or Failed condition that is True (None: still going)."""
    for c in (js.get("status") or {}).get("conditions") or []:
        if isinstance(c, dict) and c.get("type") in ("Completed", "Failed") and c.get("status") == "True":
            return c
    return None


def _suspended(js: dict[str, Any]) -> dict[str, Any] | None:
    """The JobSet's Suspended condition, as its controller wrote it (None: it has written none)."""
    for c in (js.get("status") or {}).get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == SUSPENDED:
            return c
    return None


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
        # The price runs from the later of the checkpoint and the current attempt's start: its Jobs'
        # status.startTime (levers/gangs.py last_start).
        Access("batch", "jobs", ("list",)),
    )
    summary = "JobSet spec.suspend=true (a Kueue-queued one through its Workload, spec.active=false)"

    def writes(self, ctx: Ctx, path: str) -> Writes:
        return {"/spec/suspend": True} if path == self.path(ctx) else {ACTIVE: False}

    async def object_of(self, ctx: Ctx, stored: str | None) -> str:
        """The JobSet, or the Kueue Workload it is stopped through: one in its namespace that the JobSet
        owns (its ownerReference carries the JobSet's uid, as read now)."""
        if stored is None or stored == self.path(ctx):
            return self.path(ctx)
        ns = ctx.target.namespace or "default"
        workload = Target.parse(f"{ns}/{stored.rpartition('/')[2]}", True, WORKLOAD.kind)  # a Kubernetes name
        paths = {WORKLOAD.path(workload, version=v) for v in WORKLOAD.versions}
        if stored not in paths:
            raise LeverRefusal(f"the object {stored}, neither JobSet {ctx.target} nor a Workload in {ns}")
        uid = (await ctx.kube.get(self.path(ctx)))["metadata"].get("uid")
        if not uid or not owned_by(await ctx.kube.get(stored), uid):
            raise LeverRefusal(f"the Workload {stored}, which JobSet {ctx.target} does not own")
        return stored

    async def plan(self, ctx: Ctx, obj: dict[str, Any]) -> Plan:
        queue = ((obj.get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL)
        if not queue:
            done = _jobset_finished(obj)
            if done is not None:
                raise LeverRefusal(
                    f"JobSet {ctx.target} has finished ({done.get('type')}=True, {done.get('reason')}): the JobSet "
                    "controller deletes a finished JobSet's remaining Jobs and never suspends it, so there is nothing "
                    "to stop."
                )
            return merge_plan(self, ctx, obj, {"/spec/suspend": True}, "suspend=true")
        return await self._through_workload(ctx, obj, queue)

    async def _through_workload(self, ctx: Ctx, obj: dict[str, Any], queue: str) -> Plan:
        ns = ctx.target.namespace or "default"
        uid = obj["metadata"].get("uid")
        if not uid:
            raise LeverRefusal(f"JobSet {ctx.target} has no metadata.uid, so its Kueue Workload can't be found.")
        version = await ctx.kube.served_version(WORKLOAD.group, WORKLOAD.versions, WORKLOAD.plural)
        if version is None:
            raise LeverRefusal(
                f"JobSet {ctx.target} is queued through Kueue ({QUEUE_LABEL}={queue}), but this cluster serves "
                f"no Kueue Workload API ({', '.join(WORKLOAD.versions)}), so it can't be stopped through one. "
                "If Kueue is not installed there, the label is stale: remove it and pull again."
            )
        listing = f"/apis/{WORKLOAD.group}/{version}/namespaces/{ns}/{WORKLOAD.plural}"
        selected = await ctx.kube.list_all(listing, {"labelSelector": f"{JOB_UID_LABEL}={uid}"})
        owned = [w for w in selected if owned_by(w, uid)]
        # A Workload being deleted (Kueue's finalizer holds it) no longer admits the JobSet.
        present = [w for w in owned if not w["metadata"].get("deletionTimestamp")]
        live = [w for w in present if finished(w) is None]
        if present and not live:
            wl = present[0]
            done = finished(wl) or {}
            raise LeverRefusal(
                f"JobSet {ctx.target} has finished: its Kueue Workload {ns}/{wl['metadata']['name']} is "
                f"Finished ({done.get('reason')}: {done.get('message')}), so there is nothing to stop."
            )
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
        if not landed.ok:
            return landed
        if not plan.path:
            return await self._jobs_suspended(ctx, plan, after)
        # `after` is the Workload; Kueue's job reconciler then suspends the JobSet: give it a bounded while.
        seconds = ctx.policy.rollout_verify_seconds
        suspend: Any = None

        async def suspended() -> Verified | None:
            nonlocal suspend
            suspend = read(await ctx.kube.get(self.path(ctx)), "/spec/suspend")
            return Verified(True, f"{plan.effect}; Kueue suspended the JobSet") if suspend is True else None

        if done := await awaited(seconds, suspended):
            return done
        wl = await ctx.kube.get(plan.path)
        seen = "absent" if is_absent(suspend) else str(suspend).lower()
        return Verified(
            False,
            f"Workload {ctx.target.namespace}/{plan.meta.get('workload')} has spec.active=false ({_evicted(wl)}), "
            f"but JobSet spec.suspend={seen} after {seconds:g}s: is Kueue's controller running? Watch "
            f"`kubectl get jobset {ctx.target.name} -n {ctx.target.namespace}`",
        )

    async def _jobs_suspended(self, ctx: Ctx, plan: Plan, after: dict[str, Any]) -> Verified:
        """spec.suspend=true landed; the JobSet controller then suspends every child Job and sets
        Suspended=True (reason SuspendedJobs) in the JobSet's status: give it a bounded while."""
        manager = read(after, "/spec/managedBy")
        ns, name = ctx.target.namespace, ctx.target.name
        jobs = f"`kubectl get jobs -n {ns} -l jobset.sigs.k8s.io/jobset-name={name}`"
        if isinstance(manager, str) and manager != JOBSET_CONTROLLER:
            return Verified(
                False,
                f"JobSet {ctx.target} has spec.suspend=true, but it is managed by {manager} (spec.managedBy), "
                f"which the JobSet controller leaves alone: whether its Jobs stopped is up to {manager}. Check {jobs}",
            )
        if not isinstance((after.get("status") or {}).get("replicatedJobsStatus"), list):
            # The JobSet controller writes status.replicatedJobsStatus on its first reconcile of a
            # JobSet, with the Jobs it creates (updateReplicatedJobsStatuses): none yet means it made
            # no Jobs, and it creates them with the JobSet's spec.suspend (constructJob).
            return Verified(
                True,
                f"{plan.effect}; no JobSet controller has reported on it yet (no status.replicatedJobsStatus), so "
                "it has no Jobs running: the JobSet controller creates them suspended",
            )
        seconds = ctx.policy.rollout_verify_seconds
        jobset: dict[str, Any] | None = None
        cond: dict[str, Any] | None = None

        async def reported() -> Verified | None:
            nonlocal jobset, cond
            jobset = after if jobset is None else await ctx.kube.get(self.path(ctx))  # read-back first
            cond = _suspended(jobset)
            if cond is None or cond.get("status") != "True":
                return None
            reason = cond.get("reason")
            return Verified(True, f"{plan.effect}; the JobSet controller suspended its Jobs (Suspended=True, {reason})")

        if done := await awaited(seconds, reported):
            return done
        seen = "no Suspended condition" if cond is None else f"Suspended={cond.get('status')} ({cond.get('reason')})"
        return Verified(
            False,
            f"JobSet {ctx.target} has spec.suspend=true, but after {seconds:g}s the JobSet controller has not reported "
            f"its Jobs suspended ({seen}): is the JobSet controller running? Check {jobs}",
        )
