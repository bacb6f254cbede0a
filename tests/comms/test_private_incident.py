"""`declare --private`: a private channel, the IC (and the cells' on-call) invited, nothing in the
stakeholder channel unless the IC posts an update."""

from __future__ import annotations

import pytest

from tests.support.harness import audit_entries
from tests.support.workspace import GROUPS

pytestmark = pytest.mark.stakeholders


async def test_a_private_declare_makes_a_private_channel_and_tells_no_stakeholder(app):
    out = await app.run("declare Suspected token leak --sev 2 --cell us-east-3 --private", user="U_IC")
    assert out.startswith("Declared INC-1 (SEV2)") and "The channel is private" in out, out
    inc = await app.incident("INC-1")
    ch = app.slack.channel(inc.channel_id)
    # The IC and the security seat's group (roles.yaml: @ml-security) are invited, nobody else.
    assert inc.private and ch.is_private and set(ch.members) == {"UBOT", "U_IC", *GROUPS["ml-security"]}
    [declared] = [e for e in await audit_entries(app, "INC-1") if e["action"] == "command.declare"]
    assert declared["detail"]["private"] is True

    # SEV changes, a Comms update, cadence reminders and resolve: none reaches stakeholders.
    await app.run("role comms <@UCOMMS>", user="U_IC", channel=inc.channel_id)
    await app.run("sev 1 tokens were used", user="U_IC", channel=inc.channel_id)
    said = await app.run("update Chat is degraded in us-east", user="UCOMMS", channel=inc.channel_id)
    assert "Not posted to the stakeholder channel: INC-1 is private" in said, said
    app.clock.advance(3600)
    await app.tick()
    await app.run("resolved", user="U_IC", channel=inc.channel_id)
    assert app.slack.messages(app.stakeholders) == []
    assert any("Update" in m["text"] for m in app.slack.messages(inc.channel_id))  # the channel has it


async def test_a_public_declare_is_unchanged(app):
    await app.run("declare Chat latency --sev 2 --cell us-east-3", user="U_IC")
    inc = await app.incident("INC-1")
    assert not inc.private and not app.slack.channel(inc.channel_id).is_private
    [create] = app.slack.calls_to("conversations.create")
    assert "is_private" not in create.args
