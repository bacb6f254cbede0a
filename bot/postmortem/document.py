"""The postmortem document: the facts gathered (``gather``), the figures worked out from them
(``Figures``, pure) and the Markdown (``render``, pure): six `## ` sections, Summary, What the
mitigations cost, Timeline, Detection gap, Trigger and root cause, Action items.

`firebreak postmortem INC-n` prints ``await build(svc, inc_id)``; `/incident postmortem` posts
the same bytes as a file (post.py). The output depends only on what is stored and, for an open
incident (a DRAFT, marked as one), on the injected clock: a resolved incident's postmortem is
the same whoever builds it and whenever.

Every piece of text a person or an alert wrote goes through ``md``: Slack's markup made inert
(bot.chat quote: entities decoded once, `&`, `<`, `>` escaped again, mass pings shown as typed),
mentions shown as `@U123`, folded onto one line (so nothing typed can start a `## ` heading or
a table row), backslashes escaped. Names and expressions go in code spans (``code``: one line,
no backtick), where quoting would show entities literally. Table rows (``row``) escape every
pipe of their cells.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.core.registry import Registry
from bot.core.services import Services
from bot.core.timeline import code, line, md, who
from bot.ids import SYSTEM_ACTOR
from bot.incidents.models import Incident, Status
from bot.incidents.store import repo
from bot.incidents.timeline import assessed_gpus
from bot.policy.roles import ROLES
from bot.postmortem import figures as fig
from bot.postmortem.impact import ImpactStart, earliest, evaluate
from bot.postmortem.store import ActionItem, PostmortemFacts, actions, facts
from bot.signals.models import AlertRecord
from bot.signals.store import store as signals_store
from levers.price import GPU_HOURS, figure
from levers.timeline import mitigations

SECTIONS = (
    "Summary",
    "What the mitigations cost",
    "Timeline",
    "Detection gap",
    "Trigger and root cause",
    "Action items",
)
SHIPPING_KINDS = ("alert", "runbook", "guardrail", "gameday")


class NotFound(Exception):
    """No such incident."""


# Text ---------------------------------------------------------------------------------------


def row(*cells: str) -> str:
    """A Markdown table row; a pipe inside a cell (prose or code span) is escaped, as GFM wants."""
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def _s(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


# The facts ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Gathered:
    """Everything the document shows, read once."""

    inc: Incident
    alerts: tuple[AlertRecord, ...]
    entries: tuple[dict[str, Any], ...]  # the incident's audit entries, in order
    pm: PostmortemFacts
    items: tuple[ActionItem, ...]
    impact: ImpactStart
    now: float
    registry: Registry  # how each capability's audit actions read on the timeline


async def gather(svc: Services, inc_id: str) -> Gathered:
    inc = await repo(svc).get(inc_id)
    if inc is None:
        raise NotFound(inc_id)
    alerts = sorted(
        (await signals_store(svc).alert_records(inc_id)).values(), key=lambda a: (a.received_at, a.fingerprint)
    )
    entries = tuple([e async for e in svc.audit.entries(inc_id)])
    pm = await facts(svc, inc_id)
    items = tuple(await actions(svc, inc_id))
    if pm.impact_override is not None:
        impact = ImpactStart(pm.impact_override.at, "override", ())
    else:
        evidence = await evaluate(svc.prometheus, alerts, svc.policy.queries.timeout_seconds)
        impact = earliest(evidence, inc.declared_at)
    return Gathered(inc, tuple(alerts), entries, pm, items, impact, svc.clock.now(), svc.registry)


# The figures ----------------------------------------------------------------------------------


def _ts(e: Mapping[str, Any]) -> float:
    return fig.parse_time(str(e.get("ts", ""))) or 0.0


@dataclass(frozen=True)
class Figures:
    impact_start: float
    detected: float
    detected_by: str | None  # the alertname whose arrival was the detection (None: the declaration)
    declared: float
    mitigated: float | None  # mitigated_at, else resolved_at (resolved without `mitigated`)
    resolved: float | None
    ttd: float
    ttm: float | None
    ttr: float | None
    gpu: fig.GpuHours
    gpu_until: float  # mitigation, or now for a draft not mitigated yet

    @classmethod
    def of(cls, g: Gathered) -> Figures:
        inc = g.inc
        # Detection: the first alert received, or the declaration when that came first (or alone).
        first = min(g.alerts, key=lambda a: (a.received_at, a.alertname), default=None)
        detected, detected_by = inc.detected_at, None
        if first is not None and first.received_at <= inc.detected_at:
            detected, detected_by = first.received_at, first.alertname
        mitigated = inc.mitigated_at if inc.mitigated_at is not None else inc.resolved_at
        start = g.impact.at
        until = mitigated if mitigated is not None else g.now
        return cls(
            impact_start=start,
            detected=detected,
            detected_by=detected_by,
            declared=inc.declared_at,
            mitigated=mitigated,
            resolved=inc.resolved_at,
            ttd=detected - start,
            ttm=None if mitigated is None else mitigated - start,
            ttr=None if inc.resolved_at is None else inc.resolved_at - start,
            gpu=fig.gpu_hours([(_ts(e), n) for e, n in assessed_gpus(g.entries)], start, until, g.pm.rework_hours),
            gpu_until=until,
        )


def root_cause(pm: PostmortemFacts) -> tuple[str | None, str | None]:
    """(the root-cause class, the root cause's text without its `class: <name>` prefix)."""
    c = pm.causes.get("root")
    if c is None:
        return None, None
    if c.root_class:
        return c.root_class, c.text.removeprefix(f"class: {c.root_class}").strip()
    return None, c.text


# The Markdown ---------------------------------------------------------------------------------


def render(g: Gathered) -> str:
    f = Figures.of(g)
    inc = g.inc
    lines = [f"# Postmortem: {inc.id} {md(inc.title)}", ""]
    if inc.is_open:
        lines += [
            f"> **DRAFT**: {inc.id} is {inc.status.value}, not resolved. Times and figures run to "
            f"{fig.utc(g.now)} and will change.",
            "",
        ]
    for title, body in (
        ("Summary", _summary(g, f)),
        ("What the mitigations cost", _mitigations(g, f)),
        ("Timeline", _timeline(g, f)),
        ("Detection gap", _detection(g, f)),
        ("Trigger and root cause", _causes(g)),
        ("Action items", _actions(g)),
    ):
        lines += [f"## {title}", "", *body, ""]
    return "\n".join(lines).rstrip("\n") + "\n"


async def build(svc: Services, inc_id: str) -> str:
    """The postmortem of ``inc_id`` as Markdown (NotFound when there is no such incident)."""
    return render(await gather(svc, inc_id))


def _when(ts: float | None, missing: str) -> str:
    return fig.utc(ts) if ts is not None else missing


def _sev_line(g: Gathered) -> str:
    inc = g.inc
    low = g.pm.sev_lowered
    if not low:
        return f"- SEV: SEV{inc.sev}"
    steps = "; ".join(f"SEV{c.from_} → SEV{c.to} by {who(c.by)} on {fig.utc(c.at)}: {md(c.reason)}" for c in low)
    return f"- SEV: SEV{inc.sev} (SEV{low[0].from_} during the incident; lowered in the postmortem: {steps})"


def _summary(g: Gathered, f: Figures) -> list[str]:
    inc = g.inc
    roles = ", ".join(f"{r} {who(inc.roles[r].user)}" for r in ROLES if r in inc.roles and r != "ic")
    status = inc.status.value + ("" if inc.status is Status.resolved else " (this postmortem is a DRAFT)")
    out = [
        f"- Incident: {inc.id}, {md(inc.title)}",
        _sev_line(g),
        f"- Cells: {', '.join(code(c) for c in inc.cells) or 'none named'}",
        f"- IC: {who(inc.holder('ic')) if inc.holder('ic') else 'nobody (the seat is empty)'}"
        + (f" · other roles: {roles}" if roles else ""),
        f"- Status: {status}",
        f"- Impact start: {fig.utc(f.impact_start)}, {g.impact.how()}",
    ]
    o = g.pm.impact_override
    if o is not None:
        out.append(f"  - set by {who(o.by)} on {fig.utc(o.set_at)}: {md(o.evidence)}")
    for e in g.impact.evidence:
        names = ", ".join(f"`{code(n)}`" for n in e.alertnames)
        count = f" ({_s(e.alerts, 'alert')})" if e.alerts > 1 else ""
        out.append(f"  - {names}{count}: {e.sentence()}")
    detected_how = f"first alert received, `{code(f.detected_by)}`" if f.detected_by else "the declaration"
    declarer = "opened by Alertmanager" if inc.declared_by == SYSTEM_ACTOR else f"declared by {who(inc.declared_by)}"
    if inc.mitigated_at is not None:
        mitigated = fig.utc(inc.mitigated_at)
    elif inc.resolved_at is not None:
        mitigated = "not marked (resolved without `mitigated`: the resolution stands in)"
    else:
        mitigated = "not yet"
    out += [
        f"- Detected: {fig.utc(f.detected)} ({detected_how})",
        f"- Declared: {fig.utc(f.declared)} ({declarer})",
        f"- Mitigated: {mitigated}",
        f"- Resolved: {_when(inc.resolved_at, 'not yet')}",
        "- "
        + " · ".join(
            [
                f"TTD {fig.duration(f.ttd)}",
                f"TTM {fig.duration(f.ttm)}" if f.ttm is not None else "TTM not yet (not mitigated)",
                f"TTR {fig.duration(f.ttr)}" if f.ttr is not None else "TTR not yet (not resolved)",
            ]
        )
        + " (each from impact start)",
        *_gpu_lines(g, f),
        "- Requests failed: "
        + (fig.thousands(g.pm.requests_failed) if g.pm.requests_failed is not None else "not recorded")
        + " · Tokens refunded: "
        + (fig.thousands(g.pm.tokens_refunded) if g.pm.tokens_refunded is not None else "not recorded")
        + (
            " (record them with `/incident postmortem impact-figures requests=N tokens=N`)"
            if g.pm.requests_failed is None or g.pm.tokens_refunded is None
            else ""
        ),
    ]
    return out


def _mitigations(g: Gathered, f: Figures) -> list[str]:
    """Each lever pulled (its write went out) and its price as stated before it acted, the GPU-hours
    they cost in all (unknown when any one is, never 0), apart from what the incident itself cost."""
    pulled = mitigations(g.entries)
    if not pulled:
        return ["- No lever was pulled (nothing written to a cluster)."]
    out = []
    hours: list[float | None] = []
    for m in pulled:
        where = f" ({code(m.cell)})" if m.cell else ""
        label = f"{code(m.request)} `{code(m.lever)}` {code(m.target)}{where}"
        if m.price is None:
            out.append(f"- {label}: price not stated (pulled before levers stated prices)")
            hours.append(None)
            continue
        out.append(f"- {label}: {md(m.price.text().removeprefix('Price: '))}")
        if any(c.unit == GPU_HOURS for c in m.price.costs):
            hours.append(m.price.total(GPU_HOURS))
    unknown = sum(1 for h in hours if h is None)
    known = sum(h for h in hours if h is not None)
    if not hours:
        total = "none (no lever pulled has a price in GPU-hours)"
    elif unknown:
        total = (
            f"unknown ({unknown} of {len(hours)} priced in GPU-hours could not be read; "
            f"the others add up to {figure(known, GPU_HOURS)})"
        )
    else:
        total = figure(known, GPU_HOURS)
    out.append(f"- GPU-hours the mitigations cost in all: {total}")
    lost = fig.thousands(f.gpu.total) if f.gpu.recorded else "not recorded"
    failed = fig.thousands(g.pm.requests_failed) if g.pm.requests_failed is not None else "not recorded"
    out.append(f"- Apart from what the incident cost (Summary): GPU-hours lost {lost} · requests failed {failed}")
    return out


def _gpu_lines(g: Gathered, f: Figures) -> list[str]:
    gpu = f.gpu
    until = "mitigation" if f.mitigated is not None else f"now, {fig.hhmm(f.gpu_until)} (not mitigated yet)"
    if not gpu.recorded:
        tail = (
            f"; the {g.pm.rework_hours:g} h of rework need a GPU count to multiply"
            if g.pm.rework_hours is not None
            else ""
        )
        return [f"- GPU-hours lost: not recorded (no `assess --gpus N` before mitigation){tail}"]
    out = [f"- GPU-hours lost: {fig.thousands(gpu.total)}"]
    for i, b in enumerate(gpu.burns):
        frm = f"impact start, {fig.hhmm(b.start)}" if i == 0 else fig.hhmm(b.start)
        to = fig.hhmm(b.end) if i + 1 < len(gpu.burns) else until
        out.append(
            f"  - {fig.thousands(b.gpus)} GPUs × {fig.duration(b.end - b.start)} (from {frm} to {to})"
            f" = {fig.thousands(b.gpu_hours)}"
        )
    if g.pm.rework_hours is not None and gpu.rework_gpus is not None:
        out.append(
            f"  - rework: {fig.thousands(gpu.rework_gpus)} GPUs × {g.pm.rework_hours:g} h of progress thrown away"
            f" = {fig.thousands(gpu.rework)}"
        )
    else:
        out.append("  - rework: not recorded (`/incident postmortem rework <hours>`, e.g. back to the last checkpoint)")
    return out


# Timeline -------------------------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class Event:
    at: float
    order: int  # ties: the first signal, then alerts, then the audit in its own order
    text: str = field(compare=False)


def phrase(e: dict[str, Any], registry: Registry) -> str | None:
    """One audit entry as a timeline line, as the capability that wrote it declared (None: not an
    event worth a line: a read, a refusal, a dry run, Firebreak's own bookkeeping). An action no
    capability declared reads as its name (bot/core/timeline.py)."""
    return line(registry.timelines, e)


def _alert_events(alerts: Sequence[AlertRecord]) -> list[Event]:
    """Each alertname's startsAt, arrival and resolve, one line per (time, what, alertname)."""
    groups: dict[tuple[float, int, str], int] = {}
    for a in alerts:
        starts = fig.parse_time(a.starts_at)
        if starts is not None:
            key = (float(int(starts)), 1, a.alertname)
            groups[key] = groups.get(key, 0) + 1
        key = (float(int(a.received_at)), 2, a.alertname)
        groups[key] = groups.get(key, 0) + 1
        if a.resolved_at is not None:
            key = (float(int(a.resolved_at)), 3, a.alertname)
            groups[key] = groups.get(key, 0) + 1
    verbs = {1: "started (its startsAt)", 2: "received by Firebreak", 3: "resolved (received by Firebreak)"}
    out = []
    for (at, kind, name), n in groups.items():
        count = f" ×{n}" if n > 1 else ""
        out.append(Event(at, kind, f"Alert `{code(name)}`{count} {verbs[kind]}"))
    return out


def _timeline(g: Gathered, f: Figures) -> list[str]:
    events = [Event(f.impact_start, 0, f"First signal (impact start): {g.impact.how()}")]
    events += _alert_events(g.alerts)
    for i, e in enumerate(g.entries):
        text = phrase(e, g.registry)
        if text is not None:
            events.append(Event(_ts(e), 10 + i, text))
    events.sort()
    return ["All times UTC.", "", *(f"- `{fig.clock_time(ev.at)}` {ev.text}" for ev in events)]


# Detection gap --------------------------------------------------------------------------------


def _detection(g: Gathered, f: Figures) -> list[str]:
    detected_how = f"first alert received, `{code(f.detected_by)}`" if f.detected_by else "the declaration"
    rows = [
        ("first signal (impact start)", f.impact_start, "", g.impact.how()),
        ("detection", f.detected, f"{fig.duration(f.detected - f.impact_start)} after the first signal", detected_how),
        ("declaration", f.declared, f"{fig.duration(f.declared - f.detected)} after detection", ""),
    ]
    out = ["| stage | time (UTC) | gap | how it is known |", "|---|---|---|---|"]
    out += [row(stage, fig.clock_time(at), gap, how) for stage, at, gap, how in rows]
    out += [
        "",
        f"Broken before anyone knew: {fig.duration(f.detected - f.impact_start)}; "
        f"before it was declared: {fig.duration(f.declared - f.impact_start)}.",
        "",
    ]
    why = g.pm.causes.get("detection")
    if why is None:
        out.append("Why detection took that long: missing: run `/incident cause detection <why>`.")
    else:
        out.append(f"Why detection took that long: {md(why.text)} ({who(why.by)}, {fig.utc(why.at)})")
    return out


# Trigger and root cause -----------------------------------------------------------------------


def _causes(g: Gathered) -> list[str]:
    trigger = g.pm.causes.get("trigger")
    root = g.pm.causes.get("root")
    cls, text = root_cause(g.pm)
    out = []
    if trigger is None:
        out.append("- Trigger: missing: run `/incident cause trigger <what set it off>`.")
    else:
        out.append(f"- Trigger: {md(trigger.text)} ({who(trigger.by)}, {fig.utc(trigger.at)})")
    if root is None:
        out.append("- Root cause: missing: run `/incident cause root class: <name> <why it could happen>`.")
    else:
        out.append(f"- Root cause: {md(text)} ({who(root.by)}, {fig.utc(root.at)})")
    if cls:
        out.append(f"- Root-cause class: {code(cls)}")
    else:
        out.append(
            f"- Root-cause class: {fig.UNCLASSIFIED} (start `cause root` with `class: <name>`, e.g. `class: driver`,"
            " so the quarterly report can cluster it)"
        )
    return out


# Action items ---------------------------------------------------------------------------------


def _actions(g: Gathered) -> list[str]:
    if not g.items:
        return [
            "No action items. Every postmortem produces at least one alert, runbook step, automation "
            'guardrail or game-day scenario: `/incident action <text> --owner @u --due YYYY-MM-DD --verify "<check>"'
            " --kind alert|runbook|guardrail|gameday`."
        ]
    out = [
        "| id | item | owner | due | verify | kind | state | evidence |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for it in g.items:
        state = f"done {fig.utc(it.done_at)[:10]}" if it.state == "done" and it.done_at else it.state
        out.append(row(it.id, md(it.text), who(it.owner), it.due, md(it.verify), it.kind, state, md(it.evidence)))
    done = sum(1 for it in g.items if it.state == "done")
    out += ["", f"{done} of {_s(len(g.items), 'item')} done."]
    if not any(it.kind in SHIPPING_KINDS for it in g.items):
        out += [
            "",
            "None of these is an alert, runbook step, guardrail or game-day scenario: add one "
            "(`--kind alert|runbook|guardrail|gameday`), so this incident changes the fleet.",
        ]
    return out
