"""How the comms commands read on the postmortem's timeline (registered in capability.py)."""

from __future__ import annotations

from bot.core.timeline import TEXT_CHARS, CommandDetail, Detail, md, who


class UpdateArgs(Detail):
    text: str = ""


class Updated(CommandDetail):
    args: UpdateArgs = UpdateArgs()


def updated(d: Updated, by: str) -> str:
    return f"Update by {by}: {md(d.args.text, TEXT_CHARS)}"


class Nudged(CommandDetail):
    to: str | None = None  # whom the cadence reminded or escalated to


def reminded(d: Nudged, _: str) -> str:
    return f"Update reminder to {who(d.to)}" if d.to else "Update reminder"


def escalated(d: Nudged, _: str) -> str:
    return f"Overdue update escalated to {who(d.to)}" if d.to else "Overdue update escalated"


def secret_flagged(_: CommandDetail, __: str) -> str:
    return "A pasted secret was flagged in the channel"


def no_event(_: CommandDetail, __: str) -> None:
    """The cadence's own bookkeeping (opening the form, a snooze, a handoff nudge)."""
    return None
