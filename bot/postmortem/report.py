"""`firebreak report [--since YYYY-MM-DD]`: resolved incidents clustered by root-cause class (the
`class: <name>` of `cause root`; none: "unclassified"), with counts, median TTD and TTR and the
GPU-hours lost per class, as a Markdown table. The figures are the postmortem's own
(document.Figures), so a class's numbers add up to its postmortems'."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime

from bot.core.services import Services
from bot.core.timeline import code
from bot.postmortem import document
from bot.postmortem import figures as fig
from bot.postmortem.impact import Found
from bot.postmortem.store import resolved_incident_ids

CONCURRENCY = 8  # postmortems gathered at once (each may ask Prometheus)
ALL = "all"
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class BadDate(ValueError):
    pass


def parse_since(text: str) -> float:
    """`YYYY-MM-DD` -> that day's 00:00 UTC (epoch seconds); BadDate says what to type."""
    t = text.strip()
    try:
        if not _DATE.fullmatch(t):
            raise ValueError
        d = date.fromisoformat(t)
    except ValueError:
        raise BadDate(f"--since {t[:40]!r} is not a date: use YYYY-MM-DD, like 2026-10-01") from None
    return datetime(d.year, d.month, d.day, tzinfo=UTC).timestamp()


@dataclass(frozen=True)
class Resolved:
    """One resolved incident's figures, as its postmortem has them."""

    incident: str
    root_class: str
    ttd: float
    ttr: float
    gpu_hours: float | None  # None: no `assess --gpus N` recorded
    impact_from_prometheus: bool  # False: an alert's expression could not be evaluated


@dataclass(frozen=True)
class ClassRow:
    name: str
    incidents: tuple[str, ...]
    median_ttd: float
    median_ttr: float
    gpu_hours: float
    gpu_recorded: int  # of the incidents, how many recorded GPUs


async def _one(svc: Services, inc_id: str, limit: asyncio.Semaphore) -> Resolved | None:
    async with limit:
        try:
            g = await document.gather(svc, inc_id)
        except document.NotFound:
            return None
    f = document.Figures.of(g)
    if f.ttr is None:
        return None
    cls, _ = document.root_cause(g.pm)
    asked = all(e.found not in (Found.failed, Found.not_configured) for e in g.impact.evidence)
    return Resolved(inc_id, cls or fig.UNCLASSIFIED, f.ttd, f.ttr, f.gpu.total if f.gpu.recorded else None, asked)


async def gather(svc: Services, since: float | None) -> list[Resolved]:
    """The resolved incidents' figures (resolved at or after ``since``), by incident number."""
    limit = asyncio.Semaphore(CONCURRENCY)
    ids = await resolved_incident_ids(svc, since)
    got = await asyncio.gather(*(_one(svc, i, limit) for i in ids))
    return [r for r in got if r is not None]


def _row(name: str, members: Sequence[Resolved]) -> ClassRow:
    recorded = [r.gpu_hours for r in members if r.gpu_hours is not None]
    return ClassRow(
        name,
        tuple(r.incident for r in members),
        fig.median([r.ttd for r in members]) or 0.0,
        fig.median([r.ttr for r in members]) or 0.0,
        sum(recorded),
        len(recorded),
    )


def classes(resolved: Sequence[Resolved]) -> list[ClassRow]:
    """A row per class (most incidents first, then by name; unclassified last), then ``all``."""
    by: dict[str, list[Resolved]] = {}
    for r in resolved:
        by.setdefault(r.root_class, []).append(r)
    named = sorted((n for n in by if n != fig.UNCLASSIFIED), key=lambda n: (-len(by[n]), n))
    if fig.UNCLASSIFIED in by:
        named.append(fig.UNCLASSIFIED)
    rows = [_row(n, by[n]) for n in named]
    if resolved:
        rows.append(_row(ALL, resolved))
    return rows


def _gpu(row: ClassRow) -> str:
    if not row.gpu_recorded:
        return "not recorded"
    total = fig.thousands(row.gpu_hours)
    n = len(row.incidents)
    return total if row.gpu_recorded == n else f"{total} ({row.gpu_recorded} of {n} recorded)"


def render(resolved: Sequence[Resolved], since: float | None) -> str:
    scope = f"resolved since {fig.utc(since)[:10]}" if since is not None else "all resolved incidents"
    lines = [f"# Incidents by root-cause class ({scope})", ""]
    if not resolved:
        return "\n".join([*lines, "No resolved incidents.", ""])
    lines += [
        "| root-cause class | incidents | median TTD | median TTR | GPU-hours lost | which |",
        "|---|---|---|---|---|---|",
    ]
    for r in classes(resolved):
        name = f"**{r.name}**" if r.name == ALL else code(r.name)
        lines.append(
            document.row(
                name,
                str(len(r.incidents)),
                fig.duration(r.median_ttd),
                fig.duration(r.median_ttr),
                _gpu(r),
                ", ".join(r.incidents),
            )
        )
    lines += [
        "",
        "TTD and TTR run from impact start (see each postmortem: `firebreak postmortem INC-n`). "
        "A class is the `class: <name>` that starts `cause root`.",
    ]
    guessed = [r.incident for r in resolved if not r.impact_from_prometheus]
    if guessed:
        lines += [
            "",
            "Impact start without Prometheus (unreachable, or PROMETHEUS_URL unset), so from startsAt or the "
            f"declaration: {', '.join(guessed)}.",
        ]
    return "\n".join(lines) + "\n"


async def report(svc: Services, since: float | None) -> str:
    return render(await gather(svc, since), since)
