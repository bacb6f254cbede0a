"""The `alerts` request: one delivery's alerts for one group open an incident or feed the one
the group feeds (jobs.py decides which, holding the group's lock)."""

from __future__ import annotations

from bot import logs
from bot.comms.system import post_once
from bot.core.eligibility import oncall_now
from bot.core.request import SYSTEM_ACTOR, IncidentView, Outcome, Refusal, Request
from bot.core.services import Services
from bot.incidents.handlers import NotOpened, open_incident
from bot.incidents.models import Incident
from bot.incidents.store import repo
from bot.signals import rules, views
from bot.signals.commands import Alerts
from bot.signals.models import Alert
from bot.signals.store import AlertsRecorded, security_mark, store, summary_mark, unopened_mark

log = logs.get(__name__)

MAX_NODES = 50  # named in one audit entry; the incident keeps every alert with its labels


async def alerts(svc: Services, req: Request, cmd: Alerts, inc: IncidentView | None) -> Outcome:
    if inc is None:
        return await _open(svc, req, cmd)
    found = inc if isinstance(inc, Incident) else await repo(svc).get(inc.id)
    if found is None:
        raise Refusal(f"{inc.id} does not exist.", missing=True)
    return await _feed(svc, cmd, found, opened=False, problems=[])


async def _open(svc: Services, req: Request, cmd: Alerts) -> Outcome:
    """A new incident for the group: SEV from the alerts, IC from policies/oncall.yaml (or an empty seat)."""
    if not any(a.status == "firing" for a in cmd.alerts):
        raise Refusal("Nothing is firing in this group; resolved alerts open no incident.", nothing_firing=True)
    number = await repo(svc).next_number()
    # The number first, under the group's lock: if this process dies before the group is bound to
    # the incident, the next delivery finds the saved incident by it and joins it (jobs.py).
    if not await store(svc).reserve(cmd.group, cmd.token, number):
        return Outcome(result="error", message="the alert group's lock ran out; retried", audit={"lock_lost": True})
    ic = oncall_now(svc).ic_for(cmd.cell)  # the file as it is now, not as it was at start
    try:
        inc, problems = await open_incident(
            svc,
            title=rules.title_of(cmd.alerts, cmd.cell, cmd.security, cmd.summary),
            sev=rules.sev_of(cmd.alerts, cmd.security),
            ic=ic,
            cells=[cmd.cell],
            products=[],
            regions=[],
            detected_at=cmd.received_at,
            request_id=req.id,
            number=number,
            by=SYSTEM_ACTOR,
            alert_group=cmd.group,
            private=cmd.security,  # a security alert's incident is private (docs/security-model.md)
        )
    except (NotOpened, Refusal) as e:
        # Nothing is open (a channel made on the way is archived, orphans.py): the job tries again.
        why = e.message if isinstance(e, Refusal) else str(e)
    except Exception as exc:
        if not cmd.security:
            raise  # the executor's answer (handler_failed): the job tries again
        # A security alert is told to the security channel whatever stopped it (Slack unreachable too).
        log.exception("security_incident_open_failed")
        why = f"Opening it failed ({type(exc).__name__}); no incident was opened."
    else:
        if not await store(svc).bind(cmd.group, cmd.token, inc.id):
            log.error("alert_group_lock_lost", group=cmd.group)  # a second opener may follow: said loudly
        return await _feed(svc, cmd, inc, opened=True, problems=problems)
    audit: dict[str, object] = {"not_opened": why}
    if cmd.security:
        audit["security_channel"] = await _security_unopened(svc, cmd, why)
    return Outcome(result="error", message=why, audit=audit)


async def _security_line(
    svc: Services,
    cmd: Alerts,
    inc: Incident,
    fired: list[Alert],
    cleared: list[Alert],
    link: Incident | None,
    opened: bool,
    audit: dict[str, object],
) -> str | None:
    """The security channel's line for a security incident's alerts; Slack's error when refused."""
    channel = svc.settings.firebreak_security_channel
    if not channel:
        log.warning("security_channel_unset", message="FIREBREAK_SECURITY_CHANNEL is not set")
        audit["security_channel"] = "unset"
        return None
    line = views.security_line(
        inc.id,
        inc.channel_id,
        cmd.cell,
        fired,
        cleared,
        views.linked(link.id if link else None, link.channel_id if link else None),
        opened,
    )
    failed = await post_once(svc, channel, security_mark(inc.id, cmd.delivery, cmd.group), line)
    if failed:
        audit["slack_error"] = failed
        return failed
    audit["security_channel"] = "posted"
    return None


async def _security_unopened(svc: Services, cmd: Alerts, why: str) -> str:
    """Tell the security channel a security alert's incident could not be opened, once per delivery
    (the job's retries find the mark done); what became of the line, for the audit."""
    channel = svc.settings.firebreak_security_channel
    if not channel:
        log.warning("security_channel_unset", message="FIREBREAK_SECURITY_CHANNEL is not set")
        return "unset"
    try:
        link = await _linked(svc, cmd.cell, "")
        fired = [a for a in cmd.alerts if a.status == "firing"]
        line = views.security_unopened(
            cmd.cell, why, fired, views.linked(link.id if link else None, link.channel_id if link else None)
        )
        failed = await post_once(svc, channel, unopened_mark(cmd.delivery, cmd.group), line)
    except Exception as exc:  # the store or Slack down too: the job's next try posts it
        log.exception("security_unopened_post_failed")
        return f"failed ({type(exc).__name__})"
    return f"failed ({failed})" if failed else "posted"


async def _linked(svc: Services, cell: str, own: str) -> Incident | None:
    """The open incident of the same cell a security incident links to: the one the cell's pages
    feed, else one a person declared with the cell."""
    fed = await store(svc).fed(cell)
    inc = await repo(svc).get(fed) if fed else None
    if inc is not None and inc.is_open:
        return inc
    for other in await repo(svc).open_with_cell(cell):
        if other.id != own and not (other.alert_group or "").startswith(rules.SECURITY_PREFIX):
            return other
    return None


async def _feed(svc: Services, cmd: Alerts, inc: Incident, *, opened: bool, problems: list[str]) -> Outcome:
    """Record the alerts on the incident, then post one summary (and, for security, the security
    channel's line). A post that failed makes the outcome an error, so the job is delivered again:
    the record answers as the first time, and what was posted is not posted twice."""
    part = f"{cmd.delivery}:{cmd.group}"
    got = await store(svc).record_alerts(inc.id, part, cmd.received_at, [a.record(cmd.received_at) for a in cmd.alerts])
    if got.code is AlertsRecorded.RESOLVED:
        raise Refusal(f"{inc.id} was resolved meanwhile; its alerts go elsewhere.", resolved=True)
    if got.code is AlertsRecorded.MISSING:
        raise Refusal(f"{inc.id} does not exist.", missing=True)
    fired = [cmd.alerts[i] for i in got.fired]
    cleared = [cmd.alerts[i] for i in got.cleared]
    audit: dict[str, object] = {
        "opened": opened,
        "firing": len(fired),
        "resolved": len(cleared),
        "unchanged": len(cmd.alerts) - len(fired) - len(cleared),
        "alertnames_firing": dict(rules.counts(fired)),
        "alertnames_resolved": dict(rules.counts(cleared)),
        "nodes": rules.nodes([*fired, *cleared])[:MAX_NODES],
    }
    if opened:
        audit.update(sev=inc.sev, ic=inc.holder("ic"), title=inc.title, incident_channel=inc.channel_id)
    if problems:
        audit["problems"] = problems
    if not fired and not cleared and not opened:
        return Outcome(message=f"Nothing new for {inc.id}.", incident_id=inc.id, audit=audit)
    assert inc.channel_id  # every incident gets its channel before it is saved
    tail: list[str] = []
    link = None
    if cmd.security:
        link = await _linked(svc, cmd.cell, inc.id)
        audit["linked"] = link.id if link else None
        tail.append(views.linked(link.id if link else None, link.channel_id if link else None))
    elif fired and (hint := views.sev_hint(inc.id, inc.sev, rules.sev_of(fired, False))):
        tail.append(hint)
    if problems:
        tail.append(f":warning: Opening it went only part-way: {'; '.join(problems)}.")
    text = views.summary(
        cell=cmd.cell,
        fired=fired,
        cleared=cleared,
        unlabelled=cmd.unlabelled,
        truncated=cmd.truncated,
        head=views.opened_head(inc.id, cmd.cell, inc.holder("ic"), cmd.security) if opened else None,
        tail=tail,
    )
    failed = await post_once(svc, inc.channel_id, summary_mark(inc.id, cmd.delivery, cmd.group), text)
    if failed:
        audit["slack_error"] = failed
    # The security channel hears of it even when the incident channel's summary was refused.
    refused = await _security_line(svc, cmd, inc, fired, cleared, link, opened, audit) if cmd.security else None
    if failed or refused:
        what = (
            f"{inc.id}'s alert summary ({failed})"
            if failed
            else f"the security channel's post for {inc.id} ({refused})"
        )
        return Outcome(
            result="error", message=f"Slack refused {what}; it will be retried.", incident_id=inc.id, audit=audit
        )
    verb = "opened" if opened else "fed"
    return Outcome(
        message=f"{inc.id} {verb}: {len(fired)} firing, {len(cleared)} resolved.", incident_id=inc.id, audit=audit
    )
