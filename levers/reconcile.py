"""Settling what a dead process (or one that lost its store) left `executing` or `undoing`.

The running app settles it: entering flight arms a timer (levers/inflight.py) that fires
`stuck_after_seconds` later in whichever replica is alive; the sweep at start covers what was
in flight before that timer existed. A request younger than that may belong to a live
replica: it gets (or keeps) its timer instead.

Nothing is re-applied: the object is read back. Executing: every planned
change present -> `done` (verified by that read); none -> `failed`, nothing
changed; part of a multi-call plan -> the part that landed is put back, then
`failed`. Undoing: pre-state present -> `undone`; else back to `done` (still
applied). The settling itself is a compare-and-set from the in-flight state,
so two replicas settle a request once.

Superseded: when the object holds a LATER request's plan now (its provenance annotation names
that request, on the same object, done or in flight, and every field it set is there), the later
request owns the object. Nothing is put back over it; the stuck request's outcome is read from
what the later request found when it planned (its pre-state), and the settle says "superseded".

The record comes from Redis, and settling it may write (putting back part of a plan cut short): it is
first held to what its lever could have planned (levers/bounds.py). One that names another object or
field is not settled: audited, posted, left in flight for a person, and not retried by its timer.

Each settle is the system command `lever_settle`, run through the one
dispatcher like every timer: one `command.lever_settle` entry (source `system`
from the start sweep, `scheduler` from its timer), and the lever.* event it
writes carries the same request id.
"""

from __future__ import annotations

from typing import Any

from bot import logs, metrics
from bot.chat import person
from bot.clock import hhmm
from bot.clusters import KubeError, UnknownCell
from bot.core import dispatch
from bot.core.posts import announce
from bot.core.request import SYSTEM_ACTOR, IncidentView, Outcome, Refusal, Request, Source
from bot.core.services import Services
from bot.scheduler import Job
from levers import bounds, hooks, inflight, messages
from levers.base import LeverRefusal
from levers.catalogue import LEVERS
from levers.commands import LeverSettle
from levers.plan import JSON_PATCH, REQUEST_ANNOTATION, Plan, ptr, read
from levers.requests import IN_FLIGHT, LeverEvent, LeverRequest, LeverState
from levers.store import lever_store
from levers.undo import not_restored

log = logs.get(__name__)
JOB = inflight.JOB
NOT_REAPPLIED = "found stuck in flight; read back, not re-applied"
_stuck_at = inflight.stuck_at
# A request that owns the object now may be finished or still in flight; any other state let go of it.
_HOLDS_OBJECT = (LeverState.done, LeverState.executing, LeverState.undoing)


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
    try:
        held = await bounds.check(svc, rec)
        obj = await held.ctx.kube.get(held.path)
    except bounds.Tampered as t:
        # Not retried: the record stays as it is for a person to look at (the audit log says what it was).
        raise Refusal(await bounds.refuse(svc, rec, t, "settle"), request=rec.id) from None
    except (KubeError, UnknownCell, LeverRefusal) as e:
        # Can't tell what landed: look again later (the scheduler also retries this job soon).
        retry = svc.clock.now() + svc.policy.levers.stuck_after_seconds
        await _later(svc, rec, retry)
        return Outcome(
            result="error",
            message=f"{rec.label}: could not read it back ({e}); looking again at {hhmm(retry)} UTC.",
            audit={"request": rec.id, "settled": None, "error": str(e)[:200]},
        )
    settled = await (_executing if rec.state is LeverState.executing else _undoing)(svc, req, rec, held, obj)
    if settled is None:
        raise Refusal(f"{rec.id} was settled by another process.", request=rec.id)
    state, message = settled
    return Outcome(
        message=message,
        audit={
            **rec.ids(),
            "was": rec.state,
            "settled": state,
        },
    )


def _number(req_id: str) -> int:
    _, _, n = req_id.partition("-")
    return int(n) if n.isdigit() else 0


async def superseded_by(svc: Services, rec: LeverRequest, obj: dict[str, Any]) -> LeverRequest | None:
    """The later request whose plan ``obj`` holds now, or None.

    Every lever writes its request id into the object's provenance annotation, so the object
    names the request whose change it carries. That request supersedes ``rec`` when it is a
    later one (REQ ids are handed out in order), acts on the same object, still owns it (done
    or in flight) and every field it set is there.
    """
    named = read(obj, ptr("metadata", "annotations", REQUEST_ANNOTATION))
    if not isinstance(named, str) or _number(named) <= _number(rec.id):
        return None
    later = await lever_store(svc).get(named)
    if later is None or later.state not in _HOLDS_OBJECT or later.lever not in LEVERS:
        return None
    same = (later.context, later.target, LEVERS[later.lever].kind) == (rec.context, rec.target, LEVERS[rec.lever].kind)
    changes = later.plan.get("changes") or {}
    if not same or any(read(obj, p) != v for p, v in changes.items() if not p.startswith("/status/")):
        return None
    return later


def _found_by(later: LeverRequest, values: dict[str, Any], rec: LeverRequest) -> bool:
    """Did ``later`` find ``values`` (pointer -> value) when it planned? Only the fields both set count,
    and those always include the provenance annotation."""
    shared = [p for p in rec.plan.get("changes") or {} if p in later.pre_state and not p.startswith("/status/")]
    return bool(shared) and all(later.pre_state[p] == values.get(p) for p in shared)


def _superseded(rec: LeverRequest, later: LeverRequest) -> str:
    return (
        f"superseded by {later.id} ({later.lever}, {later.state}), which has changed {rec.target} since: "
        "nothing was put back"
    )


# Each returns (state, message), or None when another process settled it first. The lever.* entry is the
# same event the executor / undo write in the normal path, tied to this settle's request id.
async def _executing(
    svc: Services, req: Request, rec: LeverRequest, held: bounds.Checked, obj: dict[str, Any]
) -> tuple[str, str] | None:
    lever, ctx = held.lever, held.ctx
    plan = Plan.from_record(rec.plan, rec.pre_state)
    present = {p: v for p, v in plan.changes.items() if read(obj, p) == v}
    rv = (obj.get("metadata") or {}).get("resourceVersion")
    later = await superseded_by(svc, rec, obj)
    if later is not None:
        # The object is the later request's: what it found when it planned says whether ours had landed.
        state = LeverState.done if _found_by(later, plan.changes, rec) else LeverState.failed
    else:
        state = LeverState.done if len(present) == len(plan.changes) else LeverState.failed
    store = lever_store(svc)
    if not await store.transition(rec.id, {LeverState.executing}, state, finished_at=svc.clock.now()):
        return None  # another process settled it
    metrics.lever_settled(rec.lever, state, verified=state is LeverState.done)  # a read-back decided it
    if state is LeverState.done:
        await lever.applied(ctx, plan)
        how = f"{plan.effect}; {NOT_REAPPLIED}" + (f"; {_superseded(rec, later)}" if later else "")
        message = messages.done(rec, True, how, rv)
    elif later is not None:
        message = messages.failed(
            rec, f"interrupted before the write landed; {_superseded(rec, later)} ({NOT_REAPPLIED})"
        )
        await lever.release(ctx, plan)
    else:
        message = messages.failed(rec, f"{await _put_back(held, rec, present, obj)} ({NOT_REAPPLIED})")
        await lever.release(ctx, plan)
    result = {
        "ok": state is LeverState.done,
        "message": message,
        "verified": state is LeverState.done,
        "resource_version": rv,
        "reconciled": True,
    }
    if later is not None:
        result["superseded_by"] = later.id
    await store.transition(rec.id, {state}, state, result=result)
    await svc.audit.append(
        LeverEvent.settled(state).action,
        actor=SYSTEM_ACTOR,
        incident=rec.incident,
        request_id=req.id,
        detail={**rec.ids(), **result},
    )
    await _tell(svc, rec, message)
    await hooks.grant_used(svc, rec, rec.grant_id)
    settled = await store.get(rec.id)
    if (reconciled := svc.registry.provided(hooks.RECONCILED)) is not None:
        await reconciled(svc, settled or rec)
    return state, message


async def _put_back(held: bounds.Checked, rec: LeverRequest, present: dict[str, Any], obj: dict[str, Any]) -> str:
    """A plan cut between calls: restore what landed (guarded), so nothing is left half-applied."""
    ops = held.lever.undo_ops(present, rec.pre_state, obj)
    if not ops:
        return "interrupted before the write landed; nothing changed"
    try:
        bounds.within(held, ops)  # the record's own fields only (they were checked before anything was read)
    except bounds.Tampered as t:
        return (
            f"interrupted part-way; what had landed was not put back ({bounds.why(rec, t)}): check {rec.target} by hand"
        )
    try:
        await held.ctx.kube.call("PATCH", held.path, JSON_PATCH, ops)
    except KubeError as e:
        return f"interrupted part-way, and putting back what had landed failed ({e}): check {rec.target} by hand"
    return "interrupted part-way; what had landed was put back, nothing changed"


async def _undoing(
    svc: Services, req: Request, rec: LeverRequest, held: bounds.Checked, obj: dict[str, Any]
) -> tuple[str, str] | None:
    lever, ctx = held.lever, held.ctx
    store = lever_store(svc)
    rv = (obj.get("metadata") or {}).get("resourceVersion")
    later = await superseded_by(svc, rec, obj)
    # Superseded: the later request found our pre-state when it planned, or it did not.
    restored = _found_by(later, rec.pre_state, rec) if later is not None else not not_restored(rec, obj)
    by = person(rec.undone_by) if rec.undone_by else "someone"
    if not restored:
        if not await store.transition(rec.id, {LeverState.undoing}, LeverState.done, undone_by=None, undone_at=None):
            return None
        if later is None:
            message = (
                f"{rec.label}: the undo by {by} was interrupted before the restore landed; "
                f"nothing changed, {rec.id} is still applied. Run `/incident undo {rec.id}` again if needed."
            )
        else:
            message = (
                f"{rec.label}: the undo by {by} was interrupted before the restore landed, and "
                f"{rec.id} is {_superseded(rec, later)}. {rec.id} stays applied beneath {later.id}."
            )
        action, state = LeverEvent.undo_failed, LeverState.done
        metrics.lever_settled(rec.lever, LeverEvent.undo_failed)
    else:
        undo = {"resource_version": rv, "verified": True, "reconciled": True}
        if later is not None:
            undo["superseded_by"] = later.id
        if not await store.transition(
            rec.id, {LeverState.undoing}, LeverState.undone, result={**rec.result, "undo": undo}
        ):
            return None
        metrics.lever_settled(rec.lever, LeverState.undone)
        await lever.undone(ctx)
        how = f"{_superseded(rec, later)}" if later else "restore verified by a read-back"
        message = f"{rec.label}: undone by {by} ({how}, rv {rv})."
        action, state = LeverEvent.undo, LeverState.undone
    await svc.audit.append(
        action.action,
        actor=SYSTEM_ACTOR,
        incident=rec.incident,
        request_id=req.id,
        detail={
            **rec.ids(),
            "undone_by": rec.undone_by,
            "resource_version": rv,
            "reconciled": True,
            "message": message,
            **({"superseded_by": later.id} if later else {}),
        },
    )
    await _tell(svc, rec, message)
    return state, message


async def _tell(svc: Services, rec: LeverRequest, message: str) -> None:
    if await announce(svc, rec.incident, message):
        log.warning("lever_reconcile_not_posted", request=rec.id)
