"""A lever's verdict read again when the controller's own window ends, once, in whichever replica runs
the job (levers that hand the outcome to a controller with a deadline longer than a pull may wait).

rollout-abort: Argo has the rollout's progress deadline (spec.progressDeadlineSeconds, 600 s when unset)
to settle an abort; a pull waits only rollout_verify_seconds, so a verdict still open then is read again
when that deadline ends. GitOps: a change on an object Flux manages is read again after the Flux
object's spec.interval, when that is longer than a pull may wait (levers/gitops.py).

The scheduler hands a due job to one replica; a claim mark in Redis (held a little less than the
scheduler's lease, then kept) makes a second delivery, after a claimer died, post nothing twice
unless the first died between its post and its mark. Nothing is re-applied: it reads and reports.
"""

from __future__ import annotations

from bot import logs
from bot.clusters import KubeError, UnknownCell
from bot.core.posts import announce
from bot.core.services import Services
from bot.core.timeline import code
from bot.ids import SYSTEM_ACTOR
from bot.scheduler import Job
from bot.store import Keys
from levers import gitops
from levers.base import Ctx, LeverRefusal, Verified
from levers.plan import Plan
from levers.requests import LeverState
from levers.store import lever_store
from levers.timeline import LeverEntry

log = logs.get(__name__)

JOB = "lever.recheck"  # stored with every scheduled job: never renamed
ACTION = "lever.rechecked"
KEEP_S = 7 * 24 * 3600  # how long a done mark is kept (longer than any window)
CLAIM_OF_LEASE = 0.9


def _mark(req_id: str) -> str:
    return Keys.levers(f"rechecked:{req_id}")


async def at(ctx: Ctx, due: float, what: str, why: str) -> None:
    """Read ``ctx``'s request again at ``due``: ``what`` is "rollout" or "gitops"; ``why`` names the window."""
    await ctx.svc.scheduler.schedule(JOB, ctx.req_id, due, {"incident": ctx.incident, "what": what, "why": why})


async def due(svc: Services, job: Job) -> None:
    """The JOB timer: read the object back and post the verdict once."""
    # Here, not at the top: the catalogue's levers schedule this job (`at`), so they import this module.
    from levers.catalogue import LEVERS
    from levers.catalogue.rollout import RolloutAbort
    from levers.context import for_record

    store = lever_store(svc)
    rec = await store.get(job.key)
    if rec is None or rec.state is not LeverState.done:
        return  # undone (or failed) since: the undo said what happened, nothing to add
    mark = _mark(rec.id)
    if not await svc.redis.set(mark, "claimed", nx=True, px=int(svc.scheduler.lease * CLAIM_OF_LEASE * 1000)):
        return  # another delivery has it, or posted it
    why = str(job.payload.get("why") or "its window")
    try:
        lever = LEVERS[rec.lever]
        ctx = await for_record(svc, rec)
        plan = Plan.from_record(rec.plan, rec.pre_state)
        obj = await ctx.kube.get(lever.object_path(ctx, plan))
        if isinstance(lever, RolloutAbort) and job.payload.get("what") == "rollout":
            verdict = await lever.settled(ctx, obj, why)
        else:
            verdict = await gitops.reverted(ctx, plan, obj)
    except (KubeError, UnknownCell, LeverRefusal) as e:
        if job.attempt < svc.scheduler.max_attempts:
            await svc.redis.delete(mark)  # the scheduler delivers it again shortly
            raise
        verdict = Verified(False, f"Firebreak could not read {rec.target} back ({e}): look at it yourself")
    except BaseException:
        await svc.redis.delete(mark)
        raise
    message = f"{rec.label}: checked again when {why} ended: " + (
        f"verified ({verdict.text})." if verdict.ok else f"still NOT verified: {verdict.text}."
    )
    result = {**rec.result, "verified": verdict.ok, "ok": verdict.ok, "verify": verdict.text, "rechecked": True}
    if not await store.transition(rec.id, {LeverState.done}, LeverState.done, result=result):
        await svc.redis.delete(mark)
        return  # undone meanwhile
    detail = {**rec.ids(), "verified": verdict.ok, "message": message}
    await svc.audit.append(ACTION, actor=SYSTEM_ACTOR, incident=rec.incident, detail=detail)
    if warn := await announce(svc, rec.incident, message):
        log.warning("lever_recheck_not_posted", request=rec.id, warning=warn)
    await svc.redis.set(mark, "done", ex=KEEP_S)


def line(d: LeverEntry, _: str) -> str:
    """How the re-read reads on the postmortem's timeline."""
    cell = f" ({code(d.cell)})" if d.cell else ""
    what = "verified" if d.verified else "still not verified"
    return f"Lever {code(d.request)} `{code(d.lever)}` {code(d.target)}{cell} checked again: {what}"
