"""The postmortem's figures, pure: durations (`TTD 2h 05m`), GPU-hours lost, medians and times.
No I/O, no clock: every input is passed in."""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

UNCLASSIFIED = "unclassified"


def duration(seconds: float) -> str:
    """`2h 05m`: whole hours and minutes, rounded to the nearest minute, half up (`-0h 05m` when negative)."""
    minutes = math.floor(abs(seconds) / 60 + 0.5)
    sign = "-" if seconds < 0 and minutes else ""
    return f"{sign}{minutes // 60}h {minutes % 60:02d}m"


def thousands(value: float) -> str:
    """`24,576`: rounded to a whole number (half up), with thousands separators."""
    return f"{math.floor(value + 0.5):,}"


def utc(ts: float) -> str:
    """`2026-11-30 03:10:00 UTC`."""
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def clock_time(ts: float) -> str:
    """`2026-11-30 03:10:00` (the timeline's column; the heading says UTC)."""
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


def hhmm(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%H:%M")


def parse_time(text: str) -> float | None:
    """An RFC 3339 / ISO-8601 time (Alertmanager's `startsAt` with nanoseconds, the audit's `ts`) as
    epoch seconds; None when it is not one, or is Go's zero time (`0001-01-01T00:00:00Z`)."""
    s = text.strip()
    if not s or s.startswith("0001-"):
        return None
    # Python reads at most microseconds: cut a longer fraction to six digits.
    s = re.sub(r"(\.\d{6})\d+", r"\1", s)
    try:
        dt = datetime.fromisoformat(s.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


@dataclass(frozen=True)
class Burn:
    """One `assess --gpus N` while it was in force: N GPUs from ``start`` to ``end``."""

    gpus: int
    start: float
    end: float

    @property
    def hours(self) -> float:
        return max(0.0, self.end - self.start) / 3600

    @property
    def gpu_hours(self) -> float:
        return self.gpus * self.hours


@dataclass(frozen=True)
class GpuHours:
    burns: tuple[Burn, ...]
    rework_hours: float | None
    rework_gpus: int | None  # the latest N in force, which the rework hours multiply

    @property
    def recorded(self) -> bool:
        return bool(self.burns)

    @property
    def rework(self) -> float:
        if self.rework_hours is None or self.rework_gpus is None:
            return 0.0
        return self.rework_gpus * self.rework_hours

    @property
    def total(self) -> float:
        return sum(b.gpu_hours for b in self.burns) + self.rework


def gpu_hours(
    assessed: Sequence[tuple[float, int]], impact_start: float, until: float, rework_hours: float | None
) -> GpuHours:
    """GPU-hours lost: each `assess --gpus N` (``assessed``: (time, N), in order) is in force from its
    time (the first from ``impact_start``) until the next one or ``until`` (mitigation); those
    after ``until`` never were. Plus the latest N in force × ``rework_hours`` (progress thrown away)."""
    before = sorted((t, n) for t, n in assessed if t <= until)
    burns: list[Burn] = []
    for i, (t, n) in enumerate(before):
        start = impact_start if i == 0 else t
        end = before[i + 1][0] if i + 1 < len(before) else until
        burns.append(Burn(n, min(start, end), end))
    latest = before[-1][1] if before else None
    return GpuHours(tuple(burns), rework_hours, latest)
