"""/metrics, scraped over HTTP from the running app after driving it: every metric the
PrometheusRule (deploy/) and docs/operating.md name, with its labels and values."""

from __future__ import annotations

import re

import aiohttp

from bot.approvals.jobs import EXPIRE_JOB
from tests.support.harness import T0
from tests.support.levers import OPS, say
from tests.support.telemetry import Delta, is_nan, scrape

CQ = r"/clusterqueues/research-h100$"
HOLD = "lever kueue-hold research-h100 --cell us-east-3"
DRAIN = "lever kueue-hold-drain research-h100 --cell us-east-3"

# The names deploy/'s PrometheusRule and docs/operating.md use: all exposed from the start, even at zero.
NAMES = (
    "firebreak_requests_total",
    "firebreak_ack_seconds_bucket",
    "firebreak_lever_executions_total",
    "firebreak_approvals_pending",
    "firebreak_reminders_late_total",
    "firebreak_reminder_lateness_seconds_bucket",
    "firebreak_scheduler_lag_seconds_bucket",
    "firebreak_slack_api_errors_total",
    "firebreak_kube_api_errors_total",
)


async def test_every_metric_is_exposed_with_its_help(app):
    await app.declare()
    await app.tick()
    page = await scrape(app)
    for name in ("firebreak_ack_seconds", "firebreak_approvals_pending", "firebreak_scheduler_lag_seconds"):
        assert f"# HELP {name} " in page.text, name
    for name in ("firebreak_requests", "firebreak_lever_executions", "firebreak_slack_api_errors"):
        assert f"# TYPE {name}_total counter" in page.text, name
    assert "# TYPE firebreak_ack_seconds histogram" in page.text
    assert "# TYPE firebreak_approvals_pending gauge" in page.text
    # Families with labels show once something was counted; those used here are there.
    for name in ("firebreak_requests_total", "firebreak_ack_seconds_bucket", "firebreak_approvals_pending"):
        assert any(n == name for n, _ in page.samples), name


async def test_commands_are_counted_by_name_result_and_source_and_acks_timed(app):
    before = await scrape(app)
    inc = await app.declare(roles={"ops": OPS})  # declare, then `role ops`
    assert inc.id in await app.run("status", channel=inc.channel_id)
    await app.run("resolved", user="U0NOBODY", channel=inc.channel_id)  # not the IC: refused
    await app.run("sev banana", channel=inc.channel_id)  # a usage error: answered in the ack, not executed
    async with aiohttp.ClientSession() as s, s.post(app.url + "/slack/events", data=b"x") as r:
        assert r.status == 401  # not an ack
    await app.drain()
    d = Delta(before, await scrape(app))
    assert d("firebreak_requests_total", command="declare", result="ok", source="slash") == 1
    assert d("firebreak_requests_total", command="role", result="ok", source="slash") == 1
    assert d("firebreak_requests_total", command="status", result="ok", source="slash") == 1
    assert d("firebreak_requests_total", command="resolved", result="refused", source="slash") == 1
    assert not [ls for ls in d.moved("firebreak_requests_total") if ls["command"] == "sev"]
    # Five signed Slack requests were acknowledged (the 401 was not an ack), each well inside 3 s.
    acks = d("firebreak_ack_seconds_count")
    assert acks == 5
    assert d("firebreak_ack_seconds_bucket", le="3.0") == acks
    assert d("firebreak_ack_seconds_bucket", le="+Inf") == acks
    assert 0 < d("firebreak_ack_seconds_sum") < 3 * acks
    assert {"le"} == set(d.after.labelsets("firebreak_ack_seconds_bucket")[0])  # no other labels
    assert {"2.5", "3.0", "4.0"} <= {ls["le"] for ls in d.after.labelsets("firebreak_ack_seconds_bucket")}


async def test_lever_executions_by_lever_and_outcome_and_kube_errors_by_code(app, cells):
    before = await scrape(app)
    inc = await app.declare(roles={"ops": OPS})
    cells.east3.fail_next("GET", CQ, 500)  # a read: retried, and the lever goes on
    out = await say(app, HOLD, OPS, inc.channel_id)
    assert "applied and verified" in out, out
    out = await say(app, "undo REQ-1", OPS, inc.channel_id)
    assert "undone" in out, out
    cells.east3.fail_next("PATCH", CQ, 503)  # a write: not retried on a 5xx, so the lever fails
    out = await say(app, HOLD, OPS, inc.channel_id)
    assert "REQ-2" in out and "failed" in out, out
    d = Delta(before, await scrape(app))
    lever = "firebreak_lever_executions_total"
    assert d(lever, lever="kueue-hold", outcome="done/verified") == 1
    assert d(lever, lever="kueue-hold", outcome="undone") == 1
    assert d(lever, lever="kueue-hold", outcome="failed") == 1
    assert d(lever, lever="kueue-hold", outcome="done/unverified") == 0
    kube = "firebreak_kube_api_errors_total"
    assert d(kube, context="us-east-3", code="500") == 1
    assert d(kube, context="us-east-3", code="503") == 1
    assert sorted((ls["context"], ls["code"]) for ls in d.moved(kube)) == [("us-east-3", "500"), ("us-east-3", "503")]


async def test_kube_timeouts_and_unknown_credentials_are_codes_too(app, cells):
    before = await scrape(app)
    inc = await app.declare(roles={"ops": OPS})
    for _ in range(3):  # every attempt of the read times out (api_timeout_seconds is 2)
        cells.east3.delay_next("GET", CQ, seconds=3.5)
    out = await say(app, HOLD, OPS, inc.channel_id, timeout=30)
    assert "Timeout" in out, out
    d = Delta(before, await scrape(app))
    assert d("firebreak_kube_api_errors_total", context="us-east-3", code="timeout") == 3


async def test_approvals_pending_is_read_from_the_store_at_scrape(app, cells, clock):
    inc = await app.declare(roles={"ops": OPS, "comms": "U0COMMS"})
    assert (await scrape(app)).value("firebreak_approvals_pending") == 0
    out = await say(app, DRAIN, OPS, inc.channel_id)
    rid = re.search(r"REQ-\d+", out).group(0)
    assert "approv" in out.lower(), out
    # The count is the store's: another process's ballot shows here as well.
    await app.services.scheduler.schedule(EXPIRE_JOB, "REQ-99", T0 + 600, {"incident": "INC-99"})
    assert (await scrape(app)).value("firebreak_approvals_pending") == 2
    await app.services.scheduler.cancel(EXPIRE_JOB, "REQ-99")
    before = await scrape(app)
    assert before.value("firebreak_approvals_pending") == 1
    clock.advance(60)
    key = await app.press("lever.approve", rid, user="U_IC", channel=inc.channel_id)
    assert rid in await app.reply(key, timeout=15)
    await app.drain()
    after = await scrape(app)
    assert after.value("firebreak_approvals_pending") == 0
    executed = Delta(before, after)(
        "firebreak_lever_executions_total", lever="kueue-hold-drain", outcome="done/verified"
    )
    assert executed == 1


async def test_approvals_pending_is_nan_when_the_store_cannot_say(app):
    scheduler = app.services.scheduler
    real = scheduler.pending_count

    async def broken(kind: str) -> int:
        raise ConnectionError("store gone")

    scheduler.pending_count = broken
    try:
        page = await scrape(app)
    finally:
        scheduler.pending_count = real
    assert is_nan(page.value("firebreak_approvals_pending"))


async def test_reminder_lateness_late_reminders_and_scheduler_lag(app, clock):
    inc = await app.declare("GPU trouble", sev=2, cells=())
    assert inc.next_update_due == T0 + 900
    before = await scrape(app)
    clock.set(T0 + 900)  # on time
    assert await app.tick() >= 1
    clock.set(T0 + 1200 + 30)  # the escalation (due +5 min) runs 30 s late
    assert await app.tick() >= 1
    d = Delta(before, await scrape(app))
    late, lateness, lag = (
        "firebreak_reminders_late_total",
        "firebreak_reminder_lateness_seconds",
        "firebreak_scheduler_lag_seconds",
    )
    assert d(lateness + "_count", kind="remind") == 1 and d(lateness + "_sum", kind="remind") == 0
    assert d(late, kind="remind") == 0
    assert d(lateness + "_count", kind="escalate") == 1 and d(lateness + "_sum", kind="escalate") == 30
    assert d(late, kind="escalate") == 1
    assert d(lateness + "_bucket", kind="escalate", le="10.0") == 0
    assert d(lateness + "_bucket", kind="escalate", le="30.0") == 1
    assert d(lag + "_count", kind="cadence.remind") == 1 and d(lag + "_sum", kind="cadence.remind") == 0
    assert d(lag + "_count", kind="cadence.escalate") == 1 and d(lag + "_sum", kind="cadence.escalate") == 30
    assert d(lag + "_bucket", kind="cadence.remind", le="0.01") == 1


async def test_slack_api_errors_by_method_and_code_retried_ones_included(app, slack):
    inc = await app.declare()
    before = await scrape(app)
    slack.rate_limit_next("chat.postMessage", times=1, retry_after=1)
    slack.http_error_next("chat.postMessage", 500)
    out = await app.run("update Mitigation in progress, next update in 30 min", channel=inc.channel_id)
    assert "Traceback" not in out
    await app.drain()
    posted = [c for c in slack.calls_to("chat.postMessage") if "Mitigation in progress" in str(c.args.get("text"))]
    assert len(posted) == 3  # 429, 500, then the post: retried within bounds
    slack.fail_next("conversations.invite", "already_in_channel")  # an answer, not an error
    assert "now" in await app.run("role ops <@U0OPS>", channel=inc.channel_id)
    slack.fail_next("pins.add", "not_pinnable")  # a Slack error on a 200
    out = await app.run("declare Second incident --sev 3")
    assert "could not be pinned (not_pinnable)" in out, out
    await app.drain()
    d = Delta(before, await scrape(app))
    errors = "firebreak_slack_api_errors_total"
    assert d(errors, method="chat.postMessage", code="429") == 1
    assert d(errors, method="chat.postMessage", code="500") == 1
    assert d(errors, method="pins.add", code="not_pinnable") == 1
    assert d(errors, method="conversations.invite", code="already_in_channel") == 0
    assert {k for ls in d.after.labelsets(errors) for k in ls} == {"method", "code"}
