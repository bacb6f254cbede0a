"""Cadence end to end: Slack-signed commands in, scheduler ticks on an injected clock, fake Slack out."""

from __future__ import annotations

import json

from bot.clock import hhmm
from bot.incidents.handlers import raise_to
from tests.support.comms import TITLE, button_values, escalations, reminders
from tests.support.harness import T0, audit_entries


def _card(app, inc):
    updates = [c for c in app.slack.calls_to("chat.update") if c.args.get("ts") == inc.card_ts]
    return updates[-1].args["text"] if updates else None


async def test_sev2_first_reminder_at_15_min_then_escalation_to_ic(app, clock):
    inc = await app.declare(TITLE, sev=2, cells=())
    assert inc.next_update_due == T0 + 900
    assert await app.services.scheduler.pending("cadence.remind", inc.id) == T0 + 900
    clock.set(T0 + 899)
    await app.tick()
    assert reminders(app, inc.channel_id) == []
    clock.set(T0 + 900)
    await app.tick()
    [r] = reminders(app, inc.channel_id)
    assert "<@U_IC>" in r["text"] and "03:25 UTC" in r["text"]
    assert button_values(r) == {"cadence.post_update": inc.id, "cadence.snooze": f"{inc.id}/{T0 + 900!r}"}
    await app.tick()
    assert len(reminders(app, inc.channel_id)) == 1
    clock.set(T0 + 900 + 299)
    await app.tick()
    assert escalations(app, inc.channel_id) == []
    clock.set(T0 + 900 + 300)
    await app.tick()
    [e] = escalations(app, inc.channel_id)
    assert "<@U_IC>" in e["text"] and "was due 03:25 UTC" in e["text"]
    clock.advance(1799)  # the escalation repeats every SEV2 interval (30 min), not sooner
    await app.tick()
    assert len(reminders(app, inc.channel_id)) == 1 and len(escalations(app, inc.channel_id)) == 1
    entries = [e for e in await audit_entries(app, inc.id) if e["action"] in ("command.remind", "command.escalate")]
    assert [(e["action"], e["actor"], e["detail"]["source"], e["detail"]["result"]) for e in entries] == [
        ("command.remind", "system", "scheduler", "ok"),
        ("command.escalate", "system", "scheduler", "ok"),
    ]
    assert entries[0]["detail"]["lateness_s"] == 0 and entries[0]["detail"]["late"] is False


async def test_reminder_goes_to_comms_and_escalation_to_ic(app, clock):
    inc = await app.declare(TITLE, sev=1, cells=())
    assert "now Comms lead" in await app.run("role comms <@UCOMMS>", channel=inc.channel_id)
    clock.set(T0 + 900)
    await app.tick()
    [r] = reminders(app, inc.channel_id)
    assert "<@UCOMMS>" in r["text"] and "<@U_IC>" not in r["text"]
    clock.set(T0 + 1200)
    await app.tick()
    [e] = escalations(app, inc.channel_id)
    assert e["text"].startswith(":rotating_light: <@U_IC>") and "reminder went to <@UCOMMS>" in e["text"]


async def test_update_resets_the_cadence_and_the_card_shows_it(app, clock):
    inc = await app.declare(TITLE, sev=2, cells=())
    clock.set(T0 + 600)
    out = await app.run("update Chat API, us-east: elevated latency since 03:10 UTC", channel=inc.channel_id)
    assert "Next update due 03:50 UTC" in out  # 03:20 + 30 min (SEV2 interval)
    assert "next update due 03:50 UTC" in _card(app, inc)
    clock.set(T0 + 900)
    await app.tick()
    assert reminders(app, inc.channel_id) == []
    clock.set(T0 + 600 + 1800)
    await app.tick()
    [r] = reminders(app, inc.channel_id)
    assert "03:50 UTC" in r["text"]


async def test_update_after_the_reminder_cancels_the_escalation(app, clock):
    inc = await app.declare(TITLE, sev=1, cells=())
    clock.set(T0 + 900)
    await app.tick()
    clock.set(T0 + 1000)
    await app.run("update Chat API, us-east: investigating", channel=inc.channel_id)
    s = app.services.scheduler
    assert await s.pending("cadence.escalate", inc.id) is None
    assert await s.pending("cadence.remind", inc.id) == T0 + 1900
    clock.set(T0 + 1200)
    await app.tick()
    assert escalations(app, inc.channel_id) == []


async def test_sev_raise_pulls_the_due_time_in(app, clock):
    inc = await app.declare(TITLE, sev=3, cells=())
    assert inc.next_update_due == T0 + 3600
    clock.set(T0 + 600)
    await app.run("sev 1 users failing", channel=inc.channel_id)
    s = app.services.scheduler
    assert await s.pending("cadence.remind", inc.id) == T0 + 900
    assert "next update due 03:25 UTC" in _card(app, inc)
    clock.set(T0 + 900)
    await app.tick()
    assert len(reminders(app, inc.channel_id)) == 1


async def test_sev_raise_after_the_due_passed_reminds_now(app, clock):
    inc = await app.declare(TITLE, sev=4, cells=())
    clock.set(T0 + 3000)
    await app.run("update Chat API, us-east: investigating", channel=inc.channel_id)  # due T0+6600
    clock.set(T0 + 3000 + 1000)
    await app.run("sev 1 users failing", channel=inc.channel_id)  # SEV1 interval 15 min < 1000 s since update
    clock.set(T0 + 4000)
    await app.tick()
    [r] = reminders(app, inc.channel_id)
    assert hhmm(T0 + 4000) in r["text"]


async def test_snooze_by_comms_moves_the_reminder_and_skips_escalation(app, clock):
    inc = await app.declare(TITLE, sev=1, cells=())
    await app.run("role comms <@UCOMMS>", channel=inc.channel_id)
    clock.set(T0 + 900)
    await app.tick()
    [r] = reminders(app, inc.channel_id)
    value = button_values(r)["cadence.snooze"]
    key = await app.press("cadence.snooze", value, user="UOTHER", channel=inc.channel_id)
    assert "Only" in await app.reply(key)
    clock.set(T0 + 960)
    key = await app.press("cadence.snooze", value, user="UCOMMS", channel=inc.channel_id)
    assert "next update due 03:31 UTC" in await app.reply(key)
    key = await app.press("cadence.snooze", value, user="U_IC", channel=inc.channel_id)
    assert "no longer current" in await app.reply(key)  # a double press snoozes once
    assert (await app.incident(inc.id)).next_update_due == T0 + 960 + 300
    assert "next update due 03:31 UTC" in _card(app, inc)
    clock.set(T0 + 1200)  # the old escalation time
    await app.tick()
    assert escalations(app, inc.channel_id) == []
    clock.set(T0 + 1260)
    await app.tick()
    assert len(reminders(app, inc.channel_id)) == 2
    clock.set(T0 + 1560)
    await app.tick()
    assert len(escalations(app, inc.channel_id)) == 1


async def test_mitigated_and_resolved_incidents_fall_silent(app, clock):
    a = await app.declare("first", sev=1, cells=())
    b = await app.declare("second", sev=1, cells=())
    clock.set(T0 + 900)
    await app.tick()
    assert len(reminders(app, a.channel_id)) == 1 and len(reminders(app, b.channel_id)) == 1
    await app.run("mitigated", channel=a.channel_id)  # after the reminder: no escalation either
    await app.run("update Chat API, us-east: recovering", channel=b.channel_id)
    await app.run("resolved", channel=b.channel_id)
    s = app.services.scheduler
    assert await s.pending("cadence.remind", a.id) is None and await s.pending("cadence.remind", b.id) is None
    for step in range(1, 13):
        clock.set(T0 + 900 + step * 600)
        await app.tick()
    assert len(reminders(app, a.channel_id)) == 1 and len(reminders(app, b.channel_id)) == 1
    assert escalations(app, a.channel_id) == [] and escalations(app, b.channel_id) == []


async def test_post_update_button_opens_modal_prefilled_and_submission_posts(app, clock):
    inc = await app.declare(TITLE, sev=1, cells=())
    await app.run("update Chat API, us-east: investigating", channel=inc.channel_id)
    clock.set(T0 + 900)
    await app.tick()
    [r] = reminders(app, inc.channel_id)
    await app.press("cadence.post_update", button_values(r)["cadence.post_update"], user="U_IC", channel=inc.channel_id)
    opened = await app.slack.wait_for("views.open")
    view = opened.args["view"]
    assert view["callback_id"] == "cadence.update" and view["private_metadata"] == inc.id
    assert view["blocks"][1]["element"]["initial_value"] == "Chat API, us-east: investigating"
    status, body, _ = await app.sender.submit_view(
        "cadence.update",
        user="U_IC",
        values={"update": {"text": {"type": "plain_text_input", "value": "Chat API, us-east: mitigated, watching"}}},
        private_metadata=inc.id,
    )
    assert status == 200 and body == ""
    await app.slack.wait_for(lambda c: c.method == "chat.postEphemeral" and "Update posted" in c.args["text"])
    assert (await app.incident(inc.id)).last_update_text == "Chat API, us-east: mitigated, watching"
    entries = await audit_entries(app, inc.id)
    assert [e["detail"]["source"] for e in entries if e["action"] == "command.update"] == ["slash", "modal"]


async def test_empty_modal_submission_keeps_the_modal_open_with_an_error(app):
    inc = await app.declare(TITLE, sev=1, cells=())
    status, body, _ = await app.sender.submit_view(
        "cadence.update",
        user="U_IC",
        values={"update": {"text": {"type": "plain_text_input", "value": "  "}}},
        private_metadata=inc.id,
    )
    assert status == 200
    assert json.loads(body) == {
        "response_action": "errors",
        "errors": {"update": "Write the update: what users see, in which product and region."},
    }
    assert (await app.incident(inc.id)).last_update_text is None


async def test_modal_update_naming_a_cell_stays_open_with_the_words(app):
    inc = await app.declare(TITLE, sev=1, cells=())
    status, body, _ = await app.sender.submit_view(
        "cadence.update",
        user="U_IC",
        values={"update": {"text": {"type": "plain_text_input", "value": "cell us-east-3 node gpu-a3-0142 is down"}}},
        private_metadata=inc.id,
    )
    assert status == 200
    reply = json.loads(body)
    assert reply["response_action"] == "errors"
    assert "`us-east-3`" in reply["errors"]["update"] and "`gpu-a3-0142`" in reply["errors"]["update"]
    assert (await app.incident(inc.id)).last_update_text is None
    assert [c for c in app.slack.calls_to("chat.postMessage") if "*Update*" in c.args.get("text", "")] == []
    assert [e["action"] for e in await audit_entries(app)][-1] == "modal.refused"


async def test_post_update_button_refused_for_others(app, clock):
    inc = await app.declare(TITLE, sev=1, cells=())
    key = await app.press("cadence.post_update", inc.id, user="UOTHER", channel=inc.channel_id)
    assert "Only" in await app.reply(key)
    assert app.slack.calls_to("views.open") == []


async def test_reminder_survives_a_429_from_slack_posted_once(app, clock):
    inc = await app.declare(TITLE, sev=1, cells=())
    clock.set(T0 + 900)
    app.slack.rate_limit_next("chat.postMessage", times=1, retry_after=1)
    await app.tick()
    posts_to_channel = [
        c
        for c in app.slack.calls_to("chat.postMessage")
        if c.args.get("channel") == inc.channel_id and c.args["text"].startswith(":alarm_clock:")
    ]
    assert len(posts_to_channel) == 2  # the 429, then the retry after Retry-After
    assert len(reminders(app, inc.channel_id)) == 1
    await app.tick()
    assert len(reminders(app, inc.channel_id)) == 1


async def test_reminder_slack_refuses_is_retried_by_the_scheduler(app, clock):
    inc = await app.declare(TITLE, sev=1, cells=())
    clock.set(T0 + 900)
    app.slack.fail_next("chat.postMessage", "fatal_error")
    await app.tick()
    assert reminders(app, inc.channel_id) == []
    clock.advance(61)  # the lease runs out: delivered again
    await app.tick()
    assert len(reminders(app, inc.channel_id)) == 1
    results = [e["detail"]["result"] for e in await audit_entries(app, inc.id) if e["action"] == "command.remind"]
    assert results == ["error", "ok"]


async def test_unaccepted_handoff_nudges_the_outgoing_holder(app, clock):
    inc = await app.declare(TITLE, sev=2, cells=())
    await app.run("handoff ic <@UNEW>", channel=inc.channel_id)
    await app.run("role comms <@UC1>", channel=inc.channel_id)
    await app.run("handoff comms <@UC2>", user="UC1", channel=inc.channel_id)
    clock.set(T0 + 300)
    hos = {m["text"]: m for m in app.slack.messages(inc.channel_id)}
    comms_ho = next(m for t, m in hos.items() if "handing to <@UC2>" in t)
    await app.press("handoff.accept", button_values(comms_ho)["handoff.accept"], user="UC2", channel=inc.channel_id)
    await app.slack.wait_for(lambda c: "accepted" in str(c.args.get("text", "")))
    clock.set(T0 + 599)
    await app.tick()
    nudges = lambda: [m for m in app.slack.messages(inc.channel_id) if m["text"].startswith(":hourglass:")]  # noqa: E731
    assert nudges() == []
    clock.set(T0 + 600)
    await app.tick()
    [n] = nudges()
    assert n["text"].startswith(":hourglass: <@U_IC> your handoff HO-1") and "<@UNEW>" in n["text"]
    clock.advance(3600)
    await app.tick()
    assert len(nudges()) == 1


async def test_sev_raise_that_lands_after_mitigated_sets_no_due(app, clock):
    inc = await app.declare(TITLE, sev=3, cells=())
    stale = await app.incident(inc.id)  # a raise whose lookup ran before `mitigated` landed
    assert "now mitigated" in await app.run("mitigated", channel=inc.channel_id)
    clock.advance(60)
    out = await raise_to(app.services, stale, 1, "worse than we thought", "U_IC")
    assert out.message.startswith("INC-1 is now SEV1")
    raw = await app.services.redis.hgetall(f"fb:inc:{{{inc.id}}}")
    assert raw["sev"] == "1" and raw["status"] == "mitigated" and "next_update_due" not in raw
    await app.run("status", channel=inc.channel_id)  # the after-request sync sees no due
    assert await app.services.scheduler.pending("cadence.remind", inc.id) is None


async def test_escalation_repeats_every_interval_until_an_update_is_posted(app, clock):
    inc = await app.declare(TITLE, sev=1, cells=())  # SEV1: due at +15 min, escalation 5 min later, then every 15 min
    clock.set(T0 + 900)
    await app.tick()
    for n, at in enumerate((1200, 2100, 3000), start=1):
        clock.set(T0 + at - 1)
        await app.tick()
        assert len(escalations(app, inc.channel_id)) == n - 1
        clock.set(T0 + at)
        await app.tick()
        assert len(escalations(app, inc.channel_id)) == n
    texts = [e["text"] for e in escalations(app, inc.channel_id)]
    assert "is overdue" in texts[0] and all("is still overdue" in t for t in texts[1:])
    assert "Update posted" in await app.run("update Chat API, us-east: recovering", channel=inc.channel_id)
    assert await app.services.scheduler.pending("cadence.escalate", inc.id) is None
    clock.set(T0 + 3899)
    await app.tick()
    assert len(escalations(app, inc.channel_id)) == 3
    rounds = [e["detail"]["round"] for e in await audit_entries(app, inc.id) if e["action"] == "command.escalate"]
    assert rounds == [1, 2, 3]


async def test_escalation_stops_repeating_once_mitigated(app, clock):
    inc = await app.declare(TITLE, sev=1, cells=())
    clock.set(T0 + 900)
    await app.tick()
    clock.set(T0 + 1200)
    await app.tick()
    assert "now mitigated" in await app.run("mitigated", channel=inc.channel_id)
    clock.set(T0 + 2100)
    await app.tick()
    assert len(escalations(app, inc.channel_id)) == 1
