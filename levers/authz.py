"""Who may pull (or undo) a lever: the lever's roles from levers.yaml, or a break-glass grant.

Runs as the route's `rule`, inside the one policy check, before anything is
sent to the API server.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from levers import hooks
from levers.base import LEVERS
from levers.commands import PullLever, Undo
from levers.requests import get_request
from levers.scope import scope_name

if TYPE_CHECKING:
    from bot.core.request import Request
    from bot.core.services import Services
    from bot.incidents.models import Incident
    from levers.requests import LeverRequest


async def access(svc: "Services", inc: "Incident | None", user: str, lever: str, cell: str) -> tuple[bool, str | None]:
    """(allowed, grant id): allowed by a role the user holds here, else by an active grant."""
    roles = set(svc.policy.levers.levers[lever].roles)
    if inc is not None and roles & set(inc.holders(user)):
        return True, None
    for provider in hooks.GRANT_PROVIDERS:
        grant = await provider(svc, inc, user, lever, cell)
        if grant:
            return True, grant
    return False, None


def _denial(svc: "Services", inc: "Incident | None", user: str, lever: str, verb: str) -> str:
    roles = svc.policy.levers.levers[lever].roles
    held = ", ".join(inc.holders(user)) if inc is not None else ""
    where = f" in {inc.id}" if inc is not None else ""
    return (f"Only {' or '.join(roles)} can {verb} `{lever}`{where} (your roles: {held or 'none'}). "
            f"Ask the IC for the role, or request break-glass: `/incident breakglass {lever} <minutes> <reason>`.")


async def still_allowed(svc: "Services", rec: "LeverRequest") -> str | None:
    """Just before a stored request is applied: None if the requester may still pull it, else why not.

    Approval can take minutes; a role handed on or a grant revoked or run out
    in the meantime must stop the pull. A grant counts only if it is the same
    grant the request was made under, still active now.
    """
    inc = await svc.incidents.get(rec.incident)
    roles = svc.policy.levers.levers[rec.lever].roles
    if inc is not None and set(roles) & set(inc.holders(rec.requester)):
        return None
    if rec.grant_id:
        for check in hooks.GRANT_ACTIVE:
            if await check(svc, inc, rec.grant_id, rec.requester, rec.lever, rec.cell):
                return None
        return (f"break-glass grant {rec.grant_id} ended (revoked or expired) before it ran, and "
                f"<@{rec.requester}> does not hold {' or '.join(roles)}")
    return f"requester <@{rec.requester}> no longer holds {' or '.join(roles)} in {rec.incident}"


async def lever_rule(svc: "Services", req: "Request", inc: "Incident | None") -> str | None:
    cmd = req.command
    assert isinstance(cmd, PullLever)
    cell = scope_name(svc.policy.levers, LEVERS[cmd.lever], cmd.cell, inc)
    ok, _ = await access(svc, inc, req.actor, cmd.lever, cell)
    return None if ok else _denial(svc, inc, req.actor, cmd.lever, "pull")


async def undo_rule(svc: "Services", req: "Request", inc: "Incident | None") -> str | None:
    cmd = req.command
    assert isinstance(cmd, Undo)
    rec = await get_request(svc.redis, cmd.request)
    if rec is None or inc is None or rec.incident != inc.id:
        return None  # the handler says what is wrong with the id; there is nothing to authorize
    ok, _ = await access(svc, inc, req.actor, rec.lever, rec.cell)
    return None if ok else _denial(svc, inc, req.actor, rec.lever, "undo")
