"""The approvals capability: everything it adds to the app, in one place."""

from __future__ import annotations

from bot.approvals import grants, jobs, lever_side, on_resolve, undo_side, votes
from bot.approvals.commands import ApprovalSettle, Approve, Breakglass, BreakglassEnd, Deny
from bot.core.grammar import Spec
from bot.core.hooks import SCRAPE, STATUS_LINE
from bot.core.registry import Registry
from bot.core.timeline import CommandDetail
from levers import hooks


def register(reg: Registry) -> None:
    # Commands, in the order `/incident help` has always listed them.
    reg.command(
        Breakglass,
        grants.breakglass,
        spec=Spec(
            "/incident breakglass <scope> <minutes> <reason>  ·  /incident breakglass revoke <BG-n>",
            positional=("scope",),
            rest="reason",
        ),
        summary="time-boxed access to levers (a lever, a,b, cell:<cell> or fleet); IC (+ security at SEV1) approve",
    )
    reg.command(BreakglassEnd, grants.breakglass_end, summary="a grant's time ran out (reaper)")
    reg.command(Approve, votes.approve, summary="approve a lever request or a break-glass grant (button)")
    reg.command(Deny, votes.deny, summary="deny a lever request or a break-glass grant (button)")
    reg.command(ApprovalSettle, votes.settle, summary="expire an undecided request, or finish an approved one (timer)")

    # Timers, and the sweep for approved requests a dead process never ran.
    reg.job(jobs.EXPIRE_JOB, jobs.window_over)
    reg.job(jobs.REAP_JOB, jobs.grant_over)
    reg.on_start(jobs.resume_approved)

    # Resolving an incident closes its ballots and ends its grants.
    reg.observe(on_resolve.close_on_resolve)

    # What the levers ask of approvals, and the status line.
    reg.provide(hooks.APPROVAL_REQUESTED, lever_side.request_approval)
    reg.provide(hooks.RECONCILED, lever_side.reconciled)
    reg.provide(hooks.UNDO_APPROVAL_REQUESTED, undo_side.request_undo_approval)
    reg.provide(hooks.GRANT_PROVIDER, lever_side.grant_for)
    reg.provide(hooks.GRANT_ACTIVE, lever_side.grant_active)
    reg.provide(hooks.GRANT_USED, lever_side.grant_used)
    reg.add(STATUS_LINE, grants.status_line)
    reg.provide(SCRAPE, jobs.count_pending)  # firebreak_approvals_pending

    # On the timeline the timers' own settling is no event; the rest read by their name.
    reg.timeline(ApprovalSettle, CommandDetail, _no_event)
    reg.timeline(BreakglassEnd, CommandDetail, _no_event)


def _no_event(_: CommandDetail, __: str) -> None:
    return None
