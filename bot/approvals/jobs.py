"""Timers: the approval window, the grant reaper, and the restart sweep.

Each fires as a system request through the one dispatcher (comms.system.run_system),
so it is audited once; the scheduler delivers each job once across replicas and
after restarts, and delivers it again when the request ended in an error.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from bot.approvals import notify
from bot.approvals.commands import ApprovalSettle, BreakglassEnd
from bot.comms.system import JobRetry, run_system
from bot.scheduler import Job, job_handler, on_start
from levers import requests

if TYPE_CHECKING:
    from bot.core.services import Services


@job_handler("approval.expire")
async def _window_over(svc: "Services", job: Job) -> None:
    await run_system(svc, ApprovalSettle(request=job.key), job.payload["incident"])


@job_handler("breakglass.reap")
async def _grant_over(svc: "Services", job: Job) -> None:
    await run_system(svc, BreakglassEnd(grant=job.key), job.payload["incident"])


@on_start
async def resume_approved(svc: "Services") -> None:
    """A process died between approval and execution: finish those requests now."""
    for inc in await svc.incidents.open_ids():
        for b in await notify.ballots(svc).all(inc):
            if b.kind != "lever" or b.state != "approved":
                continue
            rec = await requests.get_request(svc.redis, b.id)
            if rec is not None and rec.state in ("pending_approval", "approved"):
                try:
                    await run_system(svc, ApprovalSettle(request=b.id), inc)
                except JobRetry:  # leave it to the settle timer, which the scheduler retries
                    await svc.scheduler.schedule("approval.expire", b.id, svc.clock.now(), {"incident": inc})
