"""Incident lifecycle handlers: declare, sev, assess, status, mitigated, resolved, help."""
from __future__ import annotations

from typing import TYPE_CHECKING, Awaitable, Callable

from bot.clock import hhmm, ymd
from bot.core.authz import after_resolve
from bot.core.grammar import Spec
from bot.core.registry import route, typed_commands
from bot.core.request import Outcome, Refusal, Request
from bot.incidents import cadence, severity
from bot.incidents.commands import Assess, Declare, Help, Mitigated, Resolved, Sev, Status
from bot.incidents.models import Incident, RoleHolder
from bot.incidents.models import Status as St
from bot.incidents.roles import ROLE_TITLES, ROLES
from bot.incidents.views import announce, joined, refresh_card
from bot.slack import cards
from bot.slack.gateway import SlackFailure, slugify

if TYPE_CHECKING:
    from bot.core.services import Services

# Other capabilities add lines to `status` (open levers, pending approvals).
StatusLine = Callable[["Services", Incident], Awaitable[str | None]]
STATUS_LINES: list[StatusLine] = []


def channel_name(number: int, title: str, now: float) -> str:
    head = f"inc-{ymd(now)}-{number}-"
    return head + slugify(title, 80 - len(head))


async def open_incident(
    svc: "Services", *, title: str, sev: int, actor: str, cells: list[str], products: list[str],
    regions: list[str], detected_at: float | None = None,
) -> tuple[Incident, list[str]]:
    """Create channel, record, card. Used by `declare` and by alert intake.

    Returns the incident and what went wrong after it was saved (Slack refusing the
    invite, card or pin): the incident stands, and the caller says what is missing.
    """
    now = svc.clock.now()
    number = await svc.incidents.next_number()
    name = channel_name(number, title, now)
    try:
        channel_id, name = await svc.slack.create_channel(name)
    except SlackFailure as f:
        raise Refusal(f"Slack refused to create the channel ({f.error}); no incident was opened.") from None
    inc = Incident(
        id=f"INC-{number}", number=number, title=title, sev=sev, channel_id=channel_id, channel_name=name,
        declared_by=actor, declared_at=now, detected_at=min(detected_at or now, now), cells=cells,
        products=products, regions=regions, next_update_due=cadence.first_due(now, sev, svc.policy.cadence),
        roles={"ic": RoleHolder(user=actor, since=now, by=actor)} if actor != "system" else {},
    )
    await svc.incidents.create(inc)
    await svc.incidents.bind_channel(inc.id, channel_id)
    problems: list[str] = []
    if actor != "system":
        try:
            await svc.slack.invite(channel_id, [actor])
        except SlackFailure as f:
            problems.append(f"you could not be invited to the channel ({f.error})")
    try:
        ts = await svc.slack.post(channel_id, cards.card_text(inc), cards.incident_card(inc))
    except SlackFailure as f:
        return inc, [*problems, f"the card could not be posted ({f.error})"]
    await svc.incidents.set_field(inc.id, card_ts=ts)
    try:
        await svc.slack.pin(channel_id, ts)
    except SlackFailure as f:
        problems.append(f"the card could not be pinned ({f.error})")
    return inc.model_copy(update={"card_ts": ts}), problems


@route(
    Declare,
    spec=Spec(
        "/incident declare <title> [--sev N] [--cell C]… [--product P] [--region R]",
        rest="title",
        flags={"sev": "one", "cell": "many", "product": "one", "region": "one"},
    ),
    summary="open an incident with its own channel; you become IC",
    needs_incident=False,
)
async def declare(svc: "Services", req: Request, _inc: Incident | None) -> Outcome:
    cmd: Declare = req.command  # type: ignore[assignment]
    inc, problems = await open_incident(
        svc, title=cmd.title, sev=cmd.sev, actor=req.actor, cells=cmd.cell,
        products=[cmd.product] if cmd.product else [], regions=[cmd.region] if cmd.region else [],
    )
    due = f" First update due {hhmm(inc.next_update_due)} UTC." if inc.next_update_due else ""
    audit = {"incident_channel": inc.channel_id, "sev": inc.sev, "cells": inc.cells}
    if problems:
        # Still ok: the incident exists, so its timers and audit belong to it like any other.
        return Outcome(message=f"{inc.id} (SEV{inc.sev}) is open in <#{inc.channel_id}> and you are IC, but "
                       f"{'; '.join(problems)}; run `/incident status` there.{due}",
                       incident_id=inc.id, audit={**audit, "problems": problems})
    return Outcome(message=f"Declared {inc.id} (SEV{inc.sev}) in <#{inc.channel_id}>; you are IC.{due}",
                   incident_id=inc.id, audit=audit)


async def raise_to(svc: "Services", inc: Incident, sev: int, reason: str, actor: str) -> Outcome:
    """The only way SEV changes while an incident is open: up, atomically."""
    change = await svc.incidents.raise_sev(inc.id, sev, reason, svc.policy.cadence, svc.clock.now())
    if change.code == 1:
        warn = await announce(svc, inc.id, f":rotating_light: {inc.id} raised SEV{change.before} → SEV{sev} by <@{actor}>: {reason}")
        warn2 = await refresh_card(svc, inc.id)
        return Outcome(message=joined(f"{inc.id} is now SEV{sev} (was SEV{change.before}).", warn, warn2),
                       audit={"sev_from": change.before, "sev_to": sev})
    if change.code == 0:
        return Outcome(message=f"{inc.id} is already SEV{sev}.", audit={"sev_from": sev, "sev_to": sev})
    if change.code == -1:
        raise Refusal(
            f"SEV only goes up while {inc.id} is open: it is SEV{change.before}, you asked for SEV{sev}. "
            f"Downgrades happen in the postmortem.", sev_current=change.before, sev_asked=sev,
        )
    raise Refusal(f"{inc.id} is resolved; SEV changes now go in the postmortem.")


@route(Sev, spec=Spec("/incident sev <1-4> <reason>", positional=("sev",), rest="reason"),
       summary="raise severity (never lowers while open)")
async def sev(svc: "Services", req: Request, inc: Incident | None) -> Outcome:
    cmd: Sev = req.command  # type: ignore[assignment]
    assert inc is not None
    return await raise_to(svc, inc, cmd.sev, cmd.reason, req.actor)


@route(
    Assess,
    spec=Spec("/incident assess [--users-burn X] [--gpus N] [--quality] [--security]",
              flags={"users-burn": "one", "gpus": "one", "quality": "bool", "security": "bool"}),
    summary="SEV from the four-axis matrix; raises, never lowers",
)
async def assess(svc: "Services", req: Request, inc: Incident | None) -> Outcome:
    cmd: Assess = req.command  # type: ignore[assignment]
    assert inc is not None
    a = severity.assess(
        severity.Impact(users_burn=cmd.users_burn, gpus=cmd.gpus, quality=cmd.quality, security=cmd.security),
        svc.policy.severity,
    )
    why = severity.explain(a)
    audit = {"assessed_sev": a.sev, "deciding_axis": a.deciding_axis, "axes": a.reasons}
    if severity.is_raise(inc.sev, a.sev):
        out = await raise_to(svc, inc, a.sev, f"assessed {why}", req.actor)
        out.message = f"Matrix says {why}. " + out.message
        out.audit.update(audit)
        return out
    return Outcome(
        message=f"Matrix says {why}. {inc.id} stays SEV{inc.sev}: SEV only goes up while open.",
        audit=audit,
    )


def _roles_line(inc: Incident) -> str:
    return ", ".join(f"{r} <@{inc.roles[r].user}>" for r in ROLES if r in inc.roles) or "none"


@route(Status, spec=Spec("/incident status"), summary="SEV, roles, levers, next update")
async def status(svc: "Services", req: Request, inc: Incident | None) -> Outcome:
    assert inc is not None
    due = f"{hhmm(inc.next_update_due)} UTC" if inc.next_update_due else "none"
    parts = [
        f"*{inc.id}* SEV{inc.sev} · {inc.status.value} · {inc.title}",
        f"Roles: {_roles_line(inc)}",
        f"Cells: {', '.join(inc.cells) or 'none'} · next update due: {due}",
    ]
    waiting = [h for h in await svc.incidents.handoffs(inc.id) if h.status == "pending"]
    if waiting:
        parts.append("Pending handoffs: " + ", ".join(
            f"{h.id} {ROLE_TITLES[h.role]} → <@{h.to_user}> (since {hhmm(h.requested_at)} UTC)" for h in waiting))
    for line in STATUS_LINES:
        extra = await line(svc, inc)
        if extra:
            parts.append(extra)
    return Outcome(message="\n".join(parts))


async def _set_status(svc: "Services", req: Request, inc: Incident, new: St) -> Outcome:
    change = await svc.incidents.set_status(inc, new, svc.clock.now())
    if change.code == 0:
        return Outcome(message=f"{inc.id} is already {new.value}.")
    if change.code == -1:
        raise Refusal(f"{inc.id} is {change.before}; it cannot go back to {new.value}.")
    tail = (f" Still answered here: {after_resolve(svc)}." if new is St.resolved
            else " Reminders stop; keep watching.")
    warn = await announce(svc, inc.id, f":large_green_circle: {inc.id} marked *{new.value}* by <@{req.actor}>.{tail}")
    warn2 = await refresh_card(svc, inc.id)
    return Outcome(message=joined(f"{inc.id} is now {new.value}.", warn, warn2),
                   audit={"status_from": change.before, "status_to": new.value})


@route(Mitigated, spec=Spec("/incident mitigated"), summary="impact stopped; reminders stop")
async def mitigated(svc: "Services", req: Request, inc: Incident | None) -> Outcome:
    assert inc is not None
    return await _set_status(svc, req, inc, St.mitigated)


@route(Resolved, spec=Spec("/incident resolved"), summary="close the incident")
async def resolved(svc: "Services", req: Request, inc: Incident | None) -> Outcome:
    assert inc is not None
    return await _set_status(svc, req, inc, St.resolved)


@route(Help, spec=Spec("/incident help [command]", positional=(), rest="topic"), summary="this list",
       needs_incident=False)
async def help_(svc: "Services", req: Request, inc: Incident | None) -> Outcome:
    cmd: Help = req.command  # type: ignore[assignment]
    routes = typed_commands()
    if inc is not None and not inc.is_open:
        # Only what a resolved incident's channel still answers (commands.yaml when_resolved).
        rules = svc.policy.commands.commands
        routes = [r for r in routes if r.name in rules and rules[r.name].when_resolved]
    if cmd.topic:
        hit = [r for r in routes if r.name == cmd.topic.strip().lower()]
        if hit and hit[0].spec:
            return Outcome(message=f"`{hit[0].spec.usage}`: {hit[0].summary}")
    roles = ", ".join(f"`{r}` ({t})" for r, t in ROLE_TITLES.items())
    body = "\n".join(f"`{r.spec.usage}`: {r.summary}" for r in routes if r.spec)
    head = f"*{inc.id} is resolved; these still work here*" if inc is not None and not inc.is_open \
        else "*Firebreak commands*"
    return Outcome(message=f"{head}\n{body}\nRoles: {roles}")
