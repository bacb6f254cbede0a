"""Shared steps for the postmortem tests: incidents declared, mitigated and resolved over two days on
the ManualClock, through their commands (`firebreak report` reads them)."""

from __future__ import annotations

from typing import Any

from tests.support.harness import T0, RunningApp
from tests.support.signals import CELL_A, ONCALL_A, incidents, payload, post, settle, wire

DAY, HOUR = 86400.0, 3600.0
D2 = T0 + DAY  # 2026-12-01 03:10 UTC


async def _declared(
    app: RunningApp, title: str, gpus: int | None, mitigate_after: float, resolve_after: float, root: str | None
) -> str:
    start = app.clock.now()
    inc = await app.declare(title, sev=2)
    ch = inc.channel_id
    if gpus is not None:
        assert "Matrix says" in await app.run(f"assess --gpus {gpus}", channel=ch)
    app.clock.set(start + mitigate_after)
    assert "is now mitigated" in await app.run("mitigated", channel=ch)
    app.clock.set(start + resolve_after)
    assert "is now resolved" in await app.run("resolved", channel=ch)
    if root:
        assert "Root cause" in await app.run(f"cause root {root}", channel=ch)
    app.clock.set(start)
    return inc.id


async def resolved_incidents(app: RunningApp) -> list[str]:
    """INC-1 resolved on 11-30; INC-2..4 on 12-01; INC-5 still open."""
    app.clock.set(T0)
    ids = [await _declared(app, "driver hang one", 1000, HOUR, 2 * HOUR, "class: driver 550 hangs")]
    app.clock.set(D2)
    two = await _declared(app, "driver hang two", 2000, 0.5 * HOUR, HOUR, "class: driver 550 again")
    inc2 = await app.incident(two)
    app.clock.set(D2 + HOUR)
    out = await app.run("postmortem impact 2026-12-01T02:40Z loss flat from 02:40 (grafana)", channel=inc2.channel_id)
    assert "Impact start" in out, out
    app.clock.set(D2)
    ids += [two, await _declared(app, "east-west links flap", 500, 2 * HOUR, 3 * HOUR, "class: network cabling")]
    # Opened by an alert that started 10 minutes before it arrived; nobody names the root cause.
    alert = wire("TrainingStepStalled", cell=CELL_A, starts_at="2026-12-01T03:00:00Z", fingerprint="feed0001")
    assert (await post(app, payload([alert])))[0] == 200
    found = await settle(app, lambda: _opened(app))
    inc4 = found[-1]
    app.clock.set(D2 + HOUR)
    assert "is now resolved" in await app.run("resolved", user=ONCALL_A, channel=inc4.channel_id)
    ids.append(inc4.id)
    app.clock.set(D2)
    still_open = await app.declare("still burning", sev=3)
    assert still_open.id == "INC-5"
    return ids


async def _opened(app: RunningApp) -> list[Any] | None:
    found = await incidents(app)
    return found if len(found) == 4 else None
