"""Input that never became a command is audited, with the incident of the channel it came from."""

from __future__ import annotations

from tests.support.core import BOB, IC, TITLE
from tests.support.harness import audit_entries


async def test_a_usage_error_in_an_incident_channel_belongs_to_that_incident(app):
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    out = await app.run("sev 9 worse", user=IC, channel=ch)
    assert "Usage: `/incident sev" in out
    e = (await audit_entries(app, "INC-1"))[-1]
    assert (e["action"], e["actor"], e["incident"]) == ("command.invalid", IC, "INC-1")
    assert e["detail"]["text"] == "sev 9 worse"
    await app.run("sev 9 worse", user=IC, channel="C_GENERAL")
    assert (await audit_entries(app))[-1]["incident"] is None


async def test_an_unknown_button_is_refused_and_audited_with_its_incident(app):
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    status, _, _ = await app.sender.action(  # Bolt routes by action id: no listener has this one
        "nobody.knows.this", "INC-1/x", user=BOB, channel=ch, response_url=app.slack.response_url("unknown")
    )
    assert status == 404
    assert await app.reply("unknown") == "That button is no longer handled by Firebreak."
    await app.drain()
    e = (await audit_entries(app, "INC-1"))[-1]
    assert (e["action"], e["actor"], e["detail"]) == ("button.unknown", BOB, {"action_id": "nobody.knows.this"})


async def test_a_forged_button_value_is_audited_with_its_incident(app):
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    await app.reply(await app.press("handoff.accept", "INC-1/garbage", user=BOB, channel=ch))
    e = (await audit_entries(app, "INC-1"))[-1]
    assert (e["action"], e["incident"]) == ("button.invalid", "INC-1")
