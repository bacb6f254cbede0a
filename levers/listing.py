"""`/incident levers` (what the caller may pull here) and the open-levers line of `/incident status`."""

from __future__ import annotations

from bot.core.request import IncidentView, Outcome, Request
from bot.core.services import Services
from levers import authz, messages
from levers.base import rule_of
from levers.catalogue import LEVERS
from levers.commands import ListLevers
from levers.scope import scope_name
from levers.store import lever_store


def _approval_note(svc: Services, name: str) -> str:
    pol = svc.policy.levers
    rule = rule_of(pol, LEVERS[name])
    if rule.needs_approval:
        return f" · needs approval ({rule.why or 'policy'})"
    if LEVERS[name].fleet_default:
        return f" · without --cell it acts on the fleet context `{pol.fleet_context}`: needs approval"
    return ""


async def list_levers(svc: Services, req: Request, cmd: ListLevers, inc: IncidentView) -> Outcome:
    pol = svc.policy.levers
    mine, others = [], []
    # The policy's order first (as it has always listed them), then levers it leaves to their default.
    for name in [*pol.levers, *(n for n in LEVERS if n not in pol.levers)]:
        lever = LEVERS[name]
        rule = rule_of(pol, lever)
        got = await authz.access(svc, inc, req.actor, name, await scope_name(svc, lever, None, inc))
        if got.ok:
            via = f" · via grant {got.grant}" if got.grant else ""
            mine.append(f"• `{name}` {lever.kind.kind}: {lever.summary}{_approval_note(svc, name)}{via}")
        elif got.ineligible is not None:
            others.append(f"{name} ({'/'.join(rule.roles)}: {got.ineligible.why})")
        else:
            others.append(f"{name} ({'/'.join(rule.roles)})")
    held = ", ".join(inc.holders(req.actor)) or "none"
    usage = "`/incident lever <name> <target> [--cell C] [key=value]… [--dry-run]`"
    if not mine:
        return Outcome(
            message=f"You can't pull any lever in {inc.id} yet (your roles: {held}). Levers by role: "
            f"{', '.join(others)}. Ask the IC for a role, or `/incident breakglass`."
        )
    rest = f"\nOthers need a role you don't hold: {', '.join(others)}." if others else ""
    return Outcome(
        message=f"*Levers you can pull in {inc.id}* (your roles: {held}):\n"
        + "\n".join(mine)
        + f"\nUsage: {usage}. Undo: `/incident undo REQ-n`.{rest}"
    )


async def open_levers(svc: Services, inc: IncidentView) -> str | None:
    """The status line (bot.core.hooks.STATUS_LINE): this incident's levers still in play."""
    return messages.status_line(await lever_store(svc).for_incident(inc.id))
