"""When an incident is resolved, no lever of it runs any more, and what still holds is said.

Requests that have not run (pending approval, or approved and not yet claimed by the executor)
are cancelled, each with the lever store's compare-and-set (so a timer, a click or a late
executor that comes after finds `cancelled` and does nothing), audited (`lever.cancelled`) and
told to their requesters in the incident channel. The levers that ran and were not undone are
listed with their `undo` commands: `undo` still works in a resolved incident (commands.yaml
when_resolved), for the lever's roles.
"""

from __future__ import annotations

from bot import logs
from bot.chat import person
from bot.core.posts import announce
from bot.core.request import IncidentView
from bot.core.services import Services
from levers.catalogue import LEVERS
from levers.requests import LeverEvent, LeverRequest, LeverState
from levers.store import lever_store

log = logs.get(__name__)

NOT_RUN = {LeverState.pending_approval, LeverState.approved}


async def cancel(svc: Services, rec: LeverRequest, actor: str, why: str) -> bool:
    """Move ``rec`` from not-run to cancelled (atomic); audited. False: it had moved on already."""
    moved = await lever_store(svc).transition(
        rec.id,
        NOT_RUN,
        LeverState.cancelled,
        finished_at=svc.clock.now(),
        result={"ok": False, "message": f"{rec.label}: cancelled, never run: {why}"},
    )
    if moved:
        await svc.audit.append(
            LeverEvent.cancelled.action,
            actor=actor,
            incident=rec.incident,
            detail={**rec.ids(), "was": rec.state, "requester": rec.requester, "why": why},
        )
    return moved


def _in_force(rec: LeverRequest) -> str:
    lever = LEVERS[rec.lever]
    if not lever.reversible:
        return f"• {rec.label}: no undo ({lever.not_reversible_why})"
    return f"• {rec.label}: `/incident undo {rec.id}`"


async def on_resolve(svc: Services, inc: IncidentView, actor: str) -> list[str]:
    """ON_RESOLVE: cancel what has not run, then list what is still in force."""
    recs = await lever_store(svc).for_incident(inc.id)
    cancelled = [r for r in recs if r.state in NOT_RUN and await cancel(svc, r, actor, f"{inc.id} was resolved")]
    lines: list[str] = []
    if cancelled:
        told = "; ".join(f"{r.label} (asked by {person(r.requester)})" for r in cancelled)
        warn = await announce(
            svc, inc.id, f":no_entry_sign: {inc.id} is resolved, so these never run: {told}. Nothing was changed."
        )
        if warn:
            log.warning("lever_cancel_not_posted", requests=[r.id for r in cancelled])
        lines.append(f"Cancelled (never ran): {', '.join(r.id for r in cancelled)}.")
    after = await lever_store(svc).for_incident(inc.id)
    held = [r for r in after if r.state is LeverState.done and not r.dry_run]
    moving = [r for r in after if r.state in (LeverState.executing, LeverState.undoing)]
    if held:
        lines.append("Still in force:\n" + "\n".join(_in_force(r) for r in held))
    if moving:
        lines.append("Still settling (Firebreak posts the outcome): " + ", ".join(r.label for r in moving) + ".")
    return lines
