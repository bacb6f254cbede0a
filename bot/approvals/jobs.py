"""Timers: the approval window, the grant reaper, and the restart sweep.

Each fires as a system request through the one dispatcher (bot.core.dispatch.run_system),
so it is audited once; the scheduler delivers each job once across replicas and
after restarts, and delivers it again when the request ended in an error.
"""

from __future__ import annotations

from bot import metrics
from bot.approvals.commands import ApprovalSettle, BreakglassEnd
from bot.approvals.store import ballots
from bot.core.dispatch import JobRetry, run_system
from bot.core.services import Services
from bot.incidents.store import repo
from bot.scheduler import Job
from levers.requests import LeverState
from levers.store import lever_store

# Job kinds: stored with every scheduled job, so they never change.
EXPIRE_JOB = "approval.expire"  # a ballot's window is over: settle it
REAP_JOB = "breakglass.reap"  # a grant's time is up: end it


async def window_over(svc: Services, job: Job) -> None:
    await run_system(svc, ApprovalSettle(request=job.key), job.payload["incident"])


async def grant_over(svc: Services, job: Job) -> None:
    await run_system(svc, BreakglassEnd(grant=job.key), job.payload["incident"])


async def count_pending(svc: Services) -> None:
    """At scrape: a ballot awaiting votes is one whose window timer is still pending (scheduled with
    the ballot, cancelled when it is decided, fired when the window ends), so one ZLEXCOUNT of those
    timers counts the open approvals, lever requests and break-glass grants alike."""
    metrics.APPROVALS_PENDING.set(float("nan"))  # until read: a read that fails shows, not a stale count
    metrics.APPROVALS_PENDING.set(await svc.scheduler.pending_count(EXPIRE_JOB))


async def resume_approved(svc: Services) -> None:
    """A process died between approval and execution: finish those requests now."""
    for inc in await repo(svc).open_ids():
        for b in await ballots(svc).all(inc):
            if b.kind != "lever" or b.state != "approved":
                continue
            rec = await lever_store(svc).get(b.id)
            if rec is not None and rec.state in (LeverState.pending_approval, LeverState.approved):
                try:
                    await run_system(svc, ApprovalSettle(request=b.id), inc)
                except JobRetry:  # leave it to the settle timer, which the scheduler retries
                    await svc.scheduler.schedule(EXPIRE_JOB, b.id, svc.clock.now(), {"incident": inc})
