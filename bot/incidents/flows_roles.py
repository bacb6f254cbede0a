"""Role assignment and explicit handoffs (effective only on the receiver's Accept)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from bot.core.grammar import Spec
from bot.core.registry import route
from bot.core.request import Outcome, Refusal, Request
from bot.incidents.commands import Accept, Handoff, Role
from bot.incidents.models import HandoffRecord, Incident
from bot.incidents.roles import ROLE_TITLES
from bot.incidents.views import announce, joined, refresh_card
from bot.slack import cards
from bot.slack.gateway import SlackFailure

if TYPE_CHECKING:
    from bot.core.services import Services


@route(Role, spec=Spec("/incident role <role> <@user>", positional=("role", "user")),
       summary="assign a role (ic ops comms scribe model capacity security)")
async def role(svc: "Services", req: Request, inc: Incident | None) -> Outcome:
    cmd: Role = req.command  # type: ignore[assignment]
    assert inc is not None
    if cmd.role == "ic":
        raise Refusal("The IC changes by explicit handoff: `/incident handoff ic @user`.")
    changed = await svc.incidents.set_role(inc.id, cmd.role, cmd.user, req.actor, svc.clock.now())
    seat = ROLE_TITLES[cmd.role]
    if not changed:
        return Outcome(message=f"<@{cmd.user}> is already {seat} in {inc.id}.")
    # Not being able to invite does not undo the role: the reply says so, the announce says who holds it.
    invite_error = await _invite(svc, inc, cmd.user)
    prev = inc.holder(cmd.role)
    warn = await announce(svc, inc.id, f":busts_in_silhouette: <@{cmd.user}> is now {ROLE_TITLES[cmd.role]} (set by <@{req.actor}>).")
    warn2 = await refresh_card(svc, inc.id)
    audit = {"role": cmd.role, "user": cmd.user, "previous": prev}
    if invite_error:
        audit["invite_failed"] = invite_error
    replacing = f" (replacing <@{prev}>)" if prev and prev != cmd.user else ""
    return Outcome(message=joined(f"<@{cmd.user}> is now {seat} in {inc.id}{replacing}.",
                                  _invite_warning(cmd.user, invite_error), warn, warn2), audit=audit)


async def _invite(svc: "Services", inc: Incident, user: str) -> str | None:
    """Invite ``user`` to the incident channel; the Slack error when that failed."""
    if not inc.channel_id:
        return None
    try:
        await svc.slack.invite(inc.channel_id, [user])
    except SlackFailure as f:
        return f.error
    return None


def _invite_warning(user: str, error: str | None) -> str | None:
    return f"(could not invite <@{user}> to the channel: {error}; ask them to join)" if error else None


async def _show_accepted(svc: "Services", inc: Incident, h: HandoffRecord, accepted_at: float) -> str | None:
    """Replace the handoff message's Accept button with who accepted; a warning when Slack refused."""
    if not inc.channel_id or not h.message_ts:
        return None
    try:
        await svc.slack.update(inc.channel_id, h.message_ts, cards.handoff_text(h, inc, h.requested_at),
                               cards.handoff_done_blocks(h, inc, accepted_at))
    except SlackFailure as f:
        # The role changed either way; the old message keeps its button until someone presses it.
        return f"(the handoff message could not be marked accepted: {f.error})"
    return None


@route(
    Handoff,
    spec=Spec('/incident handoff <role> <@user> [--threads "a; b"]', positional=("role", "user"),
              flags={"threads": "many"}),
    summary="hand a role over; effective when they press Accept",
)
async def handoff(svc: "Services", req: Request, inc: Incident | None) -> Outcome:
    cmd: Handoff = req.command  # type: ignore[assignment]
    assert inc is not None
    if inc.holder(cmd.role) == cmd.user:
        raise Refusal(f"<@{cmd.user}> is already {ROLE_TITLES[cmd.role]} in {inc.id}.")
    dup = await svc.incidents.pending_handoff(inc.id, cmd.role, cmd.user)
    if dup is not None:
        raise Refusal(f"{dup.id} is already waiting for <@{cmd.user}> to accept {ROLE_TITLES[cmd.role]}; "
                      "they press Accept on it.", handoff=dup.id)
    if not inc.channel_id:
        raise Refusal(f"{inc.id} has no channel to post the handoff in.")
    now = svc.clock.now()
    h = await svc.incidents.create_handoff(HandoffRecord(
        id="HO-0", incident=inc.id, role=cmd.role, from_user=inc.holder(cmd.role), to_user=cmd.user,
        requested_by=req.actor, requested_at=now, threads=cmd.threads,
    ))
    invite_error = await _invite(svc, inc, cmd.user)
    invited = (f"(could not invite <@{cmd.user}> to the channel: {invite_error}; ask them to join to press Accept)"
               if invite_error else None)
    try:
        ts = await svc.slack.post(inc.channel_id, cards.handoff_text(h, inc, now), cards.handoff_blocks(h, inc, now))
    except SlackFailure as f:
        # Never shown, so never acceptable: closed now rather than left pending (nudges, stray Accepts).
        await svc.incidents.fail_handoff(inc.id, h.id)
        holder = f"<@{h.from_user}>" if h.from_user else "nobody"
        return Outcome(result="error", message=f"Handoff {h.id} could not be posted in the channel ({f.error}); "
                       f"{cmd.role} stays with {holder}. Try the handoff again.",
                       audit={"handoff": h.id, "handoff_status": "failed", "slack_error": f.error})
    status = await svc.incidents.set_handoff_message(inc.id, h.id, ts)
    if status == "accepted":
        # Accepted while its message was being posted (the Accept found no message to edit yet).
        done = await svc.incidents.get_handoff(inc.id, h.id)
        if done is not None:
            done_warn = await _show_accepted(svc, inc, done, done.accepted_at or now)
            return Outcome(message=joined(f"Handoff {h.id} posted and already accepted: <@{cmd.user}> is now "
                                          f"{ROLE_TITLES[cmd.role]}.", invited, done_warn),
                           audit={"handoff": h.id, "role": cmd.role, "from": h.from_user, "to": cmd.user,
                                  "threads": cmd.threads, "handoff_status": status})
    return Outcome(
        message=joined(f"Handoff {h.id} posted: {ROLE_TITLES[cmd.role]} to <@{cmd.user}>. "
                       "It takes effect when they press Accept.", invited),
        audit={"handoff": h.id, "role": cmd.role, "from": h.from_user, "to": cmd.user, "threads": cmd.threads},
    )


_CLOSED = {"accepted": "was already accepted", "superseded": "is out of date: the role changed hands",
           "failed": "was never posted; ask for a new handoff"}


@route(Accept, spec=None, summary="accept a handoff (button)")
async def accept(svc: "Services", req: Request, inc: Incident | None) -> Outcome:
    cmd: Accept = req.command  # type: ignore[assignment]
    assert inc is not None
    now = svc.clock.now()
    change = await svc.incidents.accept_handoff(inc.id, cmd.handoff, req.actor, now)
    h = await svc.incidents.get_handoff(inc.id, cmd.handoff)
    if change.code == -3 or h is None:
        raise Refusal(f"Handoff {cmd.handoff} does not exist in {inc.id}.")
    if change.code == -1:
        raise Refusal(f"Only <@{h.to_user}> can accept this handoff.", handoff=h.id)
    if change.code == -2:
        why = _CLOSED.get(change.detail, f"is {change.detail}")
        raise Refusal(f"Handoff {h.id} {why}.", handoff=h.id)
    if change.code == -5:
        now_holder = f"<@{change.detail}> holds it now" if change.detail else "nobody holds it now"
        raise Refusal(f"Handoff {h.id} is out of date: {ROLE_TITLES[h.role]} changed hands after it was posted "
                      f"({now_holder}). Nothing changed; ask them for a new handoff.",
                      handoff=h.id, superseded=True, holder=change.detail or None)
    if change.code == -4:
        raise Refusal(f"{inc.id} is resolved; handoffs no longer apply.", handoff=h.id)
    shown = await _show_accepted(svc, inc, h, now)
    warn = await announce(svc, inc.id, f":handshake: <@{h.to_user}> accepted {ROLE_TITLES[h.role]} from "
                          + (f"<@{h.from_user}>." if h.from_user else "nobody (the seat was empty)."))
    warn2 = await refresh_card(svc, inc.id)
    return Outcome(message=joined(f"You are now {ROLE_TITLES[h.role]} in {inc.id}.", shown, warn, warn2),
                   audit={"handoff": h.id, "role": h.role, "from": h.from_user, "to": h.to_user})
