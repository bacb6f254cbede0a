"""The timer that settles a lever request left in flight (`executing` / `undoing`) by a process
that died or lost its store after the Kubernetes write.

It is set before the request's claim into flight, so no process can be in flight without one,
and it fires at the claim + policy `stuck_after_seconds` (until then a live process may still own
the request). The job is levers/reconcile.py's: it settles from a read-back, never re-applying.
A request that leaves flight normally cancels it; one that is no longer in flight when it fires
is left alone.
"""

from __future__ import annotations

from bot.core.services import Services
from levers.requests import LeverRequest, LeverState

JOB = "lever.reconcile"


def stuck_at(svc: Services, rec: LeverRequest) -> float:
    """When an in-flight request counts as abandoned (before that, a live replica may own it)."""
    since = (rec.started_at if rec.state is LeverState.executing else rec.undone_at) or rec.created_at
    return since + svc.policy.levers.stuck_after_seconds


async def arm(svc: Services, req_id: str, incident: str, since: float) -> float:
    """Settle ``req_id`` at ``since`` + stuck_after_seconds unless it leaves flight first; returns that time."""
    due = since + svc.policy.levers.stuck_after_seconds
    await svc.scheduler.schedule(JOB, req_id, due, {"incident": incident})
    return due


async def disarm(svc: Services, req_id: str) -> None:
    """The request left flight normally: its timer has nothing to do."""
    await svc.scheduler.cancel(JOB, req_id)
