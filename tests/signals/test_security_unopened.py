"""A security alert reaches the security channel whatever happens to its incident: opened with the
manifest's scopes as a private incident; when it cannot be opened (a scope the workspace did not
grant, Slack failing), the security channel still gets the alert and why, once for all the job's
tries; and when the incident channel refuses the summary, the security channel's line still goes."""

from __future__ import annotations

from fbworld.slack.scopes import manifest_scopes
from tests.support.harness import audit_entries
from tests.support.signals import CELL_A, ONCALL_A, incidents, payload, post, settle, summaries, texts, wire
from tests.support.workspace import GROUPS

HAND = "open it by hand: `/incident declare &lt;title&gt; --sev 1 --cell us-east-1 --private`"


def security_alert():
    return wire("WeightExfilSuspected", cell=CELL_A, severity="ticket", category="security", summary="Unusual egress")


async def _some(items):
    return items or None


async def _every_try(app) -> None:
    """Let the job's lease run out and tick, until the scheduler has given up on it (3 tries)."""
    for _ in range(3):
        app.clock.advance(app.services.scheduler.lease + 1)
        await app.tick()


async def test_a_security_alert_opens_its_private_incident_with_the_manifest_scopes(app):
    assert app.slack.scopes == tuple(manifest_scopes()) and "groups:write" in app.slack.scopes
    status, _ = await post(app, payload([security_alert()]))
    assert status == 200
    [inc] = await settle(app, lambda: incidents(app))
    ch = app.slack.channel(inc.channel_id)
    assert inc.private and ch.is_private and set(ch.members) == {"UBOT", ONCALL_A, *GROUPS["ml-security"]}
    assert ch.pins and len(summaries(app, inc.channel_id)) == 1
    [line] = await settle(app, lambda: _some(texts(app, app.security)))
    assert line.startswith(f":lock: Security alert in `us-east-1`: {inc.id} (SEV1) opened in <#{inc.channel_id}>.")
    [opened] = [e for e in await audit_entries(app, inc.id) if e["action"] == "command.alerts"]
    assert "problems" not in opened["detail"] and opened["detail"]["security_channel"] == "posted"


async def test_without_groups_write_the_alert_and_the_reason_reach_the_security_channel_once(app):
    # The workspace installed the app from a manifest without groups:write (the one before issue 33).
    app.slack.scopes = tuple(s for s in manifest_scopes() if s != "groups:write")
    status, _ = await post(app, payload([security_alert()]))
    assert status == 200
    [line] = await settle(app, lambda: _some(texts(app, app.security)))
    assert line == (
        ":lock: Security alert in `us-east-1`: Firebreak could not open its incident. Slack refused to create "
        "the channel (missing_scope); no incident was opened. Firing: `WeightExfilSuspected` ×1. "
        f"No other incident is open for this cell. Firebreak tries again; until a line here says the incident "
        f"opened, {HAND}"
    ), line
    assert "Unusual egress" not in line
    await _every_try(app)
    # Each try asked Slack and was refused; the security channel heard it once.
    creates = app.slack.calls_to("conversations.create")
    assert len(creates) == 3 and all(c.args["is_private"] == "true" for c in creates)
    assert texts(app, app.security) == [line]
    assert await incidents(app) == []
    entries = await audit_entries(app)
    tries = [e["detail"] for e in entries if e["action"] == "command.alerts"]
    assert [t["security_channel"] for t in tries] == ["posted"] * 3
    assert all("missing_scope" in t["not_opened"] for t in tries)
    assert [e for e in entries if e["action"] == "scheduler.job_dead"]


async def test_slack_failing_to_create_the_channel_is_told_then_the_incident_opens(app):
    # Slack's edge answers 503 to the first try (and slack_sdk's two retries of it), then recovers.
    app.slack.http_error_next("conversations.create", 503, times=3)
    status, _ = await post(app, payload([security_alert()]))
    assert status == 200
    [notice] = await settle(app, lambda: _some(texts(app, app.security)))
    assert "could not open its incident. Slack refused to create the channel (http_503)" in notice, notice
    app.clock.advance(app.services.scheduler.lease + 1)
    [inc] = await settle(app, lambda: incidents(app))
    lines = await settle(app, lambda: _some(texts(app, app.security)[1:]))
    assert texts(app, app.security) == [notice, *lines] and len(lines) == 1
    assert lines[0].startswith(f":lock: Security alert in `us-east-1`: {inc.id} (SEV1) opened in <#{inc.channel_id}>.")
    assert inc.private and app.slack.channel(inc.channel_id).is_private


async def test_the_security_line_goes_even_when_the_incident_channel_refuses_the_summary(app):
    # The card and then the summary are refused; the security channel's line is the third post.
    app.slack.fail_next("chat.postMessage", "fatal_error", times=2)
    status, _ = await post(app, payload([security_alert()]))
    assert status == 200
    [line] = await settle(app, lambda: _some(texts(app, app.security)))
    [inc] = await incidents(app)
    assert line.startswith(f":lock: Security alert in `us-east-1`: {inc.id} (SEV1) opened")
    assert summaries(app, inc.channel_id) == []
    app.clock.advance(app.services.scheduler.lease + 1)
    await settle(app, lambda: _some(summaries(app, inc.channel_id)))
    assert texts(app, app.security) == [line]  # the retry posts the summary, not the line again
