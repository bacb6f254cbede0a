"""Recording the postmortem's facts: `postmortem impact|rework|impact-figures|sev` and `cause`.

Each fact is overwritten whole, atomically (store.FACTS_SET), and the audit entry of the
command keeps what it replaced. Bad input is refused before anything is written.
"""

from __future__ import annotations

from bot.chat import person, quote
from bot.core.posts import announce, joined
from bot.core.request import Outcome, Refusal, Request
from bot.core.services import Services
from bot.incidents.models import Incident
from bot.incidents.posts import refresh_card
from bot.incidents.store import SevLowered, repo
from bot.policy.roles import seated
from bot.postmortem import rules
from bot.postmortem.commands import Cause, Postmortem
from bot.postmortem.store import Cause as CauseFact
from bot.postmortem.store import FactsSet, ImpactOverride, store


async def _set(svc: Services, inc: Incident, fields: dict[str, str]) -> dict[str, str | None]:
    code, before = await store(svc).set_facts(inc.id, fields)
    if code is FactsSet.MISSING:
        raise Refusal(f"{inc.id} no longer exists; nothing was recorded.")
    return before


async def record(svc: Services, req: Request, cmd: Postmortem, inc: Incident) -> Outcome:
    """`postmortem impact|rework|impact-figures|sev` (capability.py routes `postmortem` alone to the document)."""
    if cmd.sub == "impact":
        return await impact(svc, req, cmd, inc)
    if cmd.sub == "rework":
        return await rework(svc, req, cmd, inc)
    if cmd.sub == "impact_figures":
        return await figures(svc, req, cmd, inc)
    if cmd.sub == "sev":
        return await sev_down(svc, req, cmd, inc)
    raise Refusal(f"`postmortem {cmd.sub}` is not a fact Firebreak records.")


async def impact(svc: Services, req: Request, cmd: Postmortem, inc: Incident) -> Outcome:
    assert cmd.at is not None and cmd.evidence  # the command's validator fills both
    now = svc.clock.now()
    why = rules.impact_refusal(cmd.at, now, inc.declared_at, inc.mitigated_at, inc.resolved_at)
    if why:
        raise Refusal(f"{why} Nothing was recorded.", impact_at=cmd.at)
    fact = ImpactOverride(at=cmd.at, evidence=cmd.evidence, by=req.actor, set_at=now)
    before = await _set(svc, inc, {"impact": fact.model_dump_json()})
    note = rules.impact_note(cmd.at, inc.detected_at)
    was = ImpactOverride.model_validate_json(b).at if (b := before["impact"]) else None
    msg = f"Impact start for {inc.id}'s postmortem: {rules.utc(cmd.at)} ({quote(cmd.evidence)})."
    if was is not None:
        msg += f" It replaces {rules.utc(was)}."
    return Outcome(
        message=" ".join(p for p in (msg, note) if p),
        audit={"impact_at": cmd.at, "previous": before["impact"], "after_detection": note is not None},
    )


async def rework(svc: Services, req: Request, cmd: Postmortem, inc: Incident) -> Outcome:
    assert cmd.hours is not None
    before = await _set(svc, inc, {"rework_hours": repr(cmd.hours)})
    prev = before["rework_hours"]
    tail = f" (was {float(prev):g} h)" if prev else ""
    return Outcome(
        message=f"Rework for {inc.id}: {cmd.hours:g} h of progress thrown away{tail}; "
        "the postmortem counts it into GPU-hours lost.",
        audit={"rework_hours": cmd.hours, "previous": float(prev) if prev else None},
    )


async def figures(svc: Services, req: Request, cmd: Postmortem, inc: Incident) -> Outcome:
    fields: dict[str, str] = {}
    if cmd.requests is not None:
        fields["requests_failed"] = str(cmd.requests)
    if cmd.tokens is not None:
        fields["tokens_refunded"] = str(cmd.tokens)
    before = await _set(svc, inc, fields)
    parts = []
    if cmd.requests is not None:
        parts.append(f"requests failed {cmd.requests:,}")
    if cmd.tokens is not None:
        parts.append(f"tokens refunded {cmd.tokens:,}")
    return Outcome(
        message=f"Impact figures for {inc.id}: {', '.join(parts)}.",
        audit={
            "requests_failed": cmd.requests,
            "tokens_refunded": cmd.tokens,
            "previous": {k: int(v) for k, v in before.items() if v},
        },
    )


async def sev_down(svc: Services, req: Request, cmd: Postmortem, inc: Incident) -> Outcome:
    """The only way a SEV goes down: after resolve, downwards, with a reason (bot/incidents' Lua)."""
    assert cmd.sev is not None and cmd.reason
    if inc.is_open:
        raise Refusal(
            f"SEV never goes down during an incident: {inc.id} is {inc.status.value}. "
            f"Once it is resolved, `/incident postmortem sev {cmd.sev} <reason>` lowers it.",
            sev_current=inc.sev,
            sev_asked=cmd.sev,
        )
    change = await repo(svc).lower_sev(inc.id, cmd.sev, cmd.reason, req.actor, svc.clock.now())
    if change.code is SevLowered.SAME:
        raise Refusal(f"{inc.id} is already SEV{cmd.sev}; nothing changed.")
    if change.code is SevLowered.NOT_LOWER:
        raise Refusal(
            f"`postmortem sev` only lowers: {inc.id} is SEV{change.before} and SEV{cmd.sev} is worse. "
            "A SEV is raised while the incident is open (`/incident sev`); give a number above "
            f"{change.before}, or leave it.",
            sev_current=change.before,
            sev_asked=cmd.sev,
        )
    if change.code is SevLowered.OPEN:
        raise Refusal(f"SEV never goes down during an incident: {inc.id} is open again; nothing changed.")
    if change.code is SevLowered.MISSING:
        raise Refusal(f"{inc.id} no longer exists; nothing changed.")
    warn = await announce(
        svc,
        inc.id,
        f":arrow_down: {inc.id} lowered SEV{change.before} → SEV{cmd.sev} in the postmortem by {person(req.actor)}: "
        f"{quote(cmd.reason)}",
    )
    warn2 = await refresh_card(svc, inc.id)
    return Outcome(
        message=joined(f"{inc.id} is now SEV{cmd.sev} (was SEV{change.before}).", warn, warn2),
        audit={"sev_from": change.before, "sev_to": cmd.sev, "reason": cmd.reason},
    )


async def cause(svc: Services, req: Request, cmd: Cause, inc: Incident) -> Outcome:
    """`cause detection|trigger|root <text>`: sets one cause, replacing the one before."""
    fact = CauseFact(text=cmd.text, by=req.actor, at=svc.clock.now(), root_class=cmd.root_class)
    before = await _set(svc, inc, {f"cause:{cmd.which}": fact.model_dump_json()})
    prev = CauseFact.model_validate_json(b) if (b := before[f"cause:{cmd.which}"]) else None
    label = {"detection": "Detection gap (why not sooner)", "trigger": "Trigger", "root": "Root cause"}[cmd.which]
    msg = f"{label} for {inc.id}: {quote(cmd.text)}"
    if prev is not None:
        msg += f"\nIt replaces: {quote(prev.text)} ({person(prev.by)})"
    missing = [c for c in ("trigger", "root") if c != cmd.which and not await _has(svc, inc.id, c)]
    if cmd.which in ("trigger", "root") and missing:
        msg += f"\nStill missing: `cause {missing[0]}`; trigger and root cause are kept apart."
    return Outcome(
        message=msg,
        audit={
            "cause": cmd.which,
            "root_class": cmd.root_class,
            "previous": prev.text if prev else None,
            "previous_by": prev.by if prev else None,
        },
    )


async def _has(svc: Services, inc_id: str, which: str) -> bool:
    return f"cause:{which}" in await store(svc).raw_facts(inc_id)


# The facts only the IC and the scribe record (docs/commands.md); the document itself is anyone's to read.
FACT_SEATS = ("ic", "scribe")


async def postmortem_rule(svc: Services, req: Request, inc: object) -> str | None:
    """`postmortem sev` is the IC's (the SEV is theirs to set); the other facts are the IC's and
    the scribe's; `postmortem` alone (the document) is anyone's."""
    cmd = req.command
    if not isinstance(cmd, Postmortem) or cmd.sub == "post" or not isinstance(inc, Incident):
        return None
    if cmd.sub != "sev":
        if set(inc.holders(req.actor)) & set(FACT_SEATS):
            return None
        what = cmd.sub.replace("_", "-")
        return (
            f"Only the IC or the Scribe can record `postmortem {what}` in {inc.id} "
            f"({seated(inc, list(FACT_SEATS))}); nothing changed."
        )
    ic = inc.holder("ic")
    if ic == req.actor:
        return None
    who = f" ({person(ic)})" if ic else ""
    return f"Only the IC can lower {inc.id}'s SEV{who}; nothing changed."
