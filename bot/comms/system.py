"""Running a timer's work as a system request through the one executor."""
from __future__ import annotations

from typing import TYPE_CHECKING

from bot.core import dispatch
from bot.core.request import Command, Request, Source

if TYPE_CHECKING:
    from bot.core.services import Services


class JobRetry(Exception):
    """Leave the job leased so the scheduler delivers it again (e.g. Slack was unreachable)."""


async def run_system(svc: "Services", cmd: Command, inc_id: str) -> None:
    out = await dispatch.execute(svc, Request(command=cmd, actor="system", source=Source.scheduler,
                                              incident_id=inc_id))
    if out.result == "error":
        raise JobRetry(out.message)


async def claim_once(svc: "Services", key: str) -> bool:
    """A dedupe mark for a side effect: True for the first caller only."""
    return bool(await svc.redis.set(key, "1", nx=True, ex=14 * 86400))
