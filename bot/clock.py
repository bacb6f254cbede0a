"""Time source. Injected everywhere so tests can move time without sleeping."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch (UTC)."""


class SystemClock:
    def now(self) -> float:
        return time.time()


class ManualClock:
    """A clock that only moves when told to (tests, game days)."""

    def __init__(self, start: float = 1_790_000_000.0) -> None:
        self._t = start

    def now(self) -> float:
        return self._t

    def advance(self, seconds: float) -> None:
        self._t += seconds

    def set(self, t: float) -> None:
        self._t = t


def iso(ts: float | None) -> str | None:
    """UTC ISO-8601 with a Z, second precision."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def hhmm(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%H:%M")


def ymd(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y%m%d")
