"""Issue 36 item 9: /metrics and /readyz when what they read fails. The store down is one warning
line and a NaN gauge; a bug in the code that reads it is a NaN gauge too, but logged with its
traceback, not passed off as the store being down. A readiness check's bug is "not ready", with its
traceback in the log."""

from __future__ import annotations

import aiohttp
import structlog

from tests.support.telemetry import is_nan, scrape


async def test_a_bug_behind_a_gauge_is_logged_with_its_traceback(app):
    scheduler = app.services.scheduler
    real = scheduler.pending_count

    async def buggy(kind: str) -> int:
        raise TypeError("a bug, not the store")

    scheduler.pending_count = buggy
    try:
        with structlog.testing.capture_logs() as logged:
            page = await scrape(app)
    finally:
        scheduler.pending_count = real
    assert is_nan(page.value("firebreak_approvals_pending"))
    (line,) = [e for e in logged if e["event"] == "metrics_refresh_failed"]
    assert line["log_level"] == "error" and line.get("exc_info") is True, line


async def test_a_bug_in_a_readiness_check_is_not_ready_and_logged_with_its_traceback(app, monkeypatch):
    async def buggy() -> list[str] | None:
        raise TypeError("a bug in the check")

    monkeypatch.setattr(app.services.clusters, "contexts", buggy)
    with structlog.testing.capture_logs() as logged:
        async with aiohttp.ClientSession() as s, s.get(app.url + "/readyz") as r:
            status, body = r.status, await r.json()
    assert status == 503 and body["selftest"] == "the check failed: TypeError", body
    (line,) = [e for e in logged if e["event"] == "readiness_check_failed"]
    assert line["exc_info"] is True and line["check"] == "selftest", line
