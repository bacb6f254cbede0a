"""How the postmortem's own commands read on its timeline (registered in capability.py)."""

from __future__ import annotations

from bot.core.timeline import TEXT_CHARS, CommandDetail, Detail, code, md
from bot.postmortem import figures as fig


class _Args(Detail):
    """A command's arguments as the audit holds them."""


class CauseArgs(_Args):
    which: str = ""


class CauseSet(CommandDetail):
    args: CauseArgs = CauseArgs()


def cause_set(d: CauseSet, by: str) -> str:
    return f"Cause ({code(d.args.which)}) recorded by {by}"


class ActionArgs(_Args):
    done: str | None = None
    evidence: str = ""
    text: str = ""


class ActionSet(CommandDetail):
    args: ActionArgs = ActionArgs()
    item: str | None = None


def action_set(d: ActionSet, by: str) -> str:
    a = d.args
    if a.done:
        return f"{code(a.done)} closed by {by}: {md(a.evidence, TEXT_CHARS)}"
    item = f"{code(d.item)} " if d.item else ""
    return f"Action item {item}added by {by}: {md(a.text, TEXT_CHARS)}"


class PostmortemArgs(_Args):
    sub: str = "post"
    sev: int | None = None
    reason: str = ""
    at: float | None = None
    hours: float | None = None


class PostmortemSet(CommandDetail):
    args: PostmortemArgs = PostmortemArgs()


def postmortem_set(d: PostmortemSet, by: str) -> str | None:
    a = d.args
    match a.sub:
        case "post":
            return None  # posting the postmortem is not part of the incident (and the same doc reads the same)
        case "sev":
            return f"SEV lowered to SEV{a.sev} in the postmortem by {by}: {md(a.reason)}"
        case "impact":
            when = fig.utc(a.at) if a.at is not None else "?"
            return f"Impact start set to {when} by {by}"
        case "rework":
            return f"Rework recorded by {by}: {a.hours:g} h" if a.hours is not None else f"Rework recorded by {by}"
        case "impact_figures":
            return f"Impact figures recorded by {by}"
        case other:
            return f"`postmortem {code(other)}` by {by}"


def no_event(_: CommandDetail, __: str) -> None:
    """An owner's reminder: bookkeeping, not an event."""
    return None
