"""Settling what a dead process left `executing` or `undoing`, at the next start.

Nothing is re-applied: the object is read back. Executing: every planned
change present -> `done` (verified by that read); none -> `failed`, nothing
changed; part of a multi-call plan -> the part that landed is put back, then
`failed`. Undoing: pre-state present -> `undone`; else back to `done` (still
applied). The settling itself is a compare-and-set from the in-flight state,
so two starting replicas settle a request once. A request younger than policy
`stuck_after_seconds` may belong to a live replica: it gets a timer instead.

Each settle is the system command `lever_settle`, run through the one
dispatcher like every timer: one `command.lever_settle` entry (source `system`
from the start sweep, `scheduler` from its timer), and the lever.* event it
writes carries the same request id.
"""

from __future__ import annotations

from typing import Any

from bot import logs
from bot.clock import hhmm
from bot.core import dispatch
from bot.core.request import SYSTEM_ACTOR, IncidentView, Outcome, Refusal, Request, Source
from bot.core.services import Services
from bot.scheduler import Job
from levers import hooks, messages
from levers.base import Ctx, Lever
from levers.catalogue import LEVERS
from levers.commands import LeverSettle
from levers.context import for_record
from levers.kube import KubeError, UnknownCell
from levers.plan import JSON_PATCH, Plan, read, restore_ops
from levers.posts import announce
from levers.requests import IN_FLIGHT, LeverRequest
from levers.store import lever_store
from levers.undo import not_restored

log = logs.get(__name__)
JOB = "lever.reconcile"
AFTER_RESTART = "found after a restart; not re-applied"


def _stuck_at(svc: Services, rec: LeverRequest) -> float:
    """When an in-flight request counts as abandoned (before that, a live replica may own it)."""
    since = (rec.started_at if rec.state == "executing" else rec.undone_at) or rec.created_at
    return since + svc.policy.levers.stuck_after_seconds


async def _later(svc: Services, rec: LeverRequest, due: float) -> None:
    await svc.scheduler.schedule(JOB, rec.id, due, {"incident": rec.incident})


class NotSettled(Exception):
    """The settle request ended in an error (e.g. the object could not be read back): try again later."""


async def _settle_when_stuck(svc: Services, rec: LeverRequest, source: Source) -> None:
    """Dispatch the settle once the request is old enough; until then, a timer (no audit for waiting)."""
    if svc.clock.now() < _stuck_at(svc, rec):
        await _later(svc, rec, _stuck_at(svc, rec))
        return
    out = await dispatch.execute(
        svc, Request(command=LeverSettle(request=rec.id), actor=SYSTEM_ACTOR, source=source, incident_id=rec.incident)
    )
    if out.result == "error":
        raise NotSettled(out.message)


async def reconcile_in_flight(svc: Services) -> None:
    """At start: settle (or time) every request a process left executing or undoing."""
    for rec in await lever_store(svc).in_flight():
        try:
            await _settle_when_stuck(svc, rec, Source.system)
        except NotSettled:
            await _later(svc, rec, svc.clock.now() + svc.policy.levers.stuck_after_seconds)


async def settle_due(svc: Services, job: Job) -> None:
    """The JOB timer: settle the request if it is still in flight."""
    rec = await lever_store(svc).get(job.key)
    if rec is not None and rec.state in IN_FLIGHT:
        # NotSettled (or any error) leaves the job to the scheduler's retry.
        await _settle_when_stuck(svc, rec, Source.scheduler)


async def settle(svc: Services, req: Request, cmd: LeverSettle, inc: IncidentView) -> Outcome:
    store = lever_store(svc)
    rec = await store.get(cmd.request)
    if rec is None or rec.state not in IN_FLIGHT:
        raise Refusal(f"{cmd.request} is {rec.state if rec else 'missing'}; nothing to settle.", request=cmd.request)
    if svc.clock.now() < _stuck_at(svc, rec):  # it moved on and back in flight since the sweep looked
        await _later(svc, rec, _stuck_at(svc, rec))
        raise Refusal(f"{rec.id} is {rec.state} and not stuck yet.", request=rec.id)
    lever = LEVERS[rec.lever]
    try:
        ctx = await for_record(svc, rec)
        obj = await ctx.kube.get(lever.path(ctx))
    except (KubeError, UnknownCell) as e:
        # Can't tell what landed: look again later (the scheduler also retries this job soon).
        retry = svc.clock.now() + svc.policy.levers.stuck_after_seconds
        await _later(svc, rec, retry)
        return Outcome(
            result="error",
            message=f"{rec.label}: could not read it back ({e}); looking again at {hhmm(retry)} UTC.",
            audit={"request": rec.id, "settled": None, "error": str(e)[:200]},
        )
    settled = await (_executing if rec.state == "executing" else _undoing)(svc, req, rec, lever, ctx, obj)
    if settled is None:
        raise Refusal(f"{rec.id} was settled by another process.", request=rec.id)
    state, message = settled
    return Outcome(
        message=message,
        audit={
            "request": rec.id,
            "lever": rec.lever,
            "target": rec.target,
            "cell": rec.cell,
            "was": rec.state,
            "settled": state,
        },
    )


# Each returns (state, message), or None when another process settled it first. The lever.* entry is the
# same event the executor / undo write in the normal path, tied to this settle's request id.
async def _executing(
    svc: Services, req: Request, rec: LeverRequest, lever: Lever, ctx: Ctx, obj: dict[str, Any]
) -> tuple[str, str] | None:
    plan = Plan.from_record(rec.plan, rec.pre_state)
    present = {p: v for p, v in plan.changes.items() if read(obj, p) == v}
    rv = (obj.get("metadata") or {}).get("resourceVersion")
    state = "done" if len(present) == len(plan.changes) else "failed"
    store = lever_store(svc)
    if not await store.transition(rec.id, {"executing"}, state, finished_at=svc.clock.now()):
        return None  # another process settled it
    if state == "done":
        await lever.applied(ctx, plan)
        message = messages.done(rec, True, f"{plan.effect}; {AFTER_RESTART}", rv)
    else:
        message = messages.failed(rec, f"{await _put_back(ctx, lever, rec, present, obj)} ({AFTER_RESTART})")
        await lever.release(ctx, plan)
    result = {
        "ok": state == "done",
        "message": message,
        "verified": state == "done",
        "resource_version": rv,
        "reconciled": True,
    }
    await store.transition(rec.id, {state}, state, result=result)
    await svc.audit.append(
        f"lever.{state}",
        actor=SYSTEM_ACTOR,
        incident=rec.incident,
        request_id=req.id,
        detail={"request": rec.id, "lever": rec.lever, "target": rec.target, "cell": rec.cell, **result},
    )
    await _tell(svc, rec, message)
    await hooks.grant_used(svc, rec, rec.grant_id)
    settled = await store.get(rec.id)
    for hook in svc.registry.hooked(hooks.RECONCILED):
        await hook(svc, settled or rec)
    return state, message


async def _put_back(ctx: Ctx, lever: Lever, rec: LeverRequest, present: dict[str, Any], obj: dict[str, Any]) -> str:
    """A plan cut between calls: restore what landed (guarded), so nothing is left half-applied."""
    ops = restore_ops(present, rec.pre_state, obj)
    if not ops:
        return "interrupted before the write landed; nothing changed"
    try:
        await ctx.kube.call("PATCH", lever.path(ctx), JSON_PATCH, ops)
    except KubeError as e:
        return f"interrupted part-way, and putting back what had landed failed ({e}): check {rec.target} by hand"
    return "interrupted part-way; what had landed was put back, nothing changed"


async def _undoing(
    svc: Services, req: Request, rec: LeverRequest, lever: Lever, ctx: Ctx, obj: dict[str, Any]
) -> tuple[str, str] | None:
    store = lever_store(svc)
    rv = (obj.get("metadata") or {}).get("resourceVersion")
    if not_restored(rec, obj):
        if not await store.transition(rec.id, {"undoing"}, "done", undone_by=None, undone_at=None):
            return None
        message = (
            f"{rec.label}: the undo by <@{rec.undone_by}> was interrupted before the restore landed; "
            f"nothing changed, {rec.id} is still applied. Run `/incident undo {rec.id}` again if needed."
        )
        action, state = "lever.undo_failed", "done"
    else:
        undo = {"resource_version": rv, "verified": True, "reconciled": True}
        if not await store.transition(rec.id, {"undoing"}, "undone", result={**rec.result, "undo": undo}):
            return None
        await lever.undone(ctx)
        message = f"{rec.label}: undone by <@{rec.undone_by}> (restore verified by read-back after a restart, rv {rv})."
        action, state = "lever.undo", "undone"
    await svc.audit.append(
        action,
        actor=SYSTEM_ACTOR,
        incident=rec.incident,
        request_id=req.id,
        detail={
            "request": rec.id,
            "lever": rec.lever,
            "target": rec.target,
            "cell": rec.cell,
            "undone_by": rec.undone_by,
            "resource_version": rv,
            "reconciled": True,
            "message": message,
        },
    )
    await _tell(svc, rec, message)
    return state, message


async def _tell(svc: Services, rec: LeverRequest, message: str) -> None:
    if await announce(svc, rec.incident, message):
        log.warning("lever_reconcile_not_posted", request=rec.id)
