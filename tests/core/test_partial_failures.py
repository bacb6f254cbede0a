"""Slack failing part-way through a command: the reply says what exists and what is missing."""

from __future__ import annotations

import pytest

from tests.support.core import IC
from tests.support.harness import T0, audit_entries


@pytest.mark.parametrize(
    "method, error, says",
    [
        ("chat.postMessage", "msg_too_long", "the card could not be posted (msg_too_long)"),
        ("conversations.invite", "user_disabled", "you could not be invited to the channel (user_disabled)"),
        ("pins.add", "not_pinnable", "the card could not be pinned (not_pinnable)"),
    ],
)
async def test_declare_after_the_incident_is_saved_reports_the_missing_step_honestly(app, method, error, says):
    app.slack.fail_next(method, error)
    out = await app.run("declare GPU hang --sev 2", user=IC)
    inc = await app.incident("INC-1")
    assert out.startswith(
        f"INC-1 (SEV2) is open in <#{inc.channel_id}> and you are IC, but {says}; run `/incident status` there."
    ), out
    assert "Nothing further was changed" not in out
    [e] = await audit_entries(app, "INC-1")
    assert e["action"] == "command.declare" and e["detail"]["result"] == "ok" and e["detail"]["problems"] == [says]
    # The after-request hooks ran for the saved incident: its first reminder is scheduled.
    assert await app.services.scheduler.pending("cadence.remind", "INC-1") == T0 + 900
    assert "INC-1" in await app.run("status", user=IC, channel=inc.channel_id)
