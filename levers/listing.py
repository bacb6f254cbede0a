"""`/incident levers` (what the caller may pull here) and the open-levers line of `/incident status`."""
from __future__ import annotations

from typing import TYPE_CHECKING

from bot.core.grammar import Spec
from bot.core.registry import route
from bot.core.request import Outcome, Request
from bot.incidents.flows import STATUS_LINES
from levers import authz, messages
from levers.base import LEVERS
from levers.commands import ListLevers
from levers.requests import for_incident
from levers.scope import scope_name

if TYPE_CHECKING:
    from bot.core.services import Services
    from bot.incidents.models import Incident


def _approval_note(svc: "Services", name: str) -> str:
    pol = svc.policy.levers
    rule = pol.levers[name]
    if rule.needs_approval:
        return f" · needs approval ({rule.why or 'policy'})"
    if LEVERS[name].fleet_default:
        return f" · without --cell it acts on the fleet context `{pol.fleet_context}`: needs approval"
    return ""


@route(ListLevers, spec=Spec("/incident levers"), summary="the levers you may pull here, and which need approval")
async def list_levers(svc: "Services", req: Request, inc: "Incident | None") -> Outcome:
    assert inc is not None
    pol = svc.policy.levers
    mine, others = [], []
    for name, rule in pol.levers.items():
        lever = LEVERS[name]
        ok, grant = await authz.access(svc, inc, req.actor, name, scope_name(pol, lever, None, inc))
        if ok:
            via = f" · via grant {grant}" if grant else ""
            mine.append(f"• `{name}` {lever.kind.kind}: {lever.summary}{_approval_note(svc, name)}{via}")
        else:
            others.append(f"{name} ({'/'.join(rule.roles)})")
    held = ", ".join(inc.holders(req.actor)) or "none"
    usage = "`/incident lever <name> <target> [--cell C] [key=value]… [--dry-run]`"
    if not mine:
        return Outcome(message=f"You can't pull any lever in {inc.id} yet (your roles: {held}). Levers by role: "
                       f"{', '.join(others)}. Ask the IC for a role, or `/incident breakglass`.")
    rest = f"\nOthers need a role you don't hold: {', '.join(others)}." if others else ""
    return Outcome(message=f"*Levers you can pull in {inc.id}* (your roles: {held}):\n" + "\n".join(mine)
                   + f"\nUsage: {usage}. Undo: `/incident undo REQ-n`.{rest}")


async def open_levers(svc: "Services", inc: "Incident") -> str | None:
    return messages.status_line(await for_incident(svc.redis, inc.id))


STATUS_LINES.append(open_levers)
