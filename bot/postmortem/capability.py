"""The postmortem capability: everything it adds to the app, in one place."""

from __future__ import annotations

from bot.core.grammar import Spec
from bot.core.registry import Registry
from bot.core.request import Outcome, Request
from bot.core.services import Services
from bot.core.timeline import CommandDetail
from bot.incidents.models import Incident
from bot.postmortem import actions, facts, post, timeline
from bot.postmortem.commands import ACTION_USAGE, CAUSE_USAGE, PM_USAGE, Action, ActionRemind, Cause, Postmortem


async def _postmortem(svc: Services, req: Request, cmd: Postmortem, inc: Incident) -> Outcome:
    """`postmortem` alone posts the document; with a fact (impact, rework, impact-figures, sev) records it."""
    if cmd.sub == "post":
        return await post.postmortem(svc, req, cmd, inc)
    return await facts.record(svc, req, cmd, inc)


def register(reg: Registry) -> None:
    """postmortem, cause, action: the document, its facts, and action items with their reminders."""
    reg.command(
        Postmortem,
        _postmortem,
        spec=Spec(PM_USAGE, rest="text", rest_raw=True),
        summary="post the postmortem (a Markdown file); `impact`, `rework`, `impact-figures`, `sev` record its facts",
        rule=facts.postmortem_rule,
    )
    reg.command(
        Cause,
        facts.cause,
        spec=Spec(CAUSE_USAGE, rest="text", rest_raw=True),
        summary="the postmortem's detection gap (why not sooner), trigger and root cause, kept apart",
    )
    reg.command(
        Action,
        actions.action,
        spec=Spec(ACTION_USAGE, rest="text", flags={"owner": "one", "due": "one", "verify": "one", "kind": "one"}),
        summary="an action item AI-n: owner, due date, verification; reminded until `action done AI-n <evidence>`",
        rule=actions.close_rule,
    )

    # The owner's reminders: a job per item, run as a system request; repaired at start.
    reg.command(ActionRemind, actions.remind, summary="remind an action item's owner (scheduler)")
    reg.job(actions.REMIND, actions.remind_job)
    reg.on_start(actions.repair)

    # How they read on the timeline.
    reg.timeline(Postmortem, timeline.PostmortemSet, timeline.postmortem_set)
    reg.timeline(Cause, timeline.CauseSet, timeline.cause_set)
    reg.timeline(Action, timeline.ActionSet, timeline.action_set)
    reg.timeline(ActionRemind, CommandDetail, timeline.no_event)
