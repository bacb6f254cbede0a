"""The comms timers' job handlers: each runs its work as a system request (bot.core.dispatch.run_system).

Reminder and escalation jobs are keyed by the incident id; a nudge by "INC-n/HO-m".
"""

from __future__ import annotations

from bot.comms.commands import Escalate, HandoffNudge, Remind
from bot.core.dispatch import run_system
from bot.core.services import Services
from bot.scheduler import Job


async def remind(svc: Services, job: Job) -> None:
    await run_system(svc, Remind(due=job.payload["due"], late=job.late), job.key)


async def escalate(svc: Services, job: Job) -> None:
    await run_system(
        svc, Escalate(due=job.payload["due"], late=job.late, round=int(job.payload.get("round", 1))), job.key
    )


async def nudge(svc: Services, job: Job) -> None:
    inc_id, _, hid = job.key.partition("/")
    await run_system(svc, HandoffNudge(handoff=hid), inc_id)
