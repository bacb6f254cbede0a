"""`/incident triage`: the PromQL set of policies/queries.yaml for each of the incident's cells,
all at once, posted as one table in the incident channel (a row per query, a column per cell).

A query that fails (Prometheus refused it, timed out, can't be reached) shows `failed` and one
that matches no series `no data`, with the reasons under the table; neither is ever shown as 0.
Queries are evaluated at the injected clock's now.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass

from bot import logs
from bot.chat import ChatError, quote
from bot.clock import hhmm
from bot.clusters import KubeError, UnknownCell
from bot.core.request import IncidentView, Outcome, Refusal, Request
from bot.core.services import Services
from bot.policy.queries import TriageQuery
from bot.prom import Failed, PromQuery, Result, Why
from bot.triage import rules, views
from bot.triage.commands import Triage
from levers import outofservice

log = logs.get(__name__)

# Beyond a query's own timeout (which the HTTP call and Prometheus both honour), how long the
# table waits for a query still queued for a worker thread.
GRACE_SECONDS = 1.0


def ack(cmd: Triage) -> str:
    return "Asking Prometheus…"


@dataclass(frozen=True)
class Row:
    query: TriageQuery
    figures: dict[str, rules.Figure]  # by cell


async def _ask(prom: PromQuery, promql: str, at: float, timeout: float) -> Result:
    try:
        return await asyncio.wait_for(prom.query(promql, at, timeout), timeout + GRACE_SECONDS)
    except TimeoutError:
        return Failed(Why.TIMEOUT, f"waited {timeout:g}s")


def _render(svc: Services, q: TriageQuery, cell: str) -> str | rules.Figure:
    """``q`` for ``cell``, its node placeholders from levers.yaml's node_quarantine (the quarantine
    budget's own GPU nodes and dedicated taints); a selector the row can't use fails that row only."""
    nq = svc.policy.levers.node_quarantine
    try:
        return q.render(cell, nq.taint_key, nq.dedicated_taints, nq.gpu_node_selector)
    except ValueError as e:
        return rules.Figure(rules.State.failed, reason=str(e))


async def run(svc: Services, cells: list[str]) -> tuple[float, list[Row]]:
    """Every query for every cell, concurrently: (the evaluation time, a row per query)."""
    prom = svc.prometheus
    if prom is None:
        raise Refusal("Triage needs Prometheus and PROMETHEUS_URL is not set; nothing was queried.")
    pol = svc.policy.queries
    at = svc.clock.now()
    asks = [(q, cell, _render(svc, q, cell)) for q in pol.queries for cell in cells]
    answers = await asyncio.gather(
        *(_ask(prom, promql, at, pol.timeout_seconds) for _, _, promql in asks if isinstance(promql, str))
    )
    got = iter(answers)
    figures: dict[str, dict[str, rules.Figure]] = {q.name: {} for q in pol.queries}
    for q, cell, promql in asks:
        f = rules.figure(next(got)) if isinstance(promql, str) else promql
        figures[q.name][cell] = f
        if f.state is rules.State.failed:
            log.warning("triage_query_failed", query=q.name, cell=cell, reason=f.reason)
    return at, [Row(q, figures[q.name]) for q in pol.queries]


async def _cell_nodes(svc: Services, cell: str) -> str | None:
    """One cell's GPU nodes that can't take work and who made them so (levers/outofservice.py);
    None when there is no kubeconfig at all (triage is Prometheus's; the cluster adds who)."""
    pol = svc.policy.levers.node_quarantine
    try:
        client = await svc.clusters.client(svc.policy.levers.context_of(cell))
        nodes = await asyncio.wait_for(
            client.list_all("/api/v1/nodes", {"labelSelector": pol.gpu_node_selector}),
            svc.policy.queries.timeout_seconds,
        )
    except UnknownCell as e:
        return None if e.known is None else f"{quote(cell)}: no kube context for this cell"
    except (KubeError, TimeoutError) as e:
        why = "no answer in time" if isinstance(e, TimeoutError) else str(e)
        return f"{quote(cell)}: GPU nodes could not be read ({quote(why)})"
    out = outofservice.out_of_service(nodes, pol.taint_key, pol.dedicated_taints)
    if not out:
        return f"{quote(cell)}: all {len(nodes)} GPU nodes can take work"
    return f"{quote(cell)}: {len(out)} of {len(nodes)} GPU nodes can't take work: {quote(outofservice.by_who(out))}"


async def out_of_service(svc: Services, cells: list[str]) -> list[str]:
    """Per cell, who took GPU nodes out (cordons and taints by anyone), read from the cluster."""
    lines = await asyncio.gather(*(_cell_nodes(svc, c) for c in cells))
    return [line for line in lines if line is not None]


async def triage(svc: Services, req: Request, cmd: Triage, inc: IncidentView) -> Outcome:
    cells = list(inc.cells)
    if not cells:
        raise Refusal(
            f"{inc.id} names no cells, and triage asks Prometheus per cell. Declare incidents with "
            "`--cell <cell>` (alerts name theirs)."
        )
    (at, rows), nodes = await asyncio.gather(run(svc, cells), out_of_service(svc, cells))
    card, table = views.triage_card(inc.id, cells, rows, hhmm(at), nodes)
    failed = sum(1 for r in rows for f in r.figures.values() if f.state is rules.State.failed)
    empty = sum(1 for r in rows for f in r.figures.values() if f.state is rules.State.no_data)
    nan = sum(1 for r in rows for f in r.figures.values() if f.value is not None and math.isnan(f.value))
    audit = {
        "cells": cells,
        "queries": len(rows),
        "failed": sorted({r.query.name for r in rows for f in r.figures.values() if f.state is rules.State.failed}),
        "no_data": sorted({r.query.name for r in rows for f in r.figures.values() if f.state is rules.State.no_data}),
    }
    counts = ", ".join(
        part
        for part in (
            f"{failed} failed" if failed else "",
            f"{empty} no data" if empty else "",
            f"{nan} NaN" if nan else "",
        )
        if part
    )
    summary = f"{len(rows)} queries × {len(cells)} cell{'s' if len(cells) != 1 else ''}" + (
        f" ({counts})" if counts else ""
    )
    channel = inc.channel_id
    if not channel:
        return Outcome(message=f"Triage for {inc.id}: {summary}.\n{table}", audit=audit)
    try:
        await svc.chat.post(channel, f"Triage for {inc.id}: {summary}", card)
    except ChatError as e:
        log.warning("triage_post_failed", error=e.error)
        return Outcome(
            message=f"Triage ran ({summary}) but could not be posted in the channel ({e.error}):\n{table}",
            audit={**audit, "posted": False},
        )
    return Outcome(message=f"Triage for {inc.id} posted in the channel: {summary}.", audit=audit)
