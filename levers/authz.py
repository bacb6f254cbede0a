"""Who may pull (or undo) a lever: the lever's roles from levers.yaml, or a break-glass grant.

Runs as the route's `rule`, inside the one policy check, before anything is
sent to the API server. The rule's answer (which grant, if any, allowed it)
is returned as a value the executor hands to the handler (Registry.command_decided),
so access is decided once and no other request's check can stand in for it.
"""

from __future__ import annotations

from typing import NamedTuple

from bot.chat import person
from bot.core.eligibility import Verdict, eligibility
from bot.core.registry import Allowed
from bot.core.request import IncidentView, Request
from bot.core.services import Services
from bot.policy.roles import seated, self_seat_hint, title
from levers import hooks
from levers.base import rule_of
from levers.catalogue import LEVERS
from levers.commands import PullLever, Undo
from levers.requests import LeverRequest
from levers.scope import FLEET, scope_name
from levers.store import lever_store

# What levers and approvals can't do while Slack can't say who is eligible.
POWER_BLOCKED = "levers and approvals are refused"


class Access(NamedTuple):
    ok: bool
    grant: str | None = None  # the break-glass grant that allowed it (None: the user's own role)
    ineligible: Verdict | None = None  # holds a lever role, but is not eligible for it now


class Cleared(NamedTuple):
    """The rule's yes to one pull or undo, handed to its handler."""

    grant: str | None  # the break-glass grant it is allowed under (None: the user's own role)


async def _decide(
    svc: Services, req: Request, inc: IncidentView | None, lever: str, cell: str, verb: str
) -> str | Allowed[Cleared]:
    got = await access(svc, inc, req.actor, lever, cell)
    done = "pulled" if verb == "pull" else "undone"
    if got.ineligible is not None:
        return f"Not {done}: {got.ineligible.refusal(POWER_BLOCKED)}"
    if not got.ok:
        # A refusal says what did not happen: nothing reached the API server.
        return f"Not {done}, nothing changed: " + _denial(svc, inc, req.actor, lever, verb)
    return Allowed(Cleared(got.grant))


async def _eligible_role(svc: Services, inc: IncidentView, user: str, roles: list[str], cell: str) -> Verdict | None:
    """None when ``user`` is eligible (roles.yaml) for one of the lever ``roles`` they hold here,
    else the verdict to refuse with (not eligible, or Slack didn't say); checked at every pull.
    ``oncall`` counts only in the lever's own ``cell``, never on the fleet context (docs/security-model.md)."""
    held = [r for r in roles if r in inc.holders(user)]
    verdicts = await eligibility(svc).check_seats(user, held, None if cell == FLEET else [cell])
    if any(v.ok for v in verdicts.values()):
        return None
    # Slack's silence first: the fix is to wait, not to join a group the user may be in already.
    return next((v for v in verdicts.values() if v.unanswered), None) or verdicts[held[0]]


async def access(svc: Services, inc: IncidentView | None, user: str, lever: str, cell: str) -> Access:
    """Allowed by a role the user holds here and is eligible for, else by an active grant."""
    roles = rule_of(svc.policy.levers, LEVERS[lever]).roles
    ineligible = None
    if inc is not None and set(roles) & set(inc.holders(user)):
        ineligible = await _eligible_role(svc, inc, user, roles, cell)
        if ineligible is None:
            return Access(True)
    provider = svc.registry.provided(hooks.GRANT_PROVIDER)
    if provider is not None and (grant := await provider(svc, inc, user, lever, cell)):
        return Access(True, grant)
    return Access(False, ineligible=ineligible)


def _denial(svc: Services, inc: IncidentView | None, user: str, lever: str, verb: str) -> str:
    roles = rule_of(svc.policy.levers, LEVERS[lever]).roles
    held = ", ".join(title(r) for r in inc.holders(user)) if inc is not None else ""
    where = f" in {inc.id}" if inc is not None else ""
    who = " or ".join(f"the {title(r)}" for r in roles)
    # The IC may seat themselves (docs/security-model.md); anyone else asks the IC or requests break-glass.
    hint = self_seat_hint(inc, user, roles[0]) if inc is not None else None
    nxt = hint or (
        f"Ask the IC ({seated(inc, ['ic']).split(': ', 1)[1]}) for the role, or request break-glass: "
        if inc is not None
        else "Ask the IC for the role, or request break-glass: "
    )
    if not hint:
        nxt += f"`/incident breakglass {lever} <minutes> <reason>`."
    return f"Only {who} can {verb} `{lever}`{where} (your roles: {held or 'none'}). {nxt}"


async def still_allowed(svc: Services, rec: LeverRequest) -> str | None:
    """Just before a stored request is applied: None if the requester may still pull it, else why not.

    Approval can take minutes; a role handed on or a grant revoked or run out
    in the meantime must stop the pull. A grant counts only if it is the same
    grant the request was made under, still active now.
    """
    inc = await svc.incidents.get(rec.incident)
    roles = rule_of(svc.policy.levers, LEVERS[rec.lever]).roles
    ineligible = None
    if inc is not None and set(roles) & set(inc.holders(rec.requester)):
        ineligible = await _eligible_role(svc, inc, rec.requester, roles, rec.cell)
        if ineligible is None:
            return None
    if rec.grant_id:
        active = svc.registry.provided(hooks.GRANT_ACTIVE)
        if active is not None and await active(svc, inc, rec.grant_id, rec.requester, rec.lever, rec.cell):
            return None
        return (
            f"break-glass grant {rec.grant_id} ended (revoked or expired) before it ran, and "
            f"{person(rec.requester)} does not hold {' or '.join(roles)}"
        )
    if ineligible is not None:
        return ineligible.why + (f"; {POWER_BLOCKED} until it answers" if ineligible.unanswered else "")
    return f"requester {person(rec.requester)} no longer holds {' or '.join(roles)} in {rec.incident}"


# The route rules get the request as the core has it (the command not yet narrowed to the route's model).


async def lever_rule(svc: Services, req: Request, inc: IncidentView | None) -> str | Allowed[Cleared]:
    cmd = req.command
    if not isinstance(cmd, PullLever):
        raise TypeError(f"lever rule got {type(cmd).__name__}")
    return await _decide(svc, req, inc, cmd.lever, await scope_name(svc, LEVERS[cmd.lever], cmd.cell, inc), "pull")


async def undo_rule(svc: Services, req: Request, inc: IncidentView | None) -> str | Allowed[Cleared | None]:
    cmd = req.command
    if not isinstance(cmd, Undo):
        raise TypeError(f"undo rule got {type(cmd).__name__}")
    rec = await lever_store(svc).get(cmd.request)
    if rec is None or inc is None or rec.incident != inc.id:
        return Allowed(None)  # the handler says what is wrong with the id; nothing was cleared
    return await _decide(svc, req, inc, rec.lever, rec.cell, "undo")
