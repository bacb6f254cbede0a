"""The watch: every poll_seconds, each cell's GPU nodes are read and the ones taken out of service
for remediation or as unhealthy since the last listing recorded (store.py decides, atomically, whether
that is an alarm). Only those causes count: Firebreak's quarantine, NodeHealthCheck's remediators
(Self Node Remediation, Fence Agents Remediation, the out-of-service taint), NVSentinel, and the
policy's `unhealthy_taints`. A cordon for an upgrade, cluster-autoscaler's scale-down taint,
Karpenter's disruption taint, the pressure taints and a not-ready node are not remediation. The rate
is relative to the cell: more than `per_hour` an hour, or more than `per_hour_fraction` of its GPU
nodes (at least two).

One job for the whole deployment (one key): the scheduler hands each due run to exactly one
replica, and the next run is scheduled first, so a failing run never ends the chain. Even two
runs at once (a lease that ran out) record a listing once and post a burst's alarm once: the
observation is one script, the alarm is taken with a claim, and the post carries a two-step mark.
"""

from __future__ import annotations

import asyncio
import math

import structlog

from bot import logs
from bot.clusters import KubeError, UnknownCell
from bot.comms.system import CLAIM_OF_LEASE
from bot.core.dispatch import execute
from bot.core.request import SYSTEM_ACTOR, Request, Source
from bot.core.services import Services
from bot.incidents.models import Incident
from bot.incidents.store import repo
from bot.policy.levers import RemediationAlarmPolicy
from bot.scheduler import Job
from bot.signals import rules as signal_rules
from bot.signals.remediation.commands import MAX_NODES, RemediationAlarm
from bot.signals.remediation.store import Observed, Pending, store
from levers import outofservice
from levers.scope import known_cells

log = logs.get(__name__)

JOB = "remediation.watch"
JOB_KEY = "cells"  # one pending watch for the whole deployment
HOUR = 3600.0


# Who takes a node out for remediation or because it is unhealthy (levers/outofservice.py names them).
REMEDIATORS = (outofservice.FIREBREAK, outofservice.NHC, outofservice.NVSENTINEL)


def _taint_key(cause: outofservice.Cause) -> str | None:
    """The key of a taint cause ("taint k=v:NoSchedule" -> "k"); None for a cordon."""
    if not cause.what.startswith("taint "):
        return None
    return cause.what.removeprefix("taint ").rsplit(":", 1)[0].split("=", 1)[0]


def remediation(node: outofservice.OutNode, unhealthy_taints: list[str]) -> outofservice.OutNode | None:
    """`node` with only its remediation and unhealthy causes; None when it has none (an upgrade's
    cordon, an autoscaler's or Karpenter's taint, a pressure or not-ready taint)."""

    def listed(c: outofservice.Cause) -> bool:
        key = _taint_key(c)
        return key is not None and any(key == t or (t.endswith("/") and key.startswith(t)) for t in unhealthy_taints)

    keep = tuple(c for c in node.causes if c.who in REMEDIATORS or listed(c))
    return outofservice.OutNode(node.name, keep) if keep else None


def rate_limit(pol: RemediationAlarmPolicy, gpu_nodes: int) -> int:
    """More than this many nodes out in an hour alarms: per_hour, or per_hour_fraction of the cell's GPU
    nodes when that is fewer, never under 2 nodes (one node is the same-node rule's). The epsilon keeps
    0.29 * 100 at 29."""
    return min(pol.per_hour, max(1, math.floor(pol.per_hour_fraction * gpu_nodes + 1e-9)))


def went_out_at(node: outofservice.OutNode) -> float | None:
    """When the cluster says the node went out (its earliest cause with a time), if it says."""
    times = [c.since for c in node.causes if c.since is not None]
    return min(times) if times else None


async def start(svc: Services) -> None:
    """At start: a first listing of each cell now (the baseline), and keep the watch going."""
    await svc.scheduler.schedule(JOB, JOB_KEY, svc.clock.now() + svc.policy.levers.remediation_alarm.poll_seconds, {})
    await watch_all(svc)


async def watch(svc: Services, job: Job) -> None:
    await svc.scheduler.schedule(JOB, JOB_KEY, svc.clock.now() + svc.policy.levers.remediation_alarm.poll_seconds, {})
    await watch_all(svc)


async def watch_all(svc: Services) -> None:
    for cell in await known_cells(svc) or []:
        with structlog.contextvars.bound_contextvars(cell=cell):
            try:
                await watch_cell(svc, cell)
            except (KubeError, UnknownCell, TimeoutError) as e:
                # One cell's API server down says nothing of the others: the next poll tries it again.
                log.warning("remediation_watch_unreadable", error=str(e) or type(e).__name__)


async def watch_cell(svc: Services, cell: str) -> None:
    pol = svc.policy.levers
    q, a = pol.node_quarantine, pol.remediation_alarm
    client = await svc.clusters.client(pol.context_of(cell))
    nodes = await asyncio.wait_for(
        client.list_all("/api/v1/nodes", {"labelSelector": q.gpu_node_selector}), pol.api_timeout_seconds
    )
    found = [
        r
        for o in outofservice.out_of_service(nodes, q.taint_key, q.dedicated_taints)
        if (r := remediation(o, a.unhealthy_taints)) is not None
    ]
    now = svc.clock.now()
    until = now + svc.scheduler.lease * CLAIM_OF_LEASE
    alarms = store(svc)
    got = await alarms.observe(
        cell,
        [(o.name, went_out_at(o)) for o in found],
        now=now,
        window=HOUR,
        per_window=rate_limit(a, len(nodes)),
        same_node=a.same_node_minutes * 60,
        quiet=a.quiet_minutes * 60,
        claim_until=until,
    )
    if got.code is not Observed.NOTHING_NEW:
        log.info("remediation_watch", code=got.code.name, count=got.count, burst=got.burst, more=got.more)
    if got.code is Observed.ALARM:
        pending: Pending | None = Pending(cell, got.burst, now, got.count, got.reason, got.repeats, 0, None, None)
    else:  # an alarm an earlier run took and could not post (the chat, a crash): retried here
        pending = await alarms.claim(cell, now, until)
    if pending is not None:
        await _alarm(svc, pending, found, len(nodes), now)


async def _incident(svc: Services, p: Pending) -> Incident | None:
    """Where the alarm goes: the one it went to before a retry, the one opened for it before a crash,
    else the cell's oldest open incident that is not a security one; None: it opens one."""
    incidents = repo(svc)
    for known in (p.incident, f"INC-{p.number}" if p.number else None):
        inc = await incidents.get(known) if known else None
        if inc is not None and inc.is_open:
            return inc
    open_ = await incidents.open_with_cell(p.cell)
    plain = [i for i in open_ if not (i.alert_group or "").startswith(signal_rules.SECURITY_PREFIX) and not i.private]
    return plain[0] if plain else None


async def _alarm(svc: Services, p: Pending, found: list[outofservice.OutNode], gpu_nodes: int, now: float) -> None:
    recent = await store(svc).recent(p.cell, now - HOUR)
    names = tuple(dict.fromkeys(recent))
    still = {o.name: o for o in found}
    inc = await _incident(svc, p)
    cmd = RemediationAlarm(
        cell=p.cell,
        burst=p.burst,
        reason="repeat" if p.reason == "repeat" else "rate",
        count=p.count,
        gpu_nodes=gpu_nodes,
        more=p.more,
        nodes=names[-MAX_NODES:],
        repeats=tuple(p.repeats[:MAX_NODES]),
        who=outofservice.by_who([still[n] for n in names if n in still])[:2000],
        number=p.number if inc is None else None,
    )
    out = await execute(
        svc,
        Request(command=cmd, actor=SYSTEM_ACTOR, source=Source.scheduler, incident_id=inc.id if inc else None),
    )
    if out.result == "error" or (out.result != "ok" and not out.audit.get("superseded")):
        # Not posted: the next poll takes it again at once (its claim released).
        await store(svc).release(p.cell, p.burst)
        log.warning("remediation_alarm_not_posted", burst=p.burst, reason=out.message)
