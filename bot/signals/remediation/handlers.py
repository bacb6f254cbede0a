"""The `remediation_alarm` request: post one burst's alarm in the cell's open incident (or open one
at the policy's SEV, IC the cell's on-call), offering `remediation-pause` with its plan."""

from __future__ import annotations

import asyncio

from bot import logs
from bot.chat import person
from bot.clusters import KubeError
from bot.comms.system import post_once
from bot.core.eligibility import oncall_now
from bot.core.request import SYSTEM_ACTOR, IncidentView, Outcome, Refusal, Request
from bot.core.services import Services
from bot.incidents.handlers import NotOpened, open_incident
from bot.incidents.models import Incident
from bot.incidents.store import repo
from bot.signals.remediation import views
from bot.signals.remediation.commands import RemediationAlarm
from bot.signals.remediation.store import store
from levers.base import Ctx, LeverRefusal, NoParams, Target
from levers.catalogue import LEVERS
from levers.catalogue.remediation import NHC

log = logs.get(__name__)

LEVER = "remediation-pause"
MAX_OFFERS = 5
NHC_LIST = f"/apis/{NHC.group}/{NHC.version}/{NHC.plural}"


def posted_mark(inc_id: str, cell: str, burst: int) -> str:
    """The two-step mark (bot.comms.system.Once) that posts a burst's alarm once, in the incident's slot."""
    return f"fb:inc:{{{inc_id}}}:ralarm:posted:{cell}:{burst}"


async def offers(svc: Services, req: Request, cell: str, incident: str) -> list[views.Offer] | str:
    """remediation-pause for each NodeHealthCheck in the cell, with the plan the lever makes now
    (nothing is written: the plan is the lever's own, read from the object as it is)."""
    pol = svc.policy.levers
    context = pol.context_of(cell)
    try:
        client = await svc.clusters.client(context)
        items = await asyncio.wait_for(client.list_all(NHC_LIST), pol.api_timeout_seconds)
    except KubeError as e:
        if e.code == 404:
            return f"{cell} has no NodeHealthCheck (the kind is not installed there): nothing for `{LEVER}` to pause."
        return f"The NodeHealthChecks of {cell} could not be read ({e.message}); `{LEVER}` was not planned."
    except TimeoutError:
        return f"The NodeHealthChecks of {cell} did not answer in time; `{LEVER}` was not planned."
    if not items:
        return f"{cell} has no NodeHealthCheck: nothing for `{LEVER}` to pause."
    lever = LEVERS[LEVER]
    found: list[views.Offer] = []
    for obj in sorted(items, key=lambda o: str(o["metadata"]["name"]))[:MAX_OFFERS]:
        name = str(obj["metadata"]["name"])
        ctx = Ctx(
            svc=svc,
            kube=client,
            req_id=req.id,
            incident=incident,
            cell=cell,
            context=context,
            target=Target(None, name),
            params=NoParams(),
            requester=SYSTEM_ACTOR,
            version=NHC.version,
        )
        try:
            plan = await lever.plan(ctx, obj)
        except LeverRefusal as r:
            found.append(views.Offer(name, None, str(r)))
            continue
        text = "; ".join([plan.effect, *plan.notes])
        found.append(views.Offer(name, f"/incident lever {LEVER} {name} --cell {cell}", text))
    if len(items) > MAX_OFFERS:
        found.append(views.Offer("…", None, f"{len(items) - MAX_OFFERS} more NodeHealthChecks not shown"))
    return found


async def _open(svc: Services, req: Request, cmd: RemediationAlarm) -> tuple[Incident, list[str]]:
    alarms = store(svc)
    number = cmd.number or await repo(svc).next_number()
    # The number first: if this process dies before the alarm is posted, the next poll finds the
    # incident by it (watch.py) instead of opening a second one.
    if not await alarms.note(cmd.cell, cmd.burst, "number", str(number)):
        raise Refusal(f"a newer burst replaced burst {cmd.burst} of {cmd.cell}; not opened", superseded=True)
    try:
        return await open_incident(
            svc,
            title=views.title(cmd),
            sev=svc.policy.levers.remediation_alarm.sev,
            ic=oncall_now(svc).ic_for(cmd.cell),  # the live oncall.yaml, as a page opens with
            cells=[cmd.cell],
            products=[],
            regions=[],
            request_id=req.id,
            number=number,
            by=SYSTEM_ACTOR,
        )
    except NotOpened as e:
        raise Refusal(str(e), not_opened=str(e)) from None


async def remediation_alarm(svc: Services, req: Request, cmd: RemediationAlarm, inc: IncidentView | None) -> Outcome:
    opened, problems = False, list[str]()
    if inc is None:
        found, problems = await _open(svc, req, cmd)
        opened = True
    else:
        got = inc if isinstance(inc, Incident) else await repo(svc).get(inc.id)
        if got is None:
            raise Refusal(f"{inc.id} does not exist.", missing=True)
        found = got
    alarms = store(svc)
    await alarms.note(cmd.cell, cmd.burst, "incident", found.id)
    offered = await offers(svc, req, cmd.cell, found.id)
    pol = svc.policy.levers.remediation_alarm
    text = views.alarm(
        cmd,
        per_hour=pol.per_hour,
        per_hour_fraction=pol.per_hour_fraction,
        same_minutes=pol.same_node_minutes,
        quiet_minutes=pol.quiet_minutes,
        offers=offered,
    )
    if opened:
        ic = found.holder("ic")
        seat = f"IC {person(ic)}" if ic else "no IC on call"
        text = f"Opened by Firebreak for the remediation alarm (SEV{found.sev}, {seat}).\n" + text
    if problems:
        text += f"\n:warning: Opening it went only part-way: {'; '.join(problems)}."
    audit: dict[str, object] = {
        "opened": opened,
        "cell": cmd.cell,
        "reason": cmd.reason,
        "count": cmd.count,
        "gpu_nodes": cmd.gpu_nodes,
        "nodes": list(cmd.nodes),
        "repeats": list(cmd.repeats),
        "who": cmd.who,
        "offered": [o.nhc for o in offered if o.line] if not isinstance(offered, str) else [],
        "no_offer": offered if isinstance(offered, str) else None,
    }
    if opened:
        audit.update(sev=found.sev, ic=found.holder("ic"), title=found.title)
    assert found.channel_id  # every incident gets its channel before it is saved
    failed = await post_once(svc, found.channel_id, posted_mark(found.id, cmd.cell, cmd.burst), text)
    if failed:
        return Outcome(
            result="error",
            message=f"Slack refused {found.id}'s remediation alarm ({failed}); the next poll retries.",
            incident_id=found.id,
            audit={**audit, "slack_error": failed},
        )
    await alarms.posted(cmd.cell, cmd.burst)
    verb = "opened" if opened else "posted in"
    return Outcome(message=f"Remediation alarm for {cmd.cell}: {verb} {found.id}.", incident_id=found.id, audit=audit)
