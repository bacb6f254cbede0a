"""How the `remediation_alarm` requests read on the postmortem's timeline (registered in capability.py)."""

from __future__ import annotations

from pydantic import Field

from bot.core.timeline import CommandDetail, who


class AlarmSeen(CommandDetail):
    opened: bool = False
    cell: str = ""
    reason: str = ""
    count: int = 0
    gpu_nodes: int | None = None
    repeats: list[str] = Field(default_factory=list)
    offered: list[str] = Field(default_factory=list)
    ic: str | None = None
    sev: int | None = None


def alarm_seen(d: AlarmSeen, by: str) -> str | None:
    if d.result != "ok":
        return None  # not posted: the retry that posts it is the event
    what = (
        f"{d.count}{f' of {d.gpu_nodes}' if d.gpu_nodes else ''} GPU nodes out for remediation in {d.cell} "
        "within an hour"
        if d.reason == "rate"
        else f"{', '.join(d.repeats[:3])} out again in {d.cell}"
    )
    pause = f"; offered remediation-pause on {', '.join(d.offered)}" if d.offered else ""
    opened = f" (opened this incident at SEV{d.sev}, IC {who(d.ic)})" if d.opened else ""
    return f"Remediation alarm: {what}{pause}{opened}"
