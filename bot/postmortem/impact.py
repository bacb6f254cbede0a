"""Impact start, found rather than guessed.

For each alert attached to the incident, its rule's expression (the `g0.expr` of its
`generatorURL`, Prometheus's graph link) is evaluated as a range query over the 24 hours before
its `startsAt`, one point a minute. Only the series that are the alert's own count: Prometheus
makes an alert's labels from its series' (without `__name__`) plus the rule's and its external
labels, so a series whose every label is the alert's is one the alert fired from; another GPU's
or node's series returned by the same expression is another alert's business. The start of the
LAST continuous run of points at which the alert's series were present (a gap of more than one
step ends a run) is when that alert's condition began. Impact start is the earliest of those, the
alerts' `startsAt` and the declaration, unless `postmortem impact <time> <evidence>` set it.

Alerts that share an expression are evaluated with one range query (per 24 hours of their
`startsAt`), each judged on its own series up to its own `startsAt`; the evidence line is the
earliest run among them.

A run that does not reach `startsAt` (the expression was false there, in this Prometheus) is
reported and not used: it would date an earlier, unrelated blip. When Prometheus can't be
asked, or the URL has no expression, the evidence says so for that alert.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from urllib.parse import parse_qs, urlsplit

from bot.postmortem.figures import hhmm, parse_time
from bot.prom import Failed, Matrix, PromQuery, Result, Vector, Why
from bot.signals.models import AlertRecord

LOOKBACK_S = 24 * 3600
STEP_S = 60.0
# Beyond the query's own timeout, how long to wait for a query still queued for a worker thread.
GRACE_S = 1.0


class Found(str, Enum):
    """What evaluating one expression gave."""

    run = "run"  # a run of true points that reaches startsAt: its start is evidence
    not_true = "not_true"  # no series at startsAt (maybe earlier ones): not used
    no_series = "no_series"  # no series at all in the 24 h
    no_expr = "no_expr"  # the generatorURL carries no g0.expr
    no_start = "no_start"  # startsAt is missing or not a time
    failed = "failed"  # Prometheus did not answer (unreachable, timeout, rejected…)
    not_configured = "not_configured"  # PROMETHEUS_URL is not set


@dataclass(frozen=True)
class Evidence:
    """One expression (and the alerts that share it) and what Prometheus said about it."""

    alertnames: tuple[str, ...]
    alerts: int
    expr: str | None
    starts_at: float | None  # the earliest startsAt among them
    found: Found
    run_start: float | None = None  # the last run's first true point
    run_end: float | None = None  # …and its last (at or after startsAt when found is run)
    whole_window: bool = False  # true at the first point looked at: it may have begun earlier
    reason: str = ""  # Prometheus's failure, or what is wrong with the URL or startsAt
    run_to: float | None = None  # the startsAt of the alert whose run this is (None: starts_at)

    @property
    def first_true(self) -> float | None:
        """The time this evidence dates the condition from (None: no usable run)."""
        return self.run_start if self.found is Found.run else None

    def sentence(self) -> str:
        """What was found, in one line (Markdown; the expression in a code span)."""
        code = f"`{_code(self.expr)}`" if self.expr else ""
        to = self.run_to if self.run_to is not None else self.starts_at
        started = f"startsAt {hhmm(to)}" if to is not None else "no startsAt"
        match self.found:
            case Found.run:
                assert self.run_start is not None and to is not None
                if self.run_start >= to:
                    return f"{code} turned true at its {started}; no earlier run"
                since = "at least since" if self.whole_window else "since"
                return f"{code} true {since} {hhmm(self.run_start)} without a break to its {started}" + (
                    " (true throughout the 24 h looked at)" if self.whole_window else ""
                )
            case Found.not_true:
                assert self.run_start is not None and self.run_end is not None
                return (
                    f"{code} returned no series at its {started} in this Prometheus (last true "
                    f"{hhmm(self.run_start)}–{hhmm(self.run_end)}); not used"
                )
            case Found.no_series:
                return f"{code} returned no series in the 24 h before its {started} in this Prometheus; not used"
            case Found.no_expr:
                return f"its generatorURL has no expression (g0.expr) to evaluate; its {started} stands"
            case Found.no_start:
                return f"{code} not evaluated: {self.reason}"
            case Found.failed:
                return f"{code} not evaluated: {self.reason}; its {started} stands"
            case _:
                return f"{code} not evaluated: PROMETHEUS_URL is not set; its {started} stands"


def _code(expr: str) -> str:
    # One line, and no backtick that would end the code span early.
    return " ".join(expr.split()).replace("`", "'")


def expr_of(generator_url: str) -> str | None:
    """The expression of Prometheus's graph link (`…/graph?g0.expr=<url-encoded>&g0.tab=1`)."""
    if not generator_url:
        return None
    try:
        query = urlsplit(generator_url).query
    except ValueError:
        return None
    got = parse_qs(query).get("g0.expr")
    expr = got[0].strip() if got else ""
    return expr or None


def last_run(times: Sequence[float], step: float) -> tuple[float, float] | None:
    """The last run of ``times`` (sorted or not) in which no two neighbours are more than one
    ``step`` apart: (its first, its last); None when there are none."""
    pts = sorted(set(times))
    if not pts:
        return None
    end = start = pts[-1]
    for t in reversed(pts[:-1]):
        if start - t > step * 1.5:  # more than one step apart (points sit a step apart, give or take)
            break
        start = t
    return start, end


def window(starts_at: float, step: float = STEP_S) -> tuple[float, float]:
    """The points looked at: a step apart on the step's own grid, from 24 h before ``starts_at``
    to the first point at or after it (so a condition true at startsAt has a point there)."""
    end = math.ceil(starts_at / step) * step
    return end - LOOKBACK_S - step, end


def matches(series: Mapping[str, str], alert: Mapping[str, str]) -> bool:
    """Is ``series`` one the alert with ``alert``'s labels fired from? Its every label (but the
    metric name, which an alert drops) is the alert's; the alert has more (the rule's, external)."""
    return all(alert.get(k) == v for k, v in series.items() if k != "__name__")


def judge(
    result: Result, starts_at: float, step: float = STEP_S, labels: Mapping[str, str] | None = None
) -> tuple[Found, float | None, float | None, bool]:
    """(what was found, the last run's start and end, whether it fills the whole window): the
    points of ``window(starts_at)``, of the series that match ``labels`` (None: every series)."""
    first, last = window(starts_at, step)
    if isinstance(result, Matrix):
        own = [s for s in result.series if labels is None or matches(s.labels, labels)]
        times = [t for s in own for t, _ in s.points if first - step / 2 <= t <= last + step / 2]
    elif isinstance(result, Vector):  # a range query answers a matrix; anything else is no run
        times = []
    else:
        return Found.failed, None, None, False
    run = last_run(times, step)
    if run is None:
        return Found.no_series, None, None, False
    start, end = run
    if end < last - step * 1.5:  # not true at (or a step before) startsAt's point
        return Found.not_true, start, end, False
    return Found.run, start, end, start <= first + step / 2


@dataclass(frozen=True)
class _Group:
    """Alerts of one expression whose startsAt lie within LOOKBACK_S of the first: one range query."""

    expr: str
    members: tuple[tuple[float, AlertRecord], ...]  # (startsAt, alert), earliest first

    @property
    def alertnames(self) -> tuple[str, ...]:
        return tuple(sorted({a.alertname for _, a in self.members}))

    @property
    def starts_at(self) -> float:
        return self.members[0][0]

    @property
    def last_starts_at(self) -> float:
        return self.members[-1][0]


def group(alerts: Sequence[AlertRecord]) -> tuple[list[_Group], list[Evidence]]:
    """Alerts with an expression and a startsAt, by expression (split so that one query spans at
    most two days); the rest as evidence already."""
    by_expr: dict[str, list[tuple[float, AlertRecord]]] = {}
    done: list[Evidence] = []
    for a in alerts:
        expr = expr_of(a.generator_url)
        at = parse_time(a.starts_at)
        if expr is None:
            done.append(Evidence((a.alertname,), 1, None, at, Found.no_expr))
        elif at is None:
            given = a.starts_at.strip() and not a.starts_at.startswith("0001-")  # Go's zero time: none
            why = f"its startsAt `{_code(a.starts_at)}` is not a time" if given else "it has no startsAt"
            done.append(Evidence((a.alertname,), 1, expr, None, Found.no_start, reason=why))
        else:
            by_expr.setdefault(expr, []).append((at, a))
    groups: list[_Group] = []
    for expr, members in by_expr.items():
        batch: list[tuple[float, AlertRecord]] = []
        for m in sorted(members, key=lambda m: (m[0], m[1].fingerprint)):
            if batch and m[0] - batch[0][0] > LOOKBACK_S:
                groups.append(_Group(expr, tuple(batch)))
                batch = []
            batch.append(m)
        groups.append(_Group(expr, tuple(batch)))
    return groups, _merge(done)


def _merge(items: list[Evidence]) -> list[Evidence]:
    """Evidence without an evaluation, one line per (alertname, kind): a storm is one line."""
    out: dict[tuple[str, Found, str], Evidence] = {}
    for e in items:
        key = (e.alertnames[0], e.found, e.reason)
        seen = out.get(key)
        if seen is None:
            out[key] = e
        else:
            at = min((t for t in (seen.starts_at, e.starts_at) if t is not None), default=None)
            out[key] = Evidence(seen.alertnames, seen.alerts + 1, seen.expr, at, seen.found, reason=seen.reason)
    return list(out.values())


async def _range(prom: PromQuery, g: _Group, timeout: float) -> Result:
    first, last = window(g.starts_at)[0], window(g.last_starts_at)[1]
    try:
        return await asyncio.wait_for(prom.query_range(g.expr, first, last, STEP_S, timeout), timeout + GRACE_S)
    except TimeoutError:
        return Failed(Why.TIMEOUT, f"waited {timeout:g}s")


# Which alert's finding a group's evidence line shows: a run (the earliest), then a not-true run,
# then none.
_RANK = {Found.run: 0, Found.not_true: 1, Found.no_series: 2, Found.failed: 3}


def _judged(g: _Group, got: Result) -> Evidence:
    """The group's evidence: each alert judged on its own series up to its own startsAt; the
    earliest run among them (else the first alert's finding)."""
    if isinstance(got, Failed):
        reason = str(got)
    elif not isinstance(got, Matrix | Vector):
        reason = f"Prometheus answered a {type(got).__name__.lower()}, not points over time"
    else:
        reason = ""
    best: tuple[tuple[int, float], float, tuple[Found, float | None, float | None, bool]] | None = None
    for at, a in g.members:
        judged = judge(got, at, labels=a.labels)
        key = (_RANK[judged[0]], judged[1] if judged[0] is Found.run and judged[1] is not None else at)
        if best is None or key < best[0]:
            best = (key, at, judged)
    assert best is not None  # a group has at least one alert
    _, to, (found, start, end, whole) = best
    return Evidence(g.alertnames, len(g.members), g.expr, g.starts_at, found, start, end, whole, reason, run_to=to)


async def evaluate(prom: PromQuery | None, alerts: Sequence[AlertRecord], timeout: float) -> list[Evidence]:
    """Each distinct expression evaluated once (concurrently), in a stable order: by startsAt, then
    alertname."""
    groups, evidence = group(alerts)
    if prom is None:
        evidence += [Evidence(g.alertnames, len(g.members), g.expr, g.starts_at, Found.not_configured) for g in groups]
    else:
        answers = await asyncio.gather(*(_range(prom, g, timeout) for g in groups))
        evidence += [_judged(g, got) for g, got in zip(groups, answers, strict=True)]
    return sorted(evidence, key=lambda e: (e.starts_at if e.starts_at is not None else math.inf, e.alertnames))


@dataclass(frozen=True)
class ImpactStart:
    """When impact began and how that was found. ``source``: "override" (`postmortem impact`),
    "expression" (an alert's expression), "startsAt" (an alert's), or "declaration"."""

    at: float
    source: str
    evidence: tuple[Evidence, ...]
    by_alert: str | None = None  # the alertname(s) whose expression or startsAt decided it

    def how(self) -> str:
        match self.source:
            case "expression":
                return f"from the expression of `{self.by_alert}` evaluated in Prometheus"
            case "startsAt":
                return f"the startsAt of `{self.by_alert}` (no expression showed an earlier start)"
            case "declaration":
                return "the declaration (no alert showed an earlier start)"
            case _:
                return "set with `postmortem impact`"


def earliest(evidence: Sequence[Evidence], declared: float) -> ImpactStart:
    """The earliest of the expressions' runs, the alerts' startsAt and the declaration (ties go to
    the better evidence: an expression, then a startsAt)."""
    candidates: list[tuple[float, int, str, str | None]] = [(declared, 2, "declaration", None)]
    for e in evidence:
        names = ", ".join(e.alertnames)
        if e.first_true is not None:
            candidates.append((e.first_true, 0, "expression", names))
        if e.starts_at is not None:
            candidates.append((e.starts_at, 1, "startsAt", names))
    at, _, source, name = min(candidates, key=lambda c: (c[0], c[1]))
    return ImpactStart(at, source, tuple(evidence), name)
