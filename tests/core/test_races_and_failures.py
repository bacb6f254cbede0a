"""Races and failures that must not be silent: an Accept landing while its handoff is posted,
a dedupe claim lost to another process, a modal from someone the policy refuses, a Slack call
that failed after the decision, a job the scheduler gives up on, a start hook that failed."""

from __future__ import annotations

import asyncio
import json

from bot.comms.system import Once
from bot.incidents.store import repo
from bot.store import Keys
from tests.support.core import BOB, CAROL, IC, OPS, TITLE
from tests.support.harness import T0, audit_entries

LEASE = 60  # the scheduler's default lease
# The update form on the wire (bot/slack/forms.py), spelled out: open forms already carry these.
UPDATE_MODAL, UPDATE_BLOCK, UPDATE_INPUT = "cadence.update", "update", "text"


def _accept_while_posting(app, ch: str, user: str) -> dict:
    """The handoff message lands; before the handoff request records its ts, `user` presses Accept."""
    real, seen = app.services.chat.post, {}

    async def post(channel, text, *a, **kw):
        ts = await real(channel, text, *a, **kw)
        if "handing to" in text:
            app.services.chat.post = real
            seen["reply"] = await app.reply(
                await app.press("handoff.accept", "INC-1/HO-1", user=user, channel=ch, message_ts=ts)
            )
            seen["ts"] = ts
        return ts

    app.services.chat.post = post
    return seen


async def test_an_accept_landing_while_the_handoff_is_posted_stays_accepted(app):
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    seen = _accept_while_posting(app, ch, CAROL)
    out = await app.run(f"handoff ic <@{CAROL}>", user=IC, channel=ch)
    assert seen["reply"] == "You are now Incident Commander in INC-1."
    assert out.startswith("Handoff HO-1 posted and already accepted"), out
    h = await repo(app.services).get_handoff("INC-1", "HO-1")
    assert (h.status, h.message_ts) == ("accepted", seen["ts"])
    assert (await app.incident("INC-1")).holder("ic") == CAROL
    # The message the Accept could not edit (its ts was not recorded yet) is marked accepted now.
    [edit] = [c for c in app.slack.calls_to("chat.update") if c.args["ts"] == seen["ts"]]
    assert "accepted by <@UCAROL>" in json.dumps(edit.args.get("blocks"))


async def test_a_nudge_scheduled_after_the_accept_does_not_nudge(app):
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    _accept_while_posting(app, ch, CAROL)
    await app.run(f"handoff ic <@{CAROL}>", user=IC, channel=ch)
    # The handoff's own after-hook scheduled the nudge after the Accept had cancelled it.
    app.clock.set(T0 + 24 * 3600)
    await app.tick()
    assert not [m for m in app.slack.messages(ch) if m["text"].startswith(":hourglass:")]
    nudges = [e for e in await audit_entries(app, "INC-1") if e["action"] == "command.handoff_nudge"]
    assert [(e["detail"]["result"], e["detail"].get("skipped")) for e in nudges] in ([], [("refused", "not_pending")])


async def test_a_done_mark_is_only_set_by_the_claim_that_still_holds_it(app):
    svc, key = app.services, Keys.comms("INC-9", "nudged:HO-1")
    first = Once(svc, key)
    assert await first.claim()
    app.clock.advance(LEASE)  # the first claimer stalled past its claim; another takes it over
    second = Once(svc, key)
    assert await second.claim()
    assert await first.done() is False
    assert (await svc.redis.get(key)).startswith("pending:")  # still the second's claim
    assert await second.done() is True
    assert await svc.redis.get(key) == "done"


async def test_a_modal_from_someone_without_the_role_is_refused_not_corrected(app):
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    values = {UPDATE_BLOCK: {UPDATE_INPUT: {"type": "plain_text_input", "value": "cell us-east-3 is down"}}}
    status, body, _ = await app.sender.submit_view(UPDATE_MODAL, user=BOB, values=values, private_metadata="INC-1")
    # The policy's refusal, on the form (no wording hint for someone who may not post).
    assert status == 200, body
    errors = json.loads(body)["errors"]
    assert list(errors) == [UPDATE_BLOCK] and "can run `update`" in errors[UPDATE_BLOCK], errors
    await app.drain()
    assert app.slack.ephemerals(ch, BOB) == []
    e = (await audit_entries(app, "INC-1"))[-1]
    assert (e["action"], e["actor"], e["detail"]["reason"]) == ("modal.refused", BOB, errors[UPDATE_BLOCK])
    assert (await app.incident("INC-1")).last_update_text is None


async def test_the_wording_check_still_answers_on_the_form_for_the_comms_lead(app):
    await app.declare(TITLE, sev=3, user=IC)
    values = {UPDATE_BLOCK: {UPDATE_INPUT: {"type": "plain_text_input", "value": "cell us-east-3 is down"}}}
    status, body, _ = await app.sender.submit_view(UPDATE_MODAL, user=IC, values=values, private_metadata="INC-1")
    answer = json.loads(body)
    assert status == 200 and answer["response_action"] == "errors"
    assert "us-east-3" in answer["errors"][UPDATE_BLOCK]


async def test_a_role_whose_invite_failed_says_so_in_the_reply(app):
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    app.slack.fail_next("conversations.invite", "user_disabled")
    out = await app.run(f"role ops <@{OPS}>", user=IC, channel=ch)
    assert out.startswith(f"<@{OPS}> is now Ops lead in INC-1.")
    assert f"could not invite <@{OPS}> to the channel: user_disabled" in out
    assert (await app.incident("INC-1")).holder("ops") == OPS
    e = (await audit_entries(app, "INC-1"))[-1]
    assert (e["action"], e["detail"]["invite_failed"]) == ("command.role", "user_disabled")


async def test_an_accept_whose_message_edit_failed_says_so_in_the_reply(app):
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    await app.run(f"handoff ic <@{CAROL}>", user=IC, channel=ch)
    post = next(m for m in app.slack.messages(ch) if "handing to" in m["text"])
    app.slack.fail_next("chat.update", "message_not_found")
    out = await app.reply(
        await app.press("handoff.accept", "INC-1/HO-1", user=CAROL, channel=ch, message_ts=post["ts"])
    )
    assert out.startswith("You are now Incident Commander in INC-1.")
    assert "the handoff message could not be marked accepted: message_not_found" in out


async def test_a_job_given_up_on_is_logged_and_audited(app, capsys):
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    await app.run(f"handoff ic <@{CAROL}>", user=IC, channel=ch)
    app.slack.fail_next("chat.postMessage", "channel_not_found", times=3)
    app.clock.set(T0 + 600)  # the nudge is due; Slack refuses it on every attempt
    for _ in range(4):
        await app.tick()
        app.clock.advance(LEASE + 1)
    [dead] = [e for e in await audit_entries(app, "INC-1") if e["action"] == "scheduler.job_dead"]
    assert dead["actor"] == "system"
    assert dead["detail"] == {"kind": "handoff.nudge", "key": "INC-1/HO-1", "due": T0 + 600, "attempts": 3}
    logged = capsys.readouterr()
    assert "job_dead" in logged.out + logged.err


async def test_a_failed_start_hook_is_retried_until_it_succeeds(app):
    calls: list[int] = []
    ran = asyncio.Event()

    async def flaky() -> None:
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionError("store not up yet")
        ran.set()

    s = app.services.scheduler
    s.hook_retry_s, s.hook_retry_max_s, s.poll = 0.01, 0.02, 0.05
    s.bind(s.handlers, [*s.startup, flaky])
    loop = asyncio.create_task(s.run())
    try:
        await asyncio.wait_for(ran.wait(), 5)
    finally:
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)
    assert len(calls) == 3
