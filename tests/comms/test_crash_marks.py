"""A process dying between "I'll post this" and the post does not lose the post.

The crash is real from the handler's point of view: the Slack call raises
CancelledError (what a killed task sees), so nothing after it runs (no post,
no dedupe "done", no scheduler ack). The next delivery must post, once.
"""

from __future__ import annotations

import pytest

from tests.support.comms import LEASE, TITLE, _msg, _warnings, escalations, kill_at_post, killed_tick, reminders
from tests.support.harness import MODES, T0, audit_entries

pytestmark = pytest.mark.parametrize("mode", MODES)  # over HTTP and over Socket Mode (docs/operating.md)


async def test_reminder_redelivered_after_a_crash_mid_post_is_posted_once(app, clock):
    inc = await app.declare(TITLE, sev=2, cells=())
    clock.set(T0 + 900)
    kill_at_post(app, ":alarm_clock:", landed=False)
    await killed_tick(app)
    assert reminders(app, inc.channel_id) == []
    clock.advance(LEASE - 1)
    await app.tick()  # still leased to the dead process
    assert reminders(app, inc.channel_id) == []
    clock.advance(2)
    await app.tick()
    assert len(reminders(app, inc.channel_id)) == 1
    await app.tick()
    clock.advance(LEASE + 1)
    await app.tick()
    assert len(reminders(app, inc.channel_id)) == 1
    [e] = [e for e in await audit_entries(app, inc.id) if e["action"] == "command.remind"]
    assert e["detail"]["result"] == "ok"


async def test_escalation_redelivered_after_a_crash_mid_post_is_posted_once(app, clock):
    inc = await app.declare(TITLE, sev=2, cells=())
    clock.set(T0 + 900)
    await app.tick()
    clock.set(T0 + 1200)
    kill_at_post(app, "overdue", landed=False)
    await killed_tick(app)
    assert escalations(app, inc.channel_id) == []
    clock.advance(LEASE + 1)
    await app.tick()
    assert len(escalations(app, inc.channel_id)) == 1


async def test_handoff_nudge_redelivered_after_a_crash_mid_post_is_posted_once(app, clock):
    inc = await app.declare(TITLE, sev=2, cells=())
    await app.run("handoff ic <@UNEW>", channel=inc.channel_id)
    clock.set(T0 + 600)
    kill_at_post(app, ":hourglass:", landed=False)
    await killed_tick(app)
    clock.advance(LEASE + 1)
    await app.tick()
    assert len([m for m in app.slack.messages(inc.channel_id) if m["text"].startswith(":hourglass:")]) == 1


async def test_secret_event_whose_processing_died_is_handled_on_slacks_retry(app, clock):
    inc = await app.declare(TITLE, sev=2, cells=())
    event = _msg(inc.channel_id, "key: AKIAIOSFODNN7EXAMPLE")
    kill_at_post(app, ":warning:", landed=False)
    await app.sender.event(event, event_id="EvCrash")
    await app.drain()  # the processing died: nothing was posted
    assert _warnings(app, inc.channel_id) == []
    clock.advance(LEASE + 1)  # Slack retries after a minute when it got no answer
    await app.sender.event(event, event_id="EvCrash", retry_num=1)
    await app.slack.wait_for(lambda c: "AWS access key" in str(c.args.get("text", "")))
    await app.sender.event(event, event_id="EvCrash", retry_num=2)
    await app.drain()  # the second retry was handled: it posted nothing more
    assert len(_warnings(app, inc.channel_id)) == 1
