"""The six streams of `changed`, each read on its own: a stream that can't be read raises, and the
caller says so for that stream only.

Kubernetes (per cell, through the levers' kube client and the cell's context): Argo Rollouts and
their ReplicaSets (revisions, images, steps), GPU nodes (driver and node image labels), Warning
events. Firebreak's own lever requests (the lever store), and demand (Prometheus). Every item is
mrkdwn with what came from the cluster or Prometheus made inert (bot.chat.text.literal: no mention
in cluster data stays active).
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bot.chat.text import literal
from bot.clock import hhmm
from bot.clusters import Cluster
from bot.core.services import Services
from bot.incidents.store import repo
from bot.policy.levers import QuarantinePolicy
from bot.policy.queries import ChangedPolicy
from bot.prom import Failed, PromQuery, Scalar, Vector
from bot.triage import rules
from levers import outofservice
from levers.requests import LeverRequest, LeverState
from levers.store import lever_store

ROLLOUT_VERSIONS = ("v1alpha1",)  # newest first
REVISION = "rollout.argoproj.io/revision"
POD_HASH = "rollouts-pod-template-hash"  # the label Argo Rollouts puts on the ReplicaSets it owns
IN_FLIGHT_PHASES = ("Progressing", "Paused", "Degraded")
# Lever requests that never touched the cluster.
NOT_CHANGES = (LeverState.planned, LeverState.denied, LeverState.expired, LeverState.stale, LeverState.cancelled)
ITEM_MAX = 240  # characters of one item from the cluster (an event message, an image list)


class Unreadable(Exception):
    """A stream that could not be read; the message says why (shown as is, quoted)."""


def ts(value: object) -> float | None:
    """An RFC 3339 time (metav1.Time or MicroTime) as unix seconds; None when absent or malformed."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _cut(text: str, limit: int = ITEM_MAX) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _meta(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _dict(obj: Any, *path: str) -> dict[str, Any]:
    for p in path:
        obj = obj.get(p) if isinstance(obj, dict) else None
    return obj if isinstance(obj, dict) else {}


def _more(shown: int, total: int, what: str) -> list[str]:
    return [f"… and {total - shown} more {what}"] if total > shown else []


# ------------------------------------------------------------------------------- rollouts


def _revision(rs: Mapping[str, Any]) -> int:
    try:
        return int((_meta(rs).get("annotations") or {}).get(REVISION, 0))
    except (TypeError, ValueError):
        return 0


def _created(obj: Mapping[str, Any]) -> float | None:
    return ts(_meta(obj).get("creationTimestamp"))


def _images(rs: Mapping[str, Any]) -> list[str]:
    pod = _dict(rs, "spec", "template", "spec")
    containers = [
        c for c in [*(pod.get("initContainers") or []), *(pod.get("containers") or [])] if isinstance(c, dict)
    ]
    return sorted({str(c.get("image")) for c in containers if c.get("image")})


def _template(rs: Mapping[str, Any]) -> str:
    """The pod template without the hash label: equal templates mean "nothing but the revision"."""
    tpl = json.loads(json.dumps(_dict(rs, "spec", "template")))
    labels = _dict(tpl, "metadata", "labels")
    labels.pop(POD_HASH, None)
    return json.dumps(tpl, sort_keys=True)


def _owned(ro: Mapping[str, Any], replica_sets: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The rollout's ReplicaSets: by owner reference (uid, else name), or, for one without owner
    references, by the rollout's selector labels."""
    meta = _meta(ro)
    ns, name, uid = meta.get("namespace"), meta.get("name"), meta.get("uid")
    selector = _dict(ro, "spec", "selector", "matchLabels")
    out = []
    for rs in replica_sets:
        rmeta = _meta(rs)
        if rmeta.get("namespace") != ns:
            continue
        refs = [r for r in rmeta.get("ownerReferences") or [] if isinstance(r, dict) and r.get("kind") == "Rollout"]
        if refs:
            if any((r.get("uid") == uid) if (uid and r.get("uid")) else r.get("name") == name for r in refs):
                out.append(rs)
        elif selector and all((rmeta.get("labels") or {}).get(k) == v for k, v in selector.items()):
            out.append(rs)
    return out


def _step(ro: Mapping[str, Any]) -> str | None:
    strategy = _dict(ro, "spec", "strategy")
    status = _dict(ro, "status")
    if "blueGreen" in strategy:
        return "blue-green"
    steps = _dict(strategy, "canary").get("steps") or []
    idx = status.get("currentStepIndex")
    if not steps or not isinstance(idx, int):
        return None
    if idx >= len(steps):
        return f"all {len(steps)} steps done"
    step = steps[idx] if isinstance(steps[idx], dict) else {}
    kind = next(iter(step), "step")
    what = f"setWeight {step[kind]}" if kind == "setWeight" else kind
    weight = _dict(status, "canary", "weights", "canary").get("weight")
    at = f", canary weight {weight}%" if isinstance(weight, int) else ""
    return f"step {idx + 1}/{len(steps)} ({what}){at}"


@dataclass(frozen=True)
class _RolloutChange:
    when: float  # newest ReplicaSet creation, for ordering
    text: str


def _rollout_change(ro: Mapping[str, Any], owned: list[Mapping[str, Any]], since: float) -> _RolloutChange | None:
    meta, status = _meta(ro), _dict(ro, "status")
    by_hash = {str((_meta(rs).get("labels") or {}).get(POD_HASH)): rs for rs in owned}
    ordered = sorted(owned, key=_revision)
    current = by_hash.get(str(status.get("currentPodHash"))) or (ordered[-1] if ordered else None)
    stable = by_hash.get(str(status.get("stableRS")))
    new = [rs for rs in owned if (_created(rs) or 0) >= since]
    phase = str(status.get("phase") or "")
    aborted = bool(status.get("abort"))
    in_flight = (current is not None and stable is not None and current is not stable) or phase in IN_FLIGHT_PHASES
    # A rollback or a promotion reuses a ReplicaSet: Argo's Progressing condition says when it moved.
    progressing = next(
        (c for c in status.get("conditions") or [] if isinstance(c, dict) and c.get("type") == "Progressing"), {}
    )
    moved = ts(progressing.get("lastUpdateTime"))
    moved_in_window = moved is not None and moved >= since
    if not new and not in_flight and not aborted and not moved_in_window:
        return None
    name = f"{meta.get('namespace')}/{meta.get('name')}"
    if current is None:
        return _RolloutChange(0.0, f"{literal(name)}: {literal(phase or 'no phase')}, no ReplicaSets found")
    rev = _revision(current)
    parts = [f"{literal(name)} revision {rev}"]
    created = _created(current)
    if created is not None and created >= since:
        parts[0] += f" created {hhmm(created)} UTC"
    prev = stable if stable is not None and stable is not current else None
    if prev is None:
        older = [rs for rs in ordered if _revision(rs) < rev]
        prev = older[-1] if older else None
    images = _images(current)
    if prev is not None and _images(prev) != images:
        was = ", ".join(_images(prev)) or "none"
        parts.append(f"image {literal(_cut(', '.join(images)))} (revision {_revision(prev)}: {literal(_cut(was))})")
    elif prev is not None and _template(prev) != _template(current):
        parts.append(f"same image as revision {_revision(prev)}, pod spec changed (args, env or weights)")
    else:
        parts.append(f"image {literal(_cut(', '.join(images) or 'none'))}")
    step = _step(ro)
    if step:
        parts.append(step)
    if phase:
        parts.append(literal(phase))
    if aborted:
        parts.append("*aborted*")
    if moved_in_window and moved is not None and not (created is not None and created >= since):
        parts.append(f"{literal(str(progressing.get('reason') or 'progressed'))} at {hhmm(moved)} UTC")
    others = [rs for rs in new if rs is not current]
    if others:
        revs = ", ".join(str(_revision(rs)) for rs in sorted(others, key=_revision))
        parts.append(f"also created in the window: revision {revs}")
    last_move = moved if moved is not None and moved_in_window else 0.0
    when = max([_created(rs) or 0.0 for rs in new] + [last_move, created or 0.0])
    return _RolloutChange(when, ", ".join(parts))


async def rollouts(client: Cluster, since: float, limit: int, namespaces: Sequence[str]) -> list[str]:
    """Rollouts with a ReplicaSet created since ``since``, or a canary or blue-green still in flight.

    Read only in ``namespaces`` (where rollout-abort acts, policies/levers.yaml): a Rollout's and a
    ReplicaSet's pod template carries env values, so Firebreak is granted them there only (deploy/rbac)."""
    if not namespaces:
        return ["no namespaces to read Rollouts in (policies/levers.yaml names none for rollout-abort)"]
    version = await client.served_version("argoproj.io", ROLLOUT_VERSIONS, "rollouts")
    if version is None:
        return ["Argo Rollouts is not installed here (no rollouts.argoproj.io API)"]
    ros: list[dict[str, Any]] = []
    replica_sets: list[dict[str, Any]] = []
    for ns in sorted(set(namespaces)):
        ros += await client.list_all(f"/apis/argoproj.io/{version}/namespaces/{ns}/rollouts")
        replica_sets += await client.list_all(f"/apis/apps/v1/namespaces/{ns}/replicasets", {"labelSelector": POD_HASH})
    changes = [c for ro in ros if (c := _rollout_change(ro, _owned(ro, replica_sets), since)) is not None]
    if not changes:
        return [f"no new revision, none in flight ({len(ros)} rollout{'s' if len(ros) != 1 else ''})"]
    changes.sort(key=lambda c: c.when, reverse=True)
    return [c.text for c in changes[:limit]] + _more(limit, len(changes), "rollouts")


# ------------------------------------------------------------------------------- node layer


def _spread_line(what: str, values: Mapping[str, str | None], total: int, limit: int) -> str:
    counts = rules.spread(values)
    missing = total - sum(counts.values())
    if not counts:
        return ""
    if len(counts) == 1:
        ((v, n),) = counts.items()
        where = f"all {n} GPU nodes" if not missing else f"{n} of {total} GPU nodes"
        return f"{what} {literal(v)} on {where}"
    odd = rules.minority(values, limit)
    shown = []
    for v, n in counts.most_common():
        names = odd.get(v)
        tail = f" ({literal(', '.join(names))}{', …' if len(names) < n else ''})" if names else ""
        shown.append(f"{literal(v)} on {n} node{'s' if n != 1 else ''}{tail}")
    line = f"*{what} skew*: {'; '.join(shown)}"
    return line + (f"; {missing} without it" if missing else "")


async def nodes(
    client: Cluster,
    pol: ChangedPolicy,
    selector: str,
    since: float,
    hours: float,
    quarantine: QuarantinePolicy | None = None,
) -> list[str]:
    items = await client.list_all("/api/v1/nodes", {"labelSelector": selector})
    if not items:
        return [f"no GPU nodes (none labelled {literal(selector)})"]
    labels = {str(_meta(n).get("name")): (_meta(n).get("labels") or {}) for n in items}
    total = len(labels)
    out = []
    drivers = {name: lb.get(pol.driver_label) for name, lb in labels.items()}
    out.append(
        _spread_line("driver", drivers, total, pol.max_items)
        or f"no GPU node has the {literal(pol.driver_label)} label (is GPU Feature Discovery running?)"
    )
    images = {name: next((lb[k] for k in pol.node_image_labels if lb.get(k)), None) for name, lb in labels.items()}
    out.append(
        _spread_line("node image", images, total, pol.max_items)
        or f"no GPU node has a node image label ({literal(', '.join(pol.node_image_labels))})"
    )
    kernels = {str(_meta(n).get("name")): _dict(n, "status", "nodeInfo").get("kernelVersion") for n in items}
    if len(rules.spread(kernels)) > 1:
        out.append(_spread_line("kernel", kernels, total, pol.max_items))
    if quarantine is not None:
        out.extend(_out_of_service(items, quarantine, since, hours, pol.max_items))
    joined = sorted(str(_meta(n).get("name")) for n in items if (_created(n) or 0.0) >= since)
    if joined:
        names = ", ".join(joined[: pol.max_items]) + (", …" if len(joined) > pol.max_items else "")
        plural = "s" if len(joined) != 1 else ""
        out.append(f"{len(joined)} GPU node{plural} joined in the last {rules.hours_label(hours)}: {literal(names)}")
    return out


def _out_of_service(
    items: Sequence[Mapping[str, Any]], pol: QuarantinePolicy, since: float, hours: float, limit: int
) -> list[str]:
    """Who took GPU nodes out (cordons and fences by anyone: levers/outofservice.py), and which of
    them in the window (by the managedFields time or the taint's timeAdded)."""
    found = outofservice.out_of_service([dict(n) for n in items], pol.taint_key, pol.dedicated_taints)
    if not found:
        return []
    line = f"{len(found)} of {len(items)} GPU nodes can't take work: {literal(outofservice.by_who(found, limit))}"
    recent = [o for o in found if any(c.since is not None and c.since >= since for c in o.causes)]
    if recent:
        line += f"; in the last {rules.hours_label(hours)}: {literal(outofservice.by_who(recent, limit))}"
    return [line]


# ------------------------------------------------------------------------------- warning events


def _event_time(ev: Mapping[str, Any]) -> float | None:
    times = [
        ts(ev.get("lastTimestamp")),
        ts(ev.get("eventTime")),
        ts(_dict(ev, "series").get("lastObservedTime")),
        ts(_meta(ev).get("creationTimestamp")),
    ]
    known = [t for t in times if t is not None]
    return max(known) if known else None


def _event_first(ev: Mapping[str, Any]) -> float | None:
    """When the event was first seen: core/v1 firstTimestamp, else events.k8s.io's eventTime (a
    series' first occurrence), else when the Event object was made."""
    for t in (ev.get("firstTimestamp"), ev.get("eventTime"), _meta(ev).get("creationTimestamp")):
        if (at := ts(t)) is not None:
            return at
    return None


def _event_count(ev: Mapping[str, Any]) -> int:
    for n in (_dict(ev, "series").get("count"), ev.get("count")):
        if isinstance(n, int) and n > 0:
            return n
    return 1


def _objects(n: int) -> str:
    return f"{n} object" + ("" if n == 1 else "s")


async def events(client: Cluster, since: float, hours: float, limit: int) -> list[str]:
    """Warning events (core/v1) seen since ``since``, one line per object (involvedObject, or
    events.k8s.io's regarding) and reason: how many, first and last seen, the latest message. The
    event recorder keeps one Event object per message, so a pod's BackOff with another exit code is
    another object: they are counted together. The most frequent first, at most ``limit`` lines,
    then one line for the rest by reason: a storm on many pods is a count, not a page of lines."""
    items = await client.list_all("/api/v1/events", {"fieldSelector": "type=Warning"})
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for ev in items:
        when = _event_time(ev)
        if when is None or when < since:
            continue
        reason = str(ev.get("reason") or "(no reason)")
        obj = _dict(ev, "involvedObject") or _dict(ev, "regarding")
        ref = f"{obj.get('kind', '?')} " + "/".join(str(p) for p in (obj.get("namespace"), obj.get("name")) if p)
        g = groups.setdefault((ref, reason), {"count": 0, "first": when, "last": 0.0, "message": ""})
        g["count"] += _event_count(ev)
        g["first"] = min(g["first"], _event_first(ev) or when)
        if when >= g["last"]:
            g["last"], g["message"] = when, str(ev.get("message") or ev.get("note") or "")
    if not groups:
        ttl = " (the API server keeps events for its --event-ttl, 1h by default)" if hours > 1 else ""
        return [f"no Warning events in the last {rules.hours_label(hours)}{ttl}"]
    ordered = sorted(groups.items(), key=lambda kv: (-kv[1]["count"], -kv[1]["last"], kv[0]))
    out = []
    for (ref, reason), g in ordered[:limit]:
        first, last = hhmm(g["first"]), hhmm(g["last"])
        seen = f"at {last} UTC" if first == last else f"first {first}, last {last} UTC"
        msg = f": {_cut(g['message'], 140)}" if g["message"] else ""
        out.append(f"{literal(reason)} ×{g['count']} on {literal(ref)}, {seen}{literal(msg)}")
    rest: dict[str, list[int]] = {}  # reason: [events, objects]
    for (_, reason), g in ordered[limit:]:
        r = rest.setdefault(reason, [0, 0])
        r[0] += g["count"]
        r[1] += 1
    if rest:
        by = sorted(rest.items(), key=lambda kv: (-kv[1][0], kv[0]))
        said = "; ".join(f"{literal(reason)} ×{n} on {_objects(k)}" for reason, (n, k) in by[:3])
        out.append(f"… and {len(ordered) - limit} more: {said}" + ("; …" if len(by) > 3 else ""))
    return out


# ------------------------------------------------------------------------------- firebreak's levers


def _last_move(r: LeverRequest) -> float:
    return max(t for t in (r.created_at, r.approved_at, r.started_at, r.finished_at, r.undone_at) if t is not None)


def _cells_of(svc: Services, r: LeverRequest) -> set[str]:
    """The cells a request changed: its own, and the cell a route-weight backend names."""
    out = {r.cell}
    backend = r.params.get("backend")
    if r.lever == "route-weight" and isinstance(backend, str):
        cell = svc.policy.levers.route_weight.cell_of(backend)
        if cell:
            out.add(cell)
    return out


@dataclass
class LeverChanges:
    """What `changed` may show of Firebreak's levers: ``shown``, by cell ("fleet" for a fleet-context
    request no cell is named in), and the cells where another private incident acted (``hidden``)."""

    shown: dict[str, list[LeverRequest]]
    hidden: set[str]


async def _private(svc: Services, ids: set[str]) -> set[str]:
    """Those of ``ids`` that are private incidents; one that can't be read counts as private (a
    private incident's levers name which tenant or sandbox a security incident is about)."""
    found = set()
    for inc_id in sorted(ids):
        inc = await repo(svc).get(inc_id)
        if inc is None or inc.private:
            found.add(inc_id)
    return found


async def lever_changes(svc: Services, incident: str, since: float) -> LeverChanges:
    """Firebreak's lever requests that acted (or were asked to) since ``since``, by the cells they
    touched, in this incident and every other open one. Another private incident's requests are
    only counted as "a private incident acted here": its channel is the only place for their detail."""
    moved = [r for r in await lever_store(svc).moved_since(since) if not r.dry_run and r.state not in NOT_CHANGES]
    counted = await repo(svc).which_open(sorted({r.incident for r in moved})) | {incident}
    private = await _private(svc, {r.incident for r in moved if r.incident in counted} - {incident})
    found: dict[str, list[LeverRequest]] = {}
    hidden: set[str] = set()
    for r in moved:
        if r.incident not in counted or _last_move(r) < since:
            continue
        cells = _cells_of(svc, r)
        if len(cells) > 1:
            cells.discard("fleet")
        for cell in cells:
            if r.incident in private:
                hidden.add(cell)
            else:
                found.setdefault(cell, []).append(r)
    for reqs in found.values():
        reqs.sort(key=_last_move, reverse=True)
    return LeverChanges(found, hidden)


def lever_line(r: LeverRequest) -> str:
    params = " ".join(f"{k}={v}" for k, v in sorted(r.params.items()))
    where = "fleet context, " if r.cell == "fleet" else ""
    what = f"{r.id} {r.lever} {_cut(r.target, 80)}" + (f" {_cut(params, 80)}" if params else "")
    return f"{literal(what)} ({where}{r.incident}): {r.state} {hhmm(_last_move(r))} UTC"


# ------------------------------------------------------------------------------- demand


def _by_cell(got: Vector | Scalar) -> dict[str, float]:
    if not isinstance(got, Vector):
        raise Unreadable("the demand query returns a scalar, not one series per cell (sum by (cell))")
    out: dict[str, float] = {}
    for s in got.samples:
        cell = s.labels.get("cell")
        if cell and not math.isnan(s.value):
            out[cell] = out.get(cell, 0.0) + s.value
    return out


async def demand(
    prom: PromQuery, query: str, now: float, hours: float, timeout: float | None = None
) -> dict[str, rules.Demand]:
    """Every cell's request rate H hours ago and now (Unreadable when Prometheus can't say)."""
    before_at = now - hours * 3600
    got_before, got_now = await asyncio.gather(prom.query(query, before_at, timeout), prom.query(query, now, timeout))
    answers = []
    for got in (got_before, got_now):
        if isinstance(got, Failed):
            raise Unreadable(str(got))
        if not isinstance(got, (Vector, Scalar)):
            raise Unreadable("the demand query does not return an instant vector")
        answers.append(_by_cell(got))
    before, after = answers
    return {c: rules.Demand(before.get(c), after.get(c)) for c in sorted({*before, *after})}


def demand_line(cell: str, d: rules.Demand | None, hours: float, query: str) -> str:
    if d is None or (d.before is None and d.now is None):
        return f"no data (no series for this cell from `{literal(_cut(query, 80))}`)"
    h = rules.hours_label(hours)
    if d.before is None:
        return f"{rules.rate(d.now)} now; no data {h} ago"
    if d.now is None:
        return f"no data now; {rules.rate(d.before)} {h} ago"
    return f"{rules.rate(d.now)} now vs {rules.rate(d.before)} {h} ago ({rules.percent_change(d)})"
