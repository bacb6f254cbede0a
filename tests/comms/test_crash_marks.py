"""A process dying between "I'll post this" and the post does not lose the post.

The crash is real from the handler's point of view: the Slack call raises
CancelledError (what a killed task sees), so nothing after it runs (no post,
no dedupe "done", no scheduler ack). The next delivery must post, once.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.comms.helpers import TITLE, escalations, reminders
from tests.comms.test_secrets import _msg, _warnings
from tests.conftest import T0, audit_entries

LEASE = 60  # the scheduler's lease: a dead claimer's job is handed out again after it


def crash_next_post(app, match: str) -> None:
    """The next chat.postMessage whose text contains ``match`` dies mid-call."""
    real = app.services.chat.post

    async def dying(channel, text, *a, **kw):
        if match in text:
            app.services.chat.post = real
            raise asyncio.CancelledError()
        return await real(channel, text, *a, **kw)

    app.services.chat.post = dying


async def _crashing_tick(app) -> None:
    with pytest.raises(asyncio.CancelledError):
        await app.tick()


async def test_reminder_redelivered_after_a_crash_mid_post_is_posted_once(app, clock):
    inc = await app.declare(TITLE, sev=2, cells=())
    clock.set(T0 + 900)
    crash_next_post(app, ":alarm_clock:")
    await _crashing_tick(app)
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
    crash_next_post(app, "overdue")
    await _crashing_tick(app)
    assert escalations(app, inc.channel_id) == []
    clock.advance(LEASE + 1)
    await app.tick()
    assert len(escalations(app, inc.channel_id)) == 1


async def test_handoff_nudge_redelivered_after_a_crash_mid_post_is_posted_once(app, clock):
    inc = await app.declare(TITLE, sev=2, cells=())
    await app.run("handoff ic <@UNEW>", channel=inc.channel_id)
    clock.set(T0 + 600)
    crash_next_post(app, ":hourglass:")
    await _crashing_tick(app)
    clock.advance(LEASE + 1)
    await app.tick()
    assert len([m for m in app.slack.messages(inc.channel_id) if m["text"].startswith(":hourglass:")]) == 1


async def test_secret_event_whose_processing_died_is_handled_on_slacks_retry(app, clock):
    inc = await app.declare(TITLE, sev=2, cells=())
    event = _msg(inc.channel_id, "key: AKIAIOSFODNN7EXAMPLE")
    crash_next_post(app, ":warning:")
    await app.sender.event(event, event_id="EvCrash")
    await app.drain()  # the processing died: nothing was posted
    assert _warnings(app, inc.channel_id) == []
    clock.advance(LEASE + 1)  # Slack retries after a minute when it got no answer
    await app.sender.event(event, event_id="EvCrash", retry_num=1)
    await app.slack.wait_for(lambda c: "AWS access key" in str(c.args.get("text", "")))
    await app.sender.event(event, event_id="EvCrash", retry_num=2)
    await app.drain()  # the second retry was handled: it posted nothing more
    assert len(_warnings(app, inc.channel_id)) == 1
