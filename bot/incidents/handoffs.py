"""Role assignment and explicit handoffs (effective only on the receiver's Accept)."""

from __future__ import annotations

from bot.chat import ChatError, person
from bot.core.eligibility import eligibility
from bot.core.request import IncidentView, Outcome, Refusal, Request
from bot.core.services import Services
from bot.incidents import views
from bot.incidents.commands import Accept, Handoff, Role
from bot.incidents.models import HandoffRecord, Incident
from bot.incidents.posts import announce, joined, refresh_card
from bot.incidents.store import HandoffAccepted, SeatTaken, repo
from bot.policy.roles import ROLE_TITLES, seated


async def role_rule(svc: Services, req: Request, inc: IncidentView | None) -> str | None:
    """`role` is the IC's, except `role ic <@self>`: anyone IC-eligible may take an empty IC seat
    (an incident an alert opened with nobody on call) or one held by someone not IC-eligible (a
    squatter: docs/security-model.md); the handler checks both. policies/commands.yaml lets `receiver` (the
    person the command names) through to this rule, which refuses everyone else."""
    cmd = req.command
    if inc is None or req.source.is_system or inc.holder("ic") == req.actor:
        return None
    if isinstance(cmd, Role) and cmd.role == "ic" and cmd.user == req.actor:
        return None
    if inc.holder("ic") is None:
        return (
            f"Only the IC can run `role` in {inc.id}, and its IC seat is empty: "
            f"take it yourself with `/incident role ic {person(req.actor)}`."
        )
    return f"Only the IC can run `role` in {inc.id} ({seated(inc, ['ic'])})."


# What a seat with power can't be given while Slack can't say who is eligible.
SEATING_BLOCKED = "seats with power can't be given"


def seat_cells(inc: Incident, seat: str) -> list[str]:
    """Where ``oncall`` counts for holding ``seat``: for the IC, the cells the incident opened with
    (an IC who widens the scope does not widen who may be IC); for the others, its cells now (their
    power is judged again in the lever's own cell at every pull and press)."""
    return inc.ic_cells if seat == "ic" else inc.cells


async def must_be_eligible(svc: Services, inc: Incident, user: str, seat: str) -> None:
    """Refuse (naming the group to join, or saying Slack didn't answer) unless ``user`` may hold ``seat``."""
    v = await eligibility(svc).check(user, seat, seat_cells(inc, seat))
    if not v.ok:
        raise Refusal(v.refusal(SEATING_BLOCKED), **v.audit())


async def role(svc: Services, req: Request, cmd: Role, inc: Incident) -> Outcome:
    if cmd.role == "ic" and inc.holder("ic") is None and cmd.user == req.actor:
        return await _take_empty_ic(svc, req, inc)
    if cmd.role == "ic" and cmd.user == req.actor and inc.holder("ic") != req.actor:
        return await _take_from_ineligible(svc, req, inc)
    if cmd.role == "ic":
        raise Refusal("The IC changes by explicit handoff: `/incident handoff ic @user`.")
    if inc.holder(cmd.role) != cmd.user:
        await must_be_eligible(svc, inc, cmd.user, cmd.role)
    changed = await repo(svc).set_role(inc.id, cmd.role, cmd.user, req.actor, svc.clock.now())
    seat = ROLE_TITLES[cmd.role]
    if not changed:
        return Outcome(message=f"{person(cmd.user)} is already {seat} in {inc.id}.")
    # Not being able to invite does not undo the role: the reply says so, the announce says who holds it.
    invite_error = await _invite(svc, inc, cmd.user)
    prev = inc.holder(cmd.role)
    warn = await announce(
        svc,
        inc.id,
        f":busts_in_silhouette: {person(cmd.user)} is now {ROLE_TITLES[cmd.role]} (set by {person(req.actor)}).",
    )
    warn2 = await refresh_card(svc, inc.id)
    audit = {"role": cmd.role, "user": cmd.user, "previous": prev}
    if invite_error:
        audit["invite_failed"] = invite_error
    replacing = f" (replacing {person(prev)})" if prev and prev != cmd.user else ""
    return Outcome(
        message=joined(
            f"{person(cmd.user)} is now {seat} in {inc.id}{replacing}.",
            _invite_warning(cmd.user, invite_error),
            warn,
            warn2,
        ),
        audit=audit,
    )


async def _take_empty_ic(svc: Services, req: Request, inc: Incident) -> Outcome:
    """Anyone IC-eligible may sit in an empty IC seat; the first to ask gets it (Lua: only while empty)."""
    await must_be_eligible(svc, inc, req.actor, "ic")
    got = await repo(svc).take_seat(inc.id, "ic", req.actor, svc.clock.now())
    if got.code is SeatTaken.HELD:
        raise Refusal(
            f"{person(got.detail)} took the IC seat of {inc.id} first; ask them for a handoff if you should have it.",
            holder=got.detail,
        )
    invite_error = await _invite(svc, inc, req.actor)
    warn = await announce(svc, inc.id, f":busts_in_silhouette: {person(req.actor)} took the empty IC seat of {inc.id}.")
    warn2 = await refresh_card(svc, inc.id)
    audit: dict[str, object] = {"role": "ic", "user": req.actor, "previous": None, "empty_seat": True}
    if invite_error:
        audit["invite_failed"] = invite_error
    return Outcome(
        message=joined(
            f"You are now Incident Commander of {inc.id}. Hand roles out with `/incident role <role> @user`.",
            _invite_warning(req.actor, invite_error),
            warn,
            warn2,
        ),
        audit=audit,
    )


async def _take_from_ineligible(svc: Services, req: Request, inc: Incident) -> Outcome:
    """Someone IC-eligible takes the IC seat from a holder who is not (anyone may declare, and the
    declarer is IC: docs/security-model.md). Both are judged on the cells the incident opened with; while Slack
    can't say whether the holder is eligible, the seat stays where it is. The swap is one Lua step
    that takes the seat only from the holder judged here."""
    holder = inc.holder("ic")
    assert holder is not None  # an empty seat is _take_empty_ic's
    await must_be_eligible(svc, inc, req.actor, "ic")
    theirs = await eligibility(svc).check(holder, "ic", inc.ic_cells)
    if theirs.ok:
        raise Refusal(
            f"{person(holder)} is IC of {inc.id} and may hold the seat: ask them for a handoff "
            f"(`/incident handoff ic {person(req.actor)}`, theirs to run); nothing changed.",
            holder=holder,
        )
    if theirs.unanswered:
        raise Refusal(theirs.refusal("the IC seat is taken from nobody"), holder=holder, **theirs.audit())
    got = await repo(svc).take_seat(inc.id, "ic", req.actor, svc.clock.now(), from_user=holder)
    if got.code is SeatTaken.HELD:
        now = f"{person(got.detail)} holds it now" if got.detail else "it is empty now"
        raise Refusal(f"The IC seat of {inc.id} changed hands meanwhile ({now}); nothing changed.", holder=got.detail)
    invite_error = await _invite(svc, inc, req.actor)
    warn = await announce(
        svc,
        inc.id,
        f":busts_in_silhouette: {person(req.actor)} took the IC seat of {inc.id} from {person(holder)}, who isn't "
        f"IC-eligible for it ({theirs.why}).",
    )
    warn2 = await refresh_card(svc, inc.id)
    audit: dict[str, object] = {
        "role": "ic",
        "user": req.actor,
        "previous": holder,
        "took_from_ineligible": True,
        "previous_eligibility": theirs.why,
    }
    if invite_error:
        audit["invite_failed"] = invite_error
    return Outcome(
        message=joined(
            f"You are now Incident Commander of {inc.id}, taken from {person(holder)}, who isn't IC-eligible for it.",
            _invite_warning(req.actor, invite_error),
            warn,
            warn2,
        ),
        audit=audit,
    )


async def _invite(svc: Services, inc: Incident, user: str) -> str | None:
    """Invite ``user`` to the incident channel; the Slack error when that failed."""
    if not inc.channel_id:
        return None
    try:
        await svc.chat.invite(inc.channel_id, [user])
    except ChatError as f:
        return f.error
    return None


def _invite_warning(user: str, error: str | None) -> str | None:
    return f"(could not invite {person(user)} to the channel: {error}; ask them to join)" if error else None


async def _show_accepted(svc: Services, inc: Incident, h: HandoffRecord, accepted_at: float) -> str | None:
    """Replace the handoff message's Accept button with who accepted; a warning when Slack refused."""
    if not inc.channel_id or not h.message_ts:
        return None
    try:
        await svc.chat.update(
            inc.channel_id,
            h.message_ts,
            views.handoff_text(h, inc, h.requested_at),
            views.handoff_done_card(h, inc, accepted_at),
        )
    except ChatError as f:
        # The role changed either way; the old message keeps its button until someone presses it.
        return f"(the handoff message could not be marked accepted: {f.error})"
    return None


async def handoff(svc: Services, req: Request, cmd: Handoff, inc: Incident) -> Outcome:
    store = repo(svc)
    if inc.holder(cmd.role) == cmd.user:
        raise Refusal(f"{person(cmd.user)} is already {ROLE_TITLES[cmd.role]} in {inc.id}.")
    dup = await store.pending_handoff(inc.id, cmd.role, cmd.user)
    if dup is not None:
        raise Refusal(
            f"{dup.id} is already waiting for {person(cmd.user)} to accept {ROLE_TITLES[cmd.role]}; "
            "they press Accept on it.",
            handoff=dup.id,
        )
    if not inc.channel_id:
        raise Refusal(f"{inc.id} has no channel to post the handoff in.")
    await must_be_eligible(svc, inc, cmd.user, cmd.role)
    now = svc.clock.now()
    h = await store.create_handoff(
        HandoffRecord(
            id="HO-0",
            incident=inc.id,
            role=cmd.role,
            from_user=inc.holder(cmd.role),
            to_user=cmd.user,
            requested_by=req.actor,
            requested_at=now,
            threads=cmd.threads,
        )
    )
    invite_error = await _invite(svc, inc, cmd.user)
    invited = (
        f"(could not invite {person(cmd.user)} to the channel: {invite_error}; ask them to join to press Accept)"
        if invite_error
        else None
    )
    try:
        ts = await svc.chat.post(inc.channel_id, views.handoff_text(h, inc, now), views.handoff_card(h, inc, now))
    except ChatError as f:
        # Never shown, so never acceptable: closed now rather than left pending (nudges, stray Accepts).
        await store.fail_handoff(inc.id, h.id)
        holder = person(h.from_user) if h.from_user else "nobody"
        return Outcome(
            result="error",
            message=f"Handoff {h.id} could not be posted in the channel ({f.error}); "
            f"{cmd.role} stays with {holder}. Try the handoff again.",
            audit={"handoff": h.id, "handoff_status": "failed", "slack_error": f.error},
        )
    status = await store.set_handoff_message(inc.id, h.id, ts)
    if status == "accepted":
        # Accepted while its message was being posted (the Accept found no message to edit yet).
        done = await store.get_handoff(inc.id, h.id)
        if done is not None:
            done_warn = await _show_accepted(svc, inc, done, done.accepted_at or now)
            return Outcome(
                message=joined(
                    f"Handoff {h.id} posted and already accepted: {person(cmd.user)} is now {ROLE_TITLES[cmd.role]}.",
                    invited,
                    done_warn,
                ),
                audit={
                    "handoff": h.id,
                    "role": cmd.role,
                    "from": h.from_user,
                    "to": cmd.user,
                    "threads": cmd.threads,
                    "handoff_status": status,
                },
            )
    return Outcome(
        message=joined(
            f"Handoff {h.id} posted: {ROLE_TITLES[cmd.role]} to {person(cmd.user)}. "
            "It takes effect when they press Accept.",
            invited,
        ),
        audit={"handoff": h.id, "role": cmd.role, "from": h.from_user, "to": cmd.user, "threads": cmd.threads},
    )


_CLOSED = {
    "accepted": "was already accepted",
    "superseded": "is out of date: the role changed hands",
    "failed": "was never posted; ask for a new handoff",
}


async def accept(svc: Services, req: Request, cmd: Accept, inc: Incident) -> Outcome:
    store = repo(svc)
    pending = await store.get_handoff(inc.id, cmd.handoff)
    if pending is not None and pending.to_user == req.actor and pending.status == "pending":
        # Checked again at the press: the receiver may have left the seat's group since the handoff.
        await must_be_eligible(svc, inc, req.actor, pending.role)
    now = svc.clock.now()
    change = await store.accept_handoff(inc.id, cmd.handoff, req.actor, now)
    h = await store.get_handoff(inc.id, cmd.handoff)
    if change.code is HandoffAccepted.MISSING or h is None:
        raise Refusal(f"Handoff {cmd.handoff} does not exist in {inc.id}.")
    if change.code is HandoffAccepted.NOT_RECEIVER:
        raise Refusal(f"Only {person(h.to_user)} can accept this handoff.", handoff=h.id)
    if change.code is HandoffAccepted.NOT_PENDING:
        why = _CLOSED.get(change.detail, f"is {change.detail}")
        raise Refusal(f"Handoff {h.id} {why}.", handoff=h.id)
    if change.code is HandoffAccepted.SUPERSEDED:
        now_holder = f"{person(change.detail)} holds it now" if change.detail else "nobody holds it now"
        raise Refusal(
            f"Handoff {h.id} is out of date: {ROLE_TITLES[h.role]} changed hands after it was posted "
            f"({now_holder}). Nothing changed; ask them for a new handoff.",
            handoff=h.id,
            superseded=True,
            holder=change.detail or None,
        )
    if change.code is HandoffAccepted.RESOLVED:
        raise Refusal(f"{inc.id} is resolved; handoffs no longer apply.", handoff=h.id)
    shown = await _show_accepted(svc, inc, h, now)
    warn = await announce(
        svc,
        inc.id,
        f":handshake: {person(h.to_user)} accepted {ROLE_TITLES[h.role]} from "
        + (f"{person(h.from_user)}." if h.from_user else "nobody (the seat was empty)."),
    )
    warn2 = await refresh_card(svc, inc.id)
    return Outcome(
        message=joined(f"You are now {ROLE_TITLES[h.role]} in {inc.id}.", shown, warn, warn2),
        audit={"handoff": h.id, "role": h.role, "from": h.from_user, "to": h.to_user},
    )
