"""Incident lifecycle handlers: declare, sev, assess, status, mitigated, resolved, help."""

from __future__ import annotations

from redis.exceptions import RedisError

from bot.chat import ChatError, channel_ref, person, quote
from bot.clock import hhmm
from bot.core.authz import after_resolve
from bot.core.eligibility import eligibility, oncall_now
from bot.core.hooks import ON_RESOLVE, STATUS_LINE
from bot.core.intent_store import store as intent_store
from bot.core.request import SYSTEM_ACTOR, IncidentView, Outcome, Refusal, Request
from bot.core.services import Services
from bot.incidents import orphans, rules, scope, views
from bot.incidents.commands import Assess, Declare, Help, Mitigated, Resolved, Sev, Status
from bot.incidents.models import Incident, RoleHolder
from bot.incidents.models import Status as St
from bot.incidents.posts import announce, joined, refresh_card
from bot.incidents.store import SevRaised, StatusSet, repo
from bot.policy.roles import ROLE_TITLES, ROLES


class NotOpened(Exception):
    """The store failed before the incident was saved; the message names what exists."""


async def open_incident(
    svc: Services,
    *,
    title: str,
    sev: int,
    ic: str | None,
    cells: list[str],
    products: list[str],
    regions: list[str],
    detected_at: float | None = None,
    request_id: str | None = None,
    number: int | None = None,
    by: str | None = None,
    alert_group: str | None = None,
    private: bool = False,
) -> tuple[Incident, list[str]]:
    """Create channel, record, card. ``ic`` sits as IC (None: the seat stays empty, and anyone
    may take it). ``by`` declared it (default: ``ic``, else Firebreak itself); ``number``: one
    already taken from the counter (bot/signals reserves it before opening). ``request_id``: the
    request whose intent records the channel. ``private``: a private channel, its people invited
    (``invitees``), and nothing of it in the stakeholder channel but the IC's own updates.

    Returns the incident and what went wrong after it was saved (the chat refusing the
    invite, card or pin): the incident stands, and the caller says what is missing. Raises
    NotOpened (its message names what exists) when the store fails before the incident is saved.
    """
    store = repo(svc)
    now = svc.clock.now()
    declarer = by or ic or SYSTEM_ACTOR
    try:
        if number is None:
            number = await store.next_number()
    except RedisError:
        raise NotOpened(
            "Firebreak can't reach its store; no channel or incident was created. Try again in a minute."
        ) from None
    try:
        channel_id, name = await svc.chat.create_channel(rules.channel_name(number, title, now), private)
    except ChatError as f:
        raise Refusal(f"Slack refused to create the channel ({f.error}); no incident was opened.") from None
    try:
        # The channel exists, the incident not yet: the request's intent says so first, so a
        # process that dies before the save leaves its repair the channel (bot/incidents/orphans.py).
        if request_id:
            await intent_store(svc).note(request_id, channel=channel_id, channel_name=name, number=number)
    except RedisError:
        # Nothing was saved, and nothing can be: the channel would be an orphan. Archive it now.
        raise NotOpened(await orphans.archive_now(svc, channel_id, f"INC-{number}", title, declarer)) from None
    inc = Incident(
        id=f"INC-{number}",
        number=number,
        title=title,
        sev=sev,
        channel_id=channel_id,
        channel_name=name,
        declared_by=declarer,
        declared_at=now,
        detected_at=min(detected_at or now, now),
        cells=cells,
        opened_cells=list(cells),
        products=products,
        regions=regions,
        next_update_due=rules.first_due(now, sev, svc.policy.cadence),
        roles={"ic": RoleHolder(user=ic, since=now, by=declarer)} if ic else {},
        alert_group=alert_group,
        private=private,
    )
    try:
        await store.create(inc)
        await store.bind_channel(inc.id, channel_id)
    except RedisError:
        # Saved or not, it can't be told now; the repair of this request decides once the store is back.
        raise NotOpened(orphans.unsure(inc.id, channel_id)) from None
    problems: list[str] = []
    people = await invitees(svc, inc)
    if people:
        try:
            await svc.chat.invite(channel_id, people)
        except ChatError as f:
            who = "you" if people == [declarer] else ", ".join("you" if p == declarer else person(p) for p in people)
            problems.append(f"{who} could not be invited to the channel ({f.error})")
    try:
        ts = await svc.chat.post(channel_id, views.card_text(inc), views.incident_card(inc))
    except ChatError as f:
        return inc, [*problems, f"the card could not be posted ({f.error})"]
    try:
        await store.set_field(inc.id, card_ts=ts)
    except RedisError:
        problems.append("Firebreak lost its store before it recorded the card, so the card will not update")
    try:
        await svc.chat.pin(channel_id, ts)
    except ChatError as f:
        problems.append(f"the card could not be pinned ({f.error})")
    return inc.model_copy(update={"card_ts": ts}), problems


async def invitees(svc: Services, inc: Incident) -> list[str]:
    """Who is invited at open: the IC; for a private incident also the security seat's holder, the
    people eligible for the security seat (its groups' members, roles.yaml) and the on-call of each
    of its cells: nobody else can find a private channel to join."""
    people = [inc.holder("ic")]
    if inc.private:
        security = sorted(await eligibility(svc).seated_people("security", inc.cells))
        people += [inc.holder("security"), *security, *(oncall_now(svc).ic_for(c) for c in inc.cells)]
    return [p for p in dict.fromkeys(people) if p and p != SYSTEM_ACTOR]


async def declare(svc: Services, req: Request, cmd: Declare, _inc: IncidentView | None) -> Outcome:
    await scope.must_know(svc, cmd.cell, "nothing was declared")
    try:
        inc, problems = await open_incident(
            svc,
            title=cmd.title,
            sev=cmd.sev,
            ic=req.actor,
            cells=cmd.cell,
            products=[cmd.product] if cmd.product else [],
            regions=[cmd.region] if cmd.region else [],
            request_id=req.id,
            private=cmd.private,
        )
    except NotOpened as e:
        return Outcome(result="error", message=f"{e} (ref `{req.id}`)", audit={"not_opened": str(e)})
    due = f" First update due {hhmm(inc.next_update_due)} UTC." if inc.next_update_due else ""
    audit = {"incident_channel": inc.channel_id, "sev": inc.sev, "cells": inc.cells, "private": inc.private}
    where = channel_ref(inc.channel_id) if inc.channel_id else "its channel"
    if problems:
        # Still ok: the incident exists, so its timers and audit belong to it like any other.
        return Outcome(
            message=f"{inc.id} (SEV{inc.sev}) is open in {where} and you are IC, but "
            f"{'; '.join(problems)}; run `/incident status` there.{due}",
            incident_id=inc.id,
            audit={**audit, "problems": problems},
        )
    private = (
        " The channel is private: invite who needs it; the stakeholder channel hears only your own updates."
        if inc.private
        else ""
    )
    return Outcome(
        message=f"Declared {inc.id} (SEV{inc.sev}) in {where}; you are IC.{due}{private}",
        incident_id=inc.id,
        audit=audit,
    )


async def raise_to(svc: Services, inc: Incident, sev: int, reason: str, actor: str) -> Outcome:
    """The only way SEV changes while an incident is open: up, atomically."""
    change = await repo(svc).raise_sev(inc.id, sev, reason, svc.policy.cadence, svc.clock.now())
    if change.code is SevRaised.RAISED:
        warn = await announce(
            svc,
            inc.id,
            f":rotating_light: {inc.id} raised SEV{change.before} → SEV{sev} by {person(actor)}: {quote(reason)}",
        )
        warn2 = await refresh_card(svc, inc.id)
        return Outcome(
            message=joined(f"{inc.id} is now SEV{sev} (was SEV{change.before}).", warn, warn2),
            audit={"sev_from": change.before, "sev_to": sev},
        )
    if change.code is SevRaised.SAME:
        return Outcome(message=f"{inc.id} is already SEV{sev}.", audit={"sev_from": sev, "sev_to": sev})
    if change.code is SevRaised.LOWER_REFUSED:
        raise Refusal(
            f"SEV only goes up while {inc.id} is open: it is SEV{change.before}, you asked for SEV{sev}. "
            f"Downgrades happen in the postmortem.",
            sev_current=change.before,
            sev_asked=sev,
        )
    raise Refusal(f"{inc.id} is resolved; SEV changes now go in the postmortem.")


async def sev(svc: Services, req: Request, cmd: Sev, inc: Incident) -> Outcome:
    return await raise_to(svc, inc, cmd.sev, cmd.reason, req.actor)


async def assess(svc: Services, req: Request, cmd: Assess, inc: Incident) -> Outcome:
    a = rules.assess(
        rules.Impact(users_burn=cmd.users_burn, gpus=cmd.gpus, quality=cmd.quality, security=cmd.security),
        svc.policy.severity,
    )
    why = rules.explain(a)
    audit = {"assessed_sev": a.sev, "deciding_axis": a.deciding_axis, "axes": a.reasons}
    if rules.is_raise(inc.sev, a.sev):
        out = await raise_to(svc, inc, a.sev, f"assessed {why}", req.actor)
        out.message = f"Matrix says {why}. " + out.message
        out.audit.update(audit)
        return out
    return Outcome(
        message=f"Matrix says {why}. {inc.id} stays SEV{inc.sev}: SEV only goes up while open.",
        audit=audit,
    )


def _roles_line(inc: Incident) -> str:
    return ", ".join(f"{r} {person(inc.roles[r].user)}" for r in ROLES if r in inc.roles) or "none"


async def status(svc: Services, req: Request, cmd: Status, inc: Incident) -> Outcome:
    due = f"{hhmm(inc.next_update_due)} UTC" if inc.next_update_due else "none"
    parts = [
        f"*{inc.id}* SEV{inc.sev} · {inc.status.value} · {quote(inc.title)}",
        f"Roles: {_roles_line(inc)}",
        f"Cells: {', '.join(inc.cells) or 'none'} · next update due: {due}",
    ]
    waiting = [h for h in await repo(svc).handoffs(inc.id) if h.status == "pending"]
    if waiting:
        parts.append(
            "Pending handoffs: "
            + ", ".join(
                f"{h.id} {ROLE_TITLES[h.role]} → {person(h.to_user)} (since {hhmm(h.requested_at)} UTC)"
                for h in waiting
            )
        )
    for line in svc.registry.hooked(STATUS_LINE):
        extra = await line(svc, inc)
        if extra:
            parts.append(extra)
    return Outcome(message="\n".join(parts))


async def _set_status(svc: Services, req: Request, inc: Incident, new: St) -> Outcome:
    change = await repo(svc).set_status(inc, new, svc.clock.now())
    if change.code is StatusSet.SAME:
        return Outcome(message=f"{inc.id} is already {new.value}.")
    if change.code is not StatusSet.CHANGED:
        raise Refusal(f"{inc.id} is {change.before}; it cannot go back to {new.value}.")
    tail = f" Still answered here: {after_resolve(svc)}." if new is St.resolved else " Reminders stop; keep watching."
    warn = await announce(
        svc, inc.id, f":large_green_circle: {inc.id} marked *{new.value}* by {person(req.actor)}.{tail}"
    )
    warn2 = await refresh_card(svc, inc.id)
    lines: list[str] = []
    # What it leaves behind: requests that never ran are cancelled, levers in force listed (levers/resolve.py).
    if new is St.resolved and (close := svc.registry.provided(ON_RESOLVE)) is not None:
        lines += await close(svc, inc, req.actor)
    return Outcome(
        message="\n".join([joined(f"{inc.id} is now {new.value}.", warn, warn2), *lines]),
        audit={"status_from": change.before, "status_to": new.value},
    )


async def mitigated(svc: Services, req: Request, cmd: Mitigated, inc: Incident) -> Outcome:
    return await _set_status(svc, req, inc, St.mitigated)


async def resolved(svc: Services, req: Request, cmd: Resolved, inc: Incident) -> Outcome:
    return await _set_status(svc, req, inc, St.resolved)


async def help_(svc: Services, req: Request, cmd: Help, inc: IncidentView | None) -> Outcome:
    routes = svc.registry.typed()
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
    head = (
        f"*{inc.id} is resolved; these still work here*"
        if inc is not None and not inc.is_open
        else "*Firebreak commands*"
    )
    return Outcome(message=f"{head}\n{body}\nRoles: {roles}")
