"""A security alert's incident is private: a private channel, its on-call invited, nothing in the
stakeholder channel; the security channel's line says no more than it did."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.support.harness import RunningApp, start_app
from tests.support.signals import CELL_A, ONCALL_A, TOKEN, incidents, payload, policy_dir, post, settle, texts, wire
from tests.support.workspace import GROUPS


@pytest.fixture
async def app(slack, redis_url, clock, tmp_path: Path) -> AsyncIterator[RunningApp]:
    security = slack.add_channel("security", is_private=True)
    stakeholders = slack.add_channel("stakeholders")
    running = await start_app(
        slack,
        redis_url,
        clock,
        alertmanager_token=TOKEN,
        firebreak_policy_dir=policy_dir(tmp_path),
        firebreak_security_channel=security,
        firebreak_stakeholder_channel=stakeholders,
    )
    running.security, running.stakeholders = security, stakeholders
    yield running
    await running.stop()


async def test_a_security_alert_opens_a_private_channel_and_tells_no_stakeholder(app):
    alert = wire("WeightExfilSuspected", cell=CELL_A, severity="ticket", category="security", summary="Unusual egress")
    status, _ = await post(app, payload([alert]))
    assert status == 200
    [inc] = await settle(app, lambda: incidents(app))
    [line] = await settle(app, lambda: _some(texts(app, app.security)))
    assert inc.private and inc.holder("ic") == ONCALL_A
    ch = app.slack.channel(inc.channel_id)
    # Invited: the on-call IC and everyone the security seat's group holds (roles.yaml: @ml-security).
    assert ch.is_private and set(ch.members) == {"UBOT", ONCALL_A, *GROUPS["ml-security"]}, ch.members
    [create] = app.slack.calls_to("conversations.create")
    assert create.args["is_private"] == "true"
    # Someone not invited can neither see nor join it.
    assert ch.name not in [c.name for c in app.slack.state.channels.values() if not c.is_private]
    with pytest.raises(Exception, match="not_in_channel"):
        app.slack.state.user_message(inc.channel_id, "U_OUTSIDER", "what's this?")
    # The security channel's line is what it was: the cell, the incident, its alert names.
    assert line == (
        f":lock: Security alert in `us-east-1`: {inc.id} (SEV1) opened in <#{inc.channel_id}>. "
        "Firing: `WeightExfilSuspected` ×1. No other incident is open for this cell."
    ), line
    assert "Unusual egress" not in line

    # The IC's channel work stays in the channel; a Comms update is not published; the IC's is.
    await app.run("role comms <@UCOMMS>", user=ONCALL_A, channel=inc.channel_id)
    await app.run("sev 1 exfil confirmed", user=ONCALL_A, channel=inc.channel_id)
    comms = await app.run("update Chat is degraded in us-east", user="UCOMMS", channel=inc.channel_id)
    assert f"Not posted to the stakeholder channel: {inc.id} is private" in comms, comms
    assert app.slack.messages(app.stakeholders) == []
    # The IC posting an update is the one decision that tells stakeholders.
    ic = await app.run("update Chat is degraded in us-east", user=ONCALL_A, channel=inc.channel_id)
    assert "Also posted to" in ic, ic
    [public] = [m["text"] for m in app.slack.messages(app.stakeholders)]
    assert public.startswith(f":mega: *{inc.id}* (us-east) update at ") and public.endswith(
        ": Chat is degraded in us-east"
    )
    await app.run("resolved", user=ONCALL_A, channel=inc.channel_id)
    assert len(app.slack.messages(app.stakeholders)) == 1


async def _some(items):
    return items or None
