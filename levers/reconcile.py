"""Settling what a dead process left `executing` or `undoing`, at the next start.

Nothing is re-applied: the object is read back. Executing: every planned
change present -> `done` (verified by that read); none -> `failed`, nothing
changed; part of a multi-call plan -> the part that landed is put back, then
`failed`. Undoing: pre-state present -> `undone`; else back to `done` (still
applied). The settling itself is a compare-and-set from the in-flight state,
so two starting replicas settle a request once. A request younger than policy
`stuck_after_seconds` may belong to a live replica: it gets a timer instead.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bot import logs
from bot.incidents.views import announce
from bot.scheduler import Job, job_handler, on_start
from levers import hooks, messages
from levers.base import LEVERS, Ctx, Lever
from levers.context import for_record
from levers.kube import KubeError, UnknownCell
from levers.plan import JSON_PATCH, Plan, read, restore_ops
from levers.requests import IN_FLIGHT, LeverRequest, get_request, in_flight, transition
from levers.undo import not_restored

if TYPE_CHECKING:
    from bot.core.services import Services

log = logs.get(__name__)
JOB = "lever.reconcile"
AFTER_RESTART = "found after a restart; not re-applied"


@on_start
async def reconcile_in_flight(svc: "Services") -> None:
    for rec in await in_flight(svc.redis):
        await settle(svc, rec)


@job_handler(JOB)
async def _due(svc: "Services", job: Job) -> None:
    rec = await get_request(svc.redis, job.key)
    if rec is not None and rec.state in IN_FLIGHT:
        await settle(svc, rec)


async def _later(svc: "Services", rec: LeverRequest, due: float) -> None:
    await svc.extras["scheduler"].schedule(JOB, rec.id, due, {"incident": rec.incident})


async def settle(svc: "Services", rec: LeverRequest) -> str | None:
    """Settle one in-flight request if it is old enough; returns the state it settled in."""
    grace = svc.policy.levers.stuck_after_seconds
    since = (rec.started_at if rec.state == "executing" else rec.undone_at) or rec.created_at
    if svc.clock.now() < since + grace:
        await _later(svc, rec, since + grace)
        return None
    lever = LEVERS[rec.lever]
    try:
        ctx = await for_record(svc, rec)
        obj = await ctx.kube.get(lever.path(ctx))
    except (KubeError, UnknownCell) as e:
        log.warning("lever_reconcile_unreadable", request=rec.id, error=str(e)[:200])
        await _later(svc, rec, svc.clock.now() + grace)  # can't tell what landed: look again later
        return None
    if rec.state == "executing":
        return await _executing(svc, rec, lever, ctx, obj)
    return await _undoing(svc, rec, lever, ctx, obj)


async def _executing(svc: "Services", rec: LeverRequest, lever: Lever, ctx: Ctx, obj: dict[str, Any]) -> str | None:
    plan = Plan.from_record(rec.plan, rec.pre_state)
    present = {p: v for p, v in plan.changes.items() if read(obj, p) == v}
    rv = (obj.get("metadata") or {}).get("resourceVersion")
    state = "done" if len(present) == len(plan.changes) else "failed"
    if not await transition(svc.redis, rec.id, {"executing"}, state, finished_at=svc.clock.now()):
        return None  # another process settled it
    if state == "done":
        await lever.applied(ctx, plan)
        message = messages.done(rec, True, f"{plan.effect}; {AFTER_RESTART}", rv)
    else:
        message = messages.failed(rec, f"{await _put_back(ctx, lever, rec, present, obj)} ({AFTER_RESTART})")
        await lever.release(ctx, plan)
    result = {"ok": state == "done", "message": message, "verified": state == "done", "resource_version": rv,
              "reconciled": True}
    await transition(svc.redis, rec.id, {state}, state, result=result)
    await svc.audit.append(f"lever.{state}", actor="system", incident=rec.incident, detail={
        "request": rec.id, "lever": rec.lever, "target": rec.target, "cell": rec.cell, **result})
    await _tell(svc, rec, message)
    await hooks.grant_used(svc, rec, rec.grant_id)
    settled = await get_request(svc.redis, rec.id)
    for hook in hooks.RECONCILED:
        await hook(svc, settled or rec)
    return state


async def _put_back(ctx: Ctx, lever: Lever, rec: LeverRequest, present: dict[str, Any], obj: dict) -> str:
    """A plan cut between calls: restore what landed (guarded), so nothing is left half-applied."""
    ops = restore_ops(present, rec.pre_state, obj)
    if not ops:
        return "interrupted before the write landed; nothing changed"
    try:
        await ctx.kube.call("PATCH", lever.path(ctx), JSON_PATCH, ops)
    except KubeError as e:
        return f"interrupted part-way, and putting back what had landed failed ({e}): check {rec.target} by hand"
    return "interrupted part-way; what had landed was put back, nothing changed"


async def _undoing(svc: "Services", rec: LeverRequest, lever: Lever, ctx: Ctx, obj: dict[str, Any]) -> str | None:
    rv = (obj.get("metadata") or {}).get("resourceVersion")
    if not_restored(rec, obj):
        if not await transition(svc.redis, rec.id, {"undoing"}, "done", undone_by=None, undone_at=None):
            return None
        message = (f"{rec.label}: the undo by <@{rec.undone_by}> was interrupted before the restore landed; "
                   f"nothing changed, {rec.id} is still applied. Run `/incident undo {rec.id}` again if needed.")
        action, state = "lever.undo_failed", "done"
    else:
        undo = {"resource_version": rv, "verified": True, "reconciled": True}
        if not await transition(svc.redis, rec.id, {"undoing"}, "undone", result={**rec.result, "undo": undo}):
            return None
        await lever.undone(ctx)
        message = f"{rec.label}: undone by <@{rec.undone_by}> (restore verified by read-back after a restart, rv {rv})."
        action, state = "lever.undo", "undone"
    await svc.audit.append(action, actor="system", incident=rec.incident, detail={
        "request": rec.id, "lever": rec.lever, "target": rec.target, "cell": rec.cell, "undone_by": rec.undone_by,
        "resource_version": rv, "reconciled": True, "message": message})
    await _tell(svc, rec, message)
    return state


async def _tell(svc: "Services", rec: LeverRequest, message: str) -> None:
    if await announce(svc, rec.incident, message):
        log.warning("lever_reconcile_not_posted", request=rec.id)
