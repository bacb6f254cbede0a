"""The typed request an alarm becomes. Never typed by people: the watch job (watch.py) sends it,
as the scheduler, with the cell's open incident, or none when it opens one."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from bot.core.request import Command

MAX_NODES = 50  # named in the request; the post shows fewer


class RemediationAlarm(Command):
    """One burst's alarm for one cell: posted once in the incident, one audit entry."""

    name: ClassVar[str] = "remediation_alarm"
    cell: str = Field(max_length=64)
    burst: int = Field(ge=1)
    reason: Literal["rate", "repeat"]
    count: int = Field(ge=0)  # nodes that went out in the last hour
    gpu_nodes: int | None = Field(default=None, ge=0)  # the cell's GPU nodes when it alarmed
    more: int = Field(default=0, ge=0)  # of those, how many after the burst first alarmed (a retried post)
    nodes: tuple[str, ...] = Field(default=(), max_length=MAX_NODES)  # the hour's, oldest first
    repeats: tuple[str, ...] = Field(default=(), max_length=MAX_NODES)  # out again within the window
    who: str = Field(default="", max_length=2000)  # outofservice.by_who of those still out
    number: int | None = Field(default=None, exclude=True)  # an incident number taken before a crash
