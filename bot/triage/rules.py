"""Pure rules of triage and what changed: a query's answer as a table figure, how figures are
shown, skew, and the capacity-shift rule (a cell's demand rose while another drained)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from bot.policy.queries import Unit
from bot.prom import Failed, Matrix, Result, Scalar, Text, Vector

FAILED = "failed"
NO_DATA = "no data"


# ------------------------------------------------------------------------------- triage figures


class State(str, Enum):
    ok = "ok"
    no_data = "no_data"  # the query matched no series
    failed = "failed"  # no answer, or an answer that is not one number per cell


@dataclass(frozen=True)
class Figure:
    state: State
    value: float | None = None
    series: int = 0  # how many series the answer had (the largest value is shown)
    reason: str = ""  # why it failed


def figure(got: Result) -> Figure:
    """One table cell from one query's answer. No series is `no data`, never 0; an answer that
    is not an instant vector or a scalar is `failed`, with why."""
    if isinstance(got, Failed):
        return Figure(State.failed, reason=str(got))
    if isinstance(got, Scalar):
        return Figure(State.ok, got.value, 1)
    if isinstance(got, Vector):
        if not got.samples:
            return Figure(State.no_data)
        values = got.values
        real = [v for v in values if not math.isnan(v)]
        return Figure(State.ok, max(real) if real else math.nan, len(values))
    what = "a range vector" if isinstance(got, Matrix) else "a string" if isinstance(got, Text) else "no number"
    return Figure(State.failed, reason=f"the query returns {what}, not one number per cell")


def _sig(v: float, digits: int = 3) -> str:
    """``v`` to ``digits`` significant figures, without an exponent for everyday sizes."""
    if v == 0:
        return "0"
    mag = math.floor(math.log10(abs(v)))
    decimals = max(0, digits - 1 - mag)
    if mag >= 6 or mag < -4:
        return f"{v:.{digits - 1}e}"
    return f"{v:.{decimals}f}"


def show(f: Figure, unit: Unit) -> str:
    """A figure as the table shows it, with its unit: `1.24 s`, `14.4x`, `97%`, `0.52/s`, `3`."""
    if f.state is State.failed:
        return FAILED
    if f.state is State.no_data or f.value is None:
        return NO_DATA
    v = f.value
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if unit is Unit.seconds:
        return f"{_sig(v * 1000)} ms" if 0 < abs(v) < 1 else f"{_sig(v)} s"
    if unit is Unit.burn:
        return f"{_sig(v)}x"
    if unit is Unit.percent:
        return f"{_sig(v * 100)}%"
    if unit is Unit.per_second:
        return f"{_sig(v)}/s"
    if unit is Unit.count:
        return str(round(v)) if abs(v - round(v)) < 0.01 else _sig(v)
    return _sig(v)


def table(head: str, columns: Sequence[str], rows: Sequence[tuple[str, Sequence[str]]]) -> str:
    """A fixed-width table: the first column left-aligned, the others right-aligned."""
    label_w = max([len(head), *(len(r[0]) for r in rows)])
    widths = [max([len(c), *(len(r[1][i]) for r in rows)]) for i, c in enumerate(columns)]
    lines = ["  ".join([head.ljust(label_w), *(c.rjust(w) for c, w in zip(columns, widths, strict=True))])]
    for label, cells in rows:
        lines.append("  ".join([label.ljust(label_w), *(c.rjust(w) for c, w in zip(cells, widths, strict=True))]))
    return "\n".join(line.rstrip() for line in lines)


# ------------------------------------------------------------------------------- what changed


def hours_label(hours: float) -> str:
    return f"{hours:g}h"


def spread(values: Mapping[str, str | None]) -> Counter[str]:
    """How many items carry each value (items without one are left out)."""
    return Counter(v for v in values.values() if v)


def minority(values: Mapping[str, str | None], limit: int) -> dict[str, list[str]]:
    """For every value but the most common one: the items carrying it (at most ``limit`` each)."""
    counts = spread(values)
    if len(counts) < 2:
        return {}
    common = counts.most_common(1)[0][0]
    out: dict[str, list[str]] = {}
    for item, v in sorted(values.items()):
        if v and v != common:
            names = out.setdefault(v, [])
            if len(names) < limit:
                names.append(item)
    return out


class Trend(str, Enum):
    rose = "rose"
    new = "new"  # idle H hours ago, serving now (a rise from nothing)
    drained = "drained"
    steady = "steady"
    idle = "idle"
    unknown = "unknown"  # no figure for one of the two times


@dataclass(frozen=True)
class Demand:
    """A cell's request rate (per second) H hours ago and now; None: no series then."""

    before: float | None
    now: float | None

    @property
    def change(self) -> float | None:
        """The relative change (0.45 = +45%); None when there is no base to compare with."""
        if self.before is None or self.now is None or self.before <= 0:
            return None
        return (self.now - self.before) / self.before


def _known(v: float | None) -> bool:
    return v is not None and not math.isnan(v)


def trend(d: Demand, rise: float, drop: float, idle: float) -> Trend:
    """rose: at least ``rise`` above the rate H hours ago; drained: at least ``drop`` below it;
    idle: below ``idle`` requests per second both times."""
    if not _known(d.before) or not _known(d.now):
        return Trend.unknown
    before, now = float(d.before or 0), float(d.now or 0)
    if before < idle:
        return Trend.new if now >= idle else Trend.idle
    if now >= before * (1 + rise):
        return Trend.rose
    if now <= before * (1 - drop):
        return Trend.drained
    return Trend.steady


@dataclass(frozen=True)
class Shift:
    """``cell``'s demand rose while the ``drained`` cells' fell: capacity moved, not a regression."""

    cell: str
    demand: Demand
    drained: tuple[tuple[str, Demand], ...] = field(default_factory=tuple)


def capacity_shifts(
    demand: Mapping[str, Demand], cells: Iterable[str], *, rise: float, drop: float, idle: float
) -> list[Shift]:
    """Each of ``cells`` whose demand rose (or started) while some other cell, of the incident or
    not, drained over the same window. A rise with no drained cell anywhere is not a shift."""
    trends = {c: trend(d, rise, drop, idle) for c, d in demand.items()}
    out = []
    for cell in cells:
        if trends.get(cell) not in (Trend.rose, Trend.new):
            continue
        drained = tuple((c, demand[c]) for c in sorted(demand) if c != cell and trends[c] is Trend.drained)
        if drained:
            out.append(Shift(cell, demand[cell], drained))
    return out


def percent_change(d: Demand) -> str:
    ch = d.change
    if ch is None:
        return "new" if _known(d.now) and (d.now or 0) > 0 else "n/a"
    sign = "+" if ch >= 0 else "-"
    return f"{sign}{abs(ch) * 100:.0f}%"


def rate(v: float | None) -> str:
    return "no data" if v is None else f"{_sig(v)} req/s"
