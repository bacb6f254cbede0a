"""The delivery job: what the webhook recorded becomes one `alerts` request per group.

The webhook answers Alertmanager once the delivery's body and its job are in Redis (webhook.py);
the scheduler hands the job to exactly one replica, and hands it out again if that one dies or
the chat fails. For each group (a cell's pages, a cell's security alerts) the job holds the
group's lock, finds the incident the group feeds (or none), skips what changes nothing, and
runs the request through the executor: policy check, handler, one audit entry.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import structlog

from bot import logs, redact
from bot.comms.store import store as marks
from bot.core.dispatch import JobRetry, execute
from bot.core.eligibility import eligibility
from bot.core.request import SYSTEM_ACTOR, Request, Source
from bot.core.services import Services
from bot.incidents.models import Incident
from bot.incidents.store import repo
from bot.scheduler import Job
from bot.signals import payload, rules
from bot.signals.commands import Alerts
from bot.signals.models import Alert, Delivery
from bot.signals.store import GroupBusy, GroupState, security_mark, store, summary_mark

log = logs.get(__name__)

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_CONTROL_IN_PROSE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # a summary keeps its lines and tabs


def machine_summary(text: str) -> str:
    return _CONTROL_IN_PROSE.sub(" ", redact.scrub_text(text))


def machine_text(alert: dict[str, Any]) -> dict[str, Any]:
    """An alert's text as Firebreak keeps and reposts it (incident, card, channel name, security
    channel, postmortem): every secret replaced by ``[redacted <kind>]``. Redacted, not refused as
    a person's text is: the sender is a machine, nobody can be asked to paste a link instead, and
    the page must still open its incident. Labels (which name cells and channels) lose their
    control characters too; a summary may span lines."""
    clean: dict[str, Any] = redact.scrub(alert)
    clean["labels"] = {_CONTROL.sub(" ", k): _CONTROL.sub(" ", v) for k, v in clean["labels"].items()}
    clean["summary"] = machine_summary(clean["summary"])
    return clean


DELIVERY = "alerts.delivery"


async def deliver(svc: Services, job: Job) -> None:
    delivery, received_at = str(job.payload["id"]), float(job.payload["received_at"])
    with structlog.contextvars.bound_contextvars(delivery=delivery):
        body = await store(svc).delivery(delivery)
        if body is None:  # only after DELIVERY_KEEP_S: said loudly, never silently skipped
            log.error("alert_delivery_body_missing")
            return
        parsed = payload.parse(body)  # checked by the webhook already
        d = Delivery(
            id=delivery,
            received_at=received_at,
            group_key=parsed.group_key,
            summary=machine_summary(parsed.summary),
            truncated=parsed.truncated,
            alerts=[Alert.model_validate(machine_text(a)) for a in parsed.handled],
        )
        for group in rules.groups(d.alerts):
            with structlog.contextvars.bound_contextvars(alert_group=group.key):
                await _group(svc, d, group)
        await store(svc).drop_delivery(delivery)


async def _group(svc: Services, d: Delivery, group: rules.Group) -> None:
    token = uuid.uuid4().hex
    try:
        async with store(svc).locked(svc, group.key, token) as state:
            # Twice at most: the incident may be resolved between the look-up and the record.
            for _ in range(2):
                inc, last = await _incident_for(svc, group, state, token)
                alerts = list(group.alerts)
                if last is not None:
                    earlier = await store(svc).alert_records(last, [a.fingerprint for a in alerts])
                    alerts = rules.unseen_elsewhere(alerts, earlier)
                if inc is None and not any(a.status == "firing" for a in alerts):
                    if alerts:
                        log.info("alerts_without_incident", resolved=len(alerts))
                    return
                if inc is not None and not await _news(svc, inc, d, group, alerts):
                    log.info("alerts_unchanged", incident=inc.id, alerts=len(alerts))
                    return
                cmd = Alerts(
                    delivery=d.id,
                    group=group.key,
                    cell=group.cell,
                    security=group.security,
                    received_at=d.received_at,
                    count=len(alerts),
                    unlabelled=sum(1 for a in alerts if rules.cell_of(a) is None),
                    truncated=d.truncated,
                    summary=d.summary,
                    alerts=tuple(alerts),
                    token=token,
                )
                req = Request(
                    command=cmd,
                    actor=SYSTEM_ACTOR,
                    source=Source.alertmanager,
                    incident_id=inc.id if inc is not None else None,
                )
                out = await execute(svc, req)
                if out.result == "error":
                    raise JobRetry(out.message)
                if not out.audit.get("resolved"):
                    return
    except GroupBusy:
        raise JobRetry(f"alert group {group.key} stayed locked by another delivery") from None


async def _incident_for(
    svc: Services, group: rules.Group, state: GroupState, token: str
) -> tuple[Incident | None, str | None]:
    """The open incident ``group`` feeds, binding one if needed, and the last one it fed (resolved).

    In order: the one bound to the group; one opened for the group whose opener died before binding
    it (found by the number it took); for a cell's pages, the oldest open incident a person
    declared with the cell whose IC is IC-eligible for that cell (anyone may declare with any
    known cell and be IC: such an incident gets no pages, which open their own with the cell's
    on-call instead; docs/security-model.md). A security group only ever feeds the incident it opened itself.
    """
    groups, incidents = store(svc), repo(svc)
    last = state.last
    if state.inc:
        inc = await incidents.get(state.inc)
        if inc is not None and inc.is_open:
            return inc, last
        await groups.unbind(group.key, token, state.inc)
        last = state.inc
    if state.number:
        inc = await incidents.get(f"INC-{state.number}")
        if inc is not None and inc.is_open and inc.alert_group == group.key:
            await groups.bind(group.key, token, inc.id)
            return inc, last
    if not group.security:
        for inc in await incidents.open_with_cell(group.cell):
            if inc.alert_group == group.key or (inc.alert_group is None and await _ic_eligible(svc, inc, group.cell)):
                await groups.bind(group.key, token, inc.id)
                return inc, last
    return None, last


async def _ic_eligible(svc: Services, inc: Incident, cell: str) -> bool:
    """Is the incident's IC IC-eligible for ``cell``? Not when the seat is empty, nor while Slack
    can't say (fail closed: the page then opens its own incident, which is never lost)."""
    ic = inc.holder("ic")
    if ic is None:
        return False
    v = await eligibility(svc).check(ic, "ic", [cell])
    if not v.ok:
        log.info("alerts_not_joined", incident=inc.id, ic=ic, why=v.why, unanswered=v.unanswered)
    return v.ok


async def _news(svc: Services, inc: Incident, d: Delivery, group: rules.Group, alerts: list[Alert]) -> bool:
    """Would this part change the incident, or finish what a delivery before did part-way (its
    record made, a post missing)? A redelivery of what the incident has adds no request at all."""
    alerts_of = store(svc)
    if await alerts_of.delivery_recorded(inc.id, f"{d.id}:{group.key}"):
        done = await marks(svc).is_done(summary_mark(inc.id, d.id, group.key))
        if done and group.security and svc.settings.firebreak_security_channel:
            done = await marks(svc).is_done(security_mark(inc.id, d.id, group.key))
        return not done
    recorded = await alerts_of.alert_records(inc.id, [a.fingerprint for a in alerts])
    fired, cleared = rules.changes(alerts, recorded)
    return bool(fired or cleared)
