"""A process dying after its post landed and before the dedupe mark said "done" does not post twice
(issue 9, item 5).

The crash is real from the handler's point of view: the Slack call succeeds (the message is in the
channel), then raises CancelledError, which is what a killed task sees. Nothing after it runs: no
"done" mark, no scheduler ack. After the lease the scheduler hands the job out again; the new
claimer takes over the expired claim, finds the post (it carries the mark as message metadata) in
the channel's history, and does not post again.

The fake Slack here stamps messages with the app's clock, as real Slack stamps them with the time
of posting, so "history since the claim" means the same thing as in production.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from bot.clock import ManualClock
from fbworld.slack import FakeSlack
from tests.support.comms import LEASE, TITLE, escalations, kill_at_post, killed_tick, reminders
from tests.support.harness import T0, audit_entries


@pytest.fixture
async def slack(clock: ManualClock) -> AsyncIterator[FakeSlack]:
    fake = FakeSlack(clock=clock.now)
    await fake.start()
    yield fake
    await fake.stop()


async def test_a_reminder_whose_claimer_died_after_posting_is_not_posted_again(app, clock):
    inc = await app.declare(TITLE, sev=2, cells=())
    clock.set(T0 + 900)
    kill_at_post(app, ":alarm_clock:", landed=True)
    await killed_tick(app)
    assert len(reminders(app, inc.channel_id)) == 1  # it landed; its mark still says "pending"
    clock.advance(LEASE + 1)  # the lease ran out: the scheduler delivers the job again
    await app.tick()
    await app.tick()
    assert len(reminders(app, inc.channel_id)) == 1
    [msg] = reminders(app, inc.channel_id)
    [e] = [e for e in await audit_entries(app, inc.id) if e["action"] == "command.remind"]
    assert e["detail"]["result"] == "ok" and e["detail"]["found_posted"] is True
    # The rest of the reminder's work still happened: its escalation is due and fires once.
    clock.set(T0 + 1200)
    await app.tick()
    assert len(escalations(app, inc.channel_id)) == 1
    assert "blocks" in msg  # the one reminder is the full card, buttons included


async def test_an_escalation_whose_claimer_died_after_posting_is_not_posted_again(app, clock):
    inc = await app.declare(TITLE, sev=2, cells=())
    clock.set(T0 + 900)
    await app.tick()
    clock.set(T0 + 1200)
    kill_at_post(app, "overdue", landed=True)
    await killed_tick(app)
    clock.advance(LEASE + 1)
    await app.tick()
    assert len(escalations(app, inc.channel_id)) == 1


async def test_the_post_is_found_pages_back_in_a_busy_channel(app, clock):
    """The history is read page by page: 450 messages posted after the reminder push it to page 3."""
    inc = await app.declare(TITLE, sev=2, cells=())
    clock.set(T0 + 900)
    kill_at_post(app, ":alarm_clock:", landed=True)
    await killed_tick(app)
    for i in range(450):
        app.slack.state.post(inc.channel_id, f"chatter {i}")
    clock.advance(LEASE + 1)
    await app.tick()
    assert len(reminders(app, inc.channel_id)) == 1
    pages = [c for c in app.slack.calls_to("conversations.history") if c.args.get("channel") == inc.channel_id]
    assert len(pages) == 3 and all(c.args.get("include_all_metadata") == "true" for c in pages)


async def test_a_claimer_that_died_before_its_post_landed_still_gets_the_post_made(app, clock):
    """The other half: nothing carrying the mark is in the channel, so the reminder is posted once."""
    inc = await app.declare(TITLE, sev=2, cells=())
    app.slack.state.post(inc.channel_id, "an older, unmarked message")
    clock.set(T0 + 900)
    kill_at_post(app, ":alarm_clock:", landed=False)  # dies before the post
    with pytest.raises(asyncio.CancelledError):
        await app.tick()
    assert reminders(app, inc.channel_id) == []
    clock.advance(LEASE + 1)
    await app.tick()
    assert len(reminders(app, inc.channel_id)) == 1
    assert app.slack.calls_to("conversations.history")  # it looked before posting


async def test_a_handoff_nudge_whose_claimer_died_after_posting_is_not_posted_again(app, clock):
    inc = await app.declare(TITLE, sev=2, cells=())
    await app.run("handoff ic <@UNEW>", channel=inc.channel_id)
    clock.set(T0 + 600)
    kill_at_post(app, ":hourglass:", landed=True)
    await killed_tick(app)
    clock.advance(LEASE + 1)
    await app.tick()
    assert len([m for m in app.slack.messages(inc.channel_id) if m["text"].startswith(":hourglass:")]) == 1
