"""Timers: the approval window, the grant reaper, and the restart sweep.

Each fires as a system request through the one dispatcher, so it is audited
once; the scheduler delivers each job once across replicas and after restarts.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from bot.approvals import notify
from bot.approvals.commands import ApprovalSettle, BreakglassEnd
from bot.core import dispatch
from bot.core.request import Command, Request, Source
from bot.scheduler import Job, job_handler, on_start
from levers import requests

if TYPE_CHECKING:
    from bot.core.services import Services


async def _system(svc: "Services", cmd: Command, inc: str) -> None:
    await dispatch.execute(svc, Request(command=cmd, actor="system", source=Source.scheduler, incident_id=inc))


@job_handler("approval.expire")
async def _window_over(svc: "Services", job: Job) -> None:
    await _system(svc, ApprovalSettle(request=job.key), job.payload["incident"])


@job_handler("breakglass.reap")
async def _grant_over(svc: "Services", job: Job) -> None:
    await _system(svc, BreakglassEnd(grant=job.key), job.payload["incident"])


@on_start
async def resume_approved(svc: "Services") -> None:
    """A process died between approval and execution: finish those requests now."""
    for inc in await svc.incidents.open_ids():
        for b in await notify.ballots(svc).all(inc):
            if b.kind != "lever" or b.state != "approved":
                continue
            rec = await requests.get_request(svc.redis, b.id)
            if rec is not None and rec.state in ("pending_approval", "approved"):
                await _system(svc, ApprovalSettle(request=b.id), inc)
