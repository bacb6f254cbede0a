"""Issue 35 item 3: nobody outside the `publish` seat (roles.yaml: @ml-ic, @ml-comms or the on-call)
speaks to stakeholders as Firebreak. Anyone may declare and so hold the IC seat of their own
incident; their `update` stays in the incident channel and the reply says who may publish. A public
update carries no link but the policy's (comms.yaml public.links: the status page) and the
incident's own channel."""

from __future__ import annotations

import pytest

from tests.support.harness import audit_entries
from tests.support.workspace import GROUPS, OUTSIDER

TEXT = "update Chat API, us-east: elevated latency, investigating"
COMMS = GROUPS["ml-comms"][0]


async def _stakeholder_texts(app) -> list[str]:
    return [m["text"] for m in app.slack.messages(app.stakeholders)]


@pytest.mark.stakeholders
async def test_a_self_declared_ic_outside_the_publish_seat_stays_in_the_incident_channel(app):
    inc = await app.declare("latency", sev=2, cells=("us-east-3",), user=OUTSIDER)
    out = await app.run(TEXT, user=OUTSIDER, channel=inc.channel_id)
    assert out.startswith("Update posted."), out
    assert "Not posted to the stakeholder channel" in out, out
    assert "@ml-ic" in out and "@ml-comms" in out and "on-call for us-east-3" in out, out
    assert await _stakeholder_texts(app) == []
    assert any("elevated latency" in m["text"] for m in app.slack.messages(inc.channel_id))
    [entry] = [e for e in await audit_entries(app, inc.id) if e["action"] == "command.update"]
    assert entry["detail"]["stakeholder_allowed"] is False
    assert entry["detail"]["publish"] == "not_eligible"


@pytest.mark.stakeholders
async def test_a_comms_lead_seated_by_anyone_publishes_only_when_in_the_publish_seat(app):
    inc = await app.declare("latency", sev=2, cells=("us-east-3",))
    assert "is now" in await app.run(f"role comms <@{OUTSIDER}>", channel=inc.channel_id)
    out = await app.run(TEXT, user=OUTSIDER, channel=inc.channel_id)
    assert "Not posted to the stakeholder channel" in out, out
    assert await _stakeholder_texts(app) == []

    assert "is now" in await app.run(f"role comms <@{COMMS}>", channel=inc.channel_id)
    out = await app.run(TEXT, user=COMMS, channel=inc.channel_id)
    assert f"Also posted to <#{app.stakeholders}>." in out, out
    [public] = await _stakeholder_texts(app)
    assert "elevated latency, investigating" in public


@pytest.mark.stakeholders
async def test_when_slack_cannot_say_who_is_in_the_groups_nothing_is_published(app):
    inc = await app.declare("latency", sev=2, cells=("us-east-3",))
    assert "is now" in await app.run(f"role comms <@{COMMS}>", channel=inc.channel_id)
    app.slack.fail_next("usergroups.list", "ratelimited", times=10)
    app.clock.advance(600)  # past the group cache
    out = await app.run(TEXT, user=COMMS, channel=inc.channel_id)
    assert "Not posted to the stakeholder channel" in out and "Slack didn't say" in out, out
    assert await _stakeholder_texts(app) == []


@pytest.mark.stakeholders
@pytest.mark.parametrize(
    "link",
    [
        "https://evil.example/login",
        "http://status.example.com/",  # not the allowed scheme
        "https://status.example.com.evil.example/",  # the allowed host as a prefix of another
        "https://status.example.com@evil.example/",  # userinfo: the host is evil.example
        "www.evil.example",
        "evil.example/reset-password",
        "HTTPS://EVIL.EXAMPLE",
    ],
)
async def test_a_bare_link_off_the_allowlist_is_refused_and_nothing_is_posted(app, link):
    inc = await app.declare("latency", sev=2, cells=("us-east-3",))
    before = len(app.slack.calls_to("chat.postMessage"))
    out = await app.run(f"update Chat API, us-east: reset your password at {link}", channel=inc.channel_id)
    assert out.startswith("Not posted: a public update links only to"), out
    assert "https://status.example.com/" in out and "public.links" in out, out
    assert len(app.slack.calls_to("chat.postMessage")) == before
    assert (await app.incident(inc.id)).last_update_text is None


@pytest.mark.stakeholders
async def test_the_status_page_and_the_incidents_own_channel_may_be_linked(app):
    inc = await app.declare("latency", sev=2, cells=("us-east-3",))
    own = f"https://acme.slack.com/archives/{inc.channel_id}"
    out = await app.run(
        f"update Chat API, us-east: see https://status.example.com/incidents/42 and {own}", channel=inc.channel_id
    )
    assert f"Also posted to <#{app.stakeholders}>." in out, out
    [public] = await _stakeholder_texts(app)
    assert "https://status.example.com/incidents/42" in public
