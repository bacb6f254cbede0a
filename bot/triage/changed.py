"""`/incident changed [--hours H]`: per cell of the incident, what changed in the last H hours
across the six streams (docs/signals-and-postmortem.md): model weights and serving images (Argo Rollouts revisions,
images, steps), the node layer (driver versions, node image labels), Kubernetes Warning events,
policy (Firebreak's own lever requests), and demand (request rate now vs H hours ago).

Streams are read concurrently, each with its own timeout; one that can't be read says so and the
others still show. A cell of the incident whose demand rose while another cell drained is called
out first, as a capacity shift: that looks like a regression and is not one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import TypeVar

from redis.exceptions import RedisError

from bot import logs
from bot.chat import ChatError, quote
from bot.clock import hhmm
from bot.clusters import KubeError, UnknownCell
from bot.core.request import IncidentView, Outcome, Refusal, Request
from bot.core.services import Services
from bot.triage import rules, streams, views
from bot.triage.access import ROLLOUT_NAMESPACES
from bot.triage.commands import Changed
from levers.requests import LeverRequest

log = logs.get(__name__)

T = TypeVar("T")

ROLLOUTS = "Rollouts (weights, images)"
NODES = "Node layer"
EVENTS = "Warning events"
LEVERS = "Firebreak levers"
DEMAND = "Demand"
PRIVATE_ACTED = "a private incident acted in this cell (its channel has the details)"


def ack(cmd: Changed) -> str:
    return f"Reading what changed in the last {rules.hours_label(cmd.hours)}…"


@dataclass
class StreamReport:
    title: str
    items: list[str] = field(default_factory=list)  # mrkdwn, already quoted
    error: str | None = None  # why it can't be read (plain text; the view quotes it)


@dataclass
class CellReport:
    cell: str
    streams: list[StreamReport]


@dataclass
class Report:
    incident: str
    hours: float
    when: str
    shifts: list[str]  # capacity-shift callouts (mrkdwn)
    cells: list[CellReport]

    @property
    def unreadable(self) -> int:
        return sum(1 for c in self.cells for s in c.streams if s.error is not None)


def _why(exc: BaseException, timeout: float, ref: str) -> str:
    if isinstance(exc, TimeoutError):
        return f"no answer within {timeout:g}s"
    if isinstance(exc, (KubeError, UnknownCell, streams.Unreadable)):
        return str(exc)
    if isinstance(exc, RedisError):
        return "Firebreak can't reach its store"
    return f"{type(exc).__name__} (ref {ref} in the logs)"


async def _read(work: Awaitable[T], timeout: float, ref: str, what: str) -> tuple[T | None, str | None]:
    """``work``'s result, or None and why it failed (never raises: one stream's failure is its own)."""
    try:
        return await asyncio.wait_for(work, timeout), None
    except Exception as exc:  # any failure of one stream is reported on that stream (logged below)
        if not isinstance(exc, (TimeoutError, KubeError, UnknownCell, streams.Unreadable, RedisError)):
            log.exception("changed_stream_failed", stream=what)
        else:
            log.warning("changed_stream_unreadable", stream=what, error=_why(exc, timeout, ref))
        return None, _why(exc, timeout, ref)


def _items(got: object) -> list[str]:
    return [str(x) for x in got] if isinstance(got, list) else []


async def _kube_streams(svc: Services, cell: str, since: float, hours: float, ref: str) -> list[StreamReport]:
    pol = svc.policy.queries.changed
    context = svc.policy.levers.context_of(cell)
    client, err = await _read(svc.clusters.client(context), pol.timeout_seconds, ref, "kube_client")
    if err is not None or client is None:
        return [StreamReport(t, error=err) for t in (ROLLOUTS, NODES, EVENTS)]
    quarantine = svc.policy.levers.node_quarantine
    selector = quarantine.gpu_node_selector
    reads = await asyncio.gather(
        _read(
            streams.rollouts(client, since, pol.max_items, svc.policy.levers.namespaces.get(ROLLOUT_NAMESPACES) or []),
            pol.timeout_seconds,
            ref,
            "rollouts",
        ),
        _read(streams.nodes(client, pol, selector, since, hours, quarantine), pol.timeout_seconds, ref, "nodes"),
        _read(streams.events(client, since, hours, pol.max_items), pol.timeout_seconds, ref, "events"),
    )
    return [
        StreamReport(title, _items(got), err)
        for title, (got, err) in zip((ROLLOUTS, NODES, EVENTS), reads, strict=True)
    ]


async def _demand(svc: Services, now: float, hours: float, ref: str) -> tuple[object, str | None]:
    prom = svc.prometheus
    if prom is None:
        return None, "PROMETHEUS_URL is not set"
    pol = svc.policy.queries
    return await _read(
        streams.demand(prom, pol.changed.demand.query, now, hours, pol.timeout_seconds),
        pol.changed.timeout_seconds,
        ref,
        "demand",
    )


def _shift_text(shift: rules.Shift, hours: float, levers: dict[str, list[LeverRequest]]) -> str:
    d = shift.demand
    drained = []
    for cell, dd in shift.drained:
        moved = [r for r in levers.get(cell, []) if r.lever == "route-weight"]
        by = f", after {', '.join(f'{r.id} route-weight ({r.incident})' for r in moved[:2])}" if moved else ""
        drained.append(
            f"{quote(cell)} drained ({rules.percent_change(dd)}: {rules.rate(dd.before)} → {rules.rate(dd.now)}{by})"
        )
    return (
        f":warning: *Capacity shift, not a regression*: {quote(shift.cell)}'s demand rose "
        f"({rules.percent_change(d)}: {rules.rate(d.before)} → {rules.rate(d.now)}) while {'; '.join(drained)} "
        f"in the last {rules.hours_label(hours)}. Check the receiving cells' headroom and add capacity "
        "or shift traffic back in steps; a rollback would not fix this."
    )


async def build(svc: Services, inc: IncidentView, hours: float, ref: str) -> Report:
    cells = list(inc.cells)
    now = svc.clock.now()
    since = now - hours * 3600
    pol = svc.policy.queries.changed
    kube, lever_read, demand_read = await asyncio.gather(
        asyncio.gather(*(_kube_streams(svc, c, since, hours, ref) for c in cells)),
        _read(streams.lever_changes(svc, inc.id, since), pol.timeout_seconds, ref, "levers"),
        _demand(svc, now, hours, ref),
    )
    levers_got, levers_err = lever_read
    got = levers_got if isinstance(levers_got, streams.LeverChanges) else streams.LeverChanges({}, set())
    levers, hidden = got.shown, got.hidden
    demand_got, demand_err = demand_read
    demand: dict[str, rules.Demand] = demand_got if isinstance(demand_got, dict) else {}
    reports = []
    for cell, kube_streams in zip(cells, kube, strict=True):
        reqs = [*levers.get(cell, []), *levers.get("fleet", [])]
        # Another private incident's request: that it acted, never what, on what, or which incident.
        private = [PRIVATE_ACTED] if hidden & {cell, "fleet"} else []
        if levers_err is not None:
            lever_report = StreamReport(LEVERS, error=levers_err)
        elif reqs or private:
            shown = [streams.lever_line(r) for r in reqs[: pol.max_items]]
            more = [f"… and {len(reqs) - pol.max_items} more"] if len(reqs) > pol.max_items else []
            lever_report = StreamReport(LEVERS, shown + more + private)
        else:
            lever_report = StreamReport(LEVERS, [f"no lever pulled or undone in the last {rules.hours_label(hours)}"])
        if demand_err is not None:
            demand_report = StreamReport(DEMAND, error=demand_err)
        else:
            line = streams.demand_line(cell, demand.get(cell), hours, pol.demand.query)
            demand_report = StreamReport(DEMAND, [line])
        reports.append(CellReport(cell, [*kube_streams, lever_report, demand_report]))
    d = pol.demand
    shifts = rules.capacity_shifts(demand, cells, rise=d.rise_at_least, drop=d.drop_at_least, idle=d.idle_below)
    return Report(inc.id, hours, hhmm(now), [_shift_text(s, hours, levers) for s in shifts], reports)


async def changed(svc: Services, req: Request, cmd: Changed, inc: IncidentView) -> Outcome:
    if not inc.cells:
        raise Refusal(
            f"{inc.id} names no cells, and `changed` reads each cell's cluster. Declare incidents with "
            "`--cell <cell>` (alerts name theirs)."
        )
    report = await build(svc, inc, cmd.hours, req.id)
    card = views.changed_card(report)
    h = rules.hours_label(cmd.hours)
    tail = []
    if report.shifts:
        tail.append(f"{len(report.shifts)} capacity shift{'s' if len(report.shifts) != 1 else ''} called out")
    if report.unreadable:
        tail.append(f"{report.unreadable} stream{'s' if report.unreadable != 1 else ''} couldn't be read")
    summary = f" ({'; '.join(tail)})" if tail else ""
    audit = {
        "hours": cmd.hours,
        "cells": list(inc.cells),
        "shifts": len(report.shifts),
        "unreadable": report.unreadable,
    }
    if not inc.channel_id:
        return Outcome(message=f"What changed in the last {h} for {inc.id}{summary}.", audit=audit)
    try:
        await svc.chat.post(inc.channel_id, f"What changed in the last {h} for {inc.id}", card)
    except ChatError as e:
        log.warning("changed_post_failed", error=e.error)
        return Outcome(
            message=f"Read what changed in the last {h}{summary} but could not post it in the channel ({e.error}).",
            audit={**audit, "posted": False},
        )
    return Outcome(message=f"What changed in the last {h} for {inc.id} posted in the channel{summary}.", audit=audit)
