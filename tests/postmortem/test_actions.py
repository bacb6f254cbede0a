"""Action items through the real app: `action … --owner --due --verify [--kind]`, the owner's
reminders on the due date and every day after (exactly once across replicas and restarts), and
`action done AI-n <evidence>`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import date

import pytest

from bot.clock import ManualClock
from bot.postmortem import actions as pm_actions
from bot.postmortem import rules
from bot.postmortem.store import ACTION_SEQ, actions, actions_key
from fbworld.slack import FakeSlack
from tests.support.comms import LEASE, kill_at_post, killed_tick
from tests.support.harness import T0, RunningApp, audit_entries, start_app
from tests.support.telemetry import Delta, scrape

# T0 is 2026-11-30 03:10:00 UTC; the item is due three days later, reminded at 09:00 UTC that day.
DUE = "2026-12-03"
BASE = T0 + 3 * 86400 + 5 * 3600 + 50 * 60
DAY = 86400
ADD = (
    f"action Page on XID 79 per node --owner <@UALEX> --due {DUE} "
    '--verify "inject XID 79 in staging; the page fires" --kind alert'
)


@pytest.fixture
async def slack(clock: ManualClock) -> AsyncIterator[FakeSlack]:
    """Messages stamped with the app's clock, as Slack stamps them when posted (a reminder found
    in the channel after a crash is looked for since its claim)."""
    fake = FakeSlack(clock=clock.now)
    await fake.start()
    yield fake
    await fake.stop()


def reminders(app: RunningApp, channel: str, item: str = "AI-1") -> list[str]:
    return [m["text"] for m in app.slack.messages(channel) if m["text"].startswith(f":pushpin: <@UALEX> {item} ")]


def shown(out: str) -> str:
    """The text the person sees (a usage error is the ack's own JSON body)."""
    return json.loads(out)["text"] if out.startswith("{") else out


async def entries(app: RunningApp, inc_id: str, action: str) -> list[dict]:
    return [e for e in await audit_entries(app, inc_id) if e["action"] == action]


async def pending(app: RunningApp, item: str = "AI-1") -> float | None:
    return await app.services.scheduler.pending(pm_actions.REMIND, item)


async def nothing_stored(app: RunningApp, inc_id: str) -> None:
    assert await app.services.redis.exists(actions_key(inc_id), ACTION_SEQ) == 0
    assert await pending(app) is None


# Adding ----------------------------------------------------------------------------------------


async def test_an_item_gets_an_id_an_owner_a_date_a_check_and_its_reminder(app, clock):
    inc = await app.declare("GPU hang", sev=2)
    clock.advance(60)
    out = await app.run(ADD, channel=inc.channel_id)
    assert out == (
        f"AI-1 added to {inc.id}'s postmortem: <@UALEX> owns it, due {DUE}. They are reminded in this channel "
        "at 2026-12-03 09:00 UTC and every day after until `/incident action done AI-1 <evidence>`."
    )
    [item] = await actions(app.services, inc.id)
    assert item.model_dump() == {
        "id": "AI-1",
        "incident": inc.id,
        "text": "Page on XID 79 per node",
        "owner": "UALEX",
        "due": DUE,
        "verify": "inject XID 79 in staging; the page fires",
        "kind": "alert",
        "state": "open",
        "created_by": "U_IC",
        "created_at": T0 + 60,
        "evidence": None,
        "done_by": None,
        "done_at": None,
        "reminded": [],
    }
    assert await pending(app) == BASE
    assert [m["text"] for m in app.slack.messages(inc.channel_id) if m["text"].startswith(":memo:")] == [
        f":memo: AI-1 (alert) for <@UALEX>, due {DUE}: Page on XID 79 per node\n"
        "Verify: inject XID 79 in staging; the page fires"
    ]
    [e] = await entries(app, inc.id, "command.action")
    assert {k: e["detail"][k] for k in ("result", "item", "owner", "due", "kind", "first_reminder")} == {
        "result": "ok",
        "item": "AI-1",
        "owner": "UALEX",
        "due": DUE,
        "kind": "alert",
        "first_reminder": "2026-12-03T09:00:00Z",
    }


async def test_ids_come_from_one_counter_across_incidents_and_kind_defaults_to_other(app):
    a = await app.declare("GPU hang", sev=2)
    b = await app.declare("KV cache storm", sev=3)
    await app.run(ADD, channel=a.channel_id)
    out = await app.run(
        f"action Runbook step for drain --owner <@UBOB|bob> --due {DUE} --verify walkthrough", channel=b.channel_id
    )
    assert out.startswith(f"AI-2 added to {b.id}'s postmortem: <@UBOB> owns it")
    await app.run(f"action Game day --owner <@UALEX> --due {DUE} --verify done --kind game-day", channel=a.channel_id)
    assert [(i.id, i.kind) for i in await actions(app.services, a.id)] == [("AI-1", "alert"), ("AI-3", "gameday")]
    assert [(i.id, i.kind, i.owner) for i in await actions(app.services, b.id)] == [("AI-2", "other", "UBOB")]


@pytest.mark.parametrize(
    ("typed", "says"),
    [
        (
            f"action Page on XID --due {DUE} --verify x",
            "An action item needs an owner, a due date and a verification, or it won't ship; add --owner <@user>.",
        ),
        (
            "action Page on XID --owner <@UALEX>",
            "An action item needs an owner, a due date and a verification, or it won't ship; add --due YYYY-MM-DD, "
            '--verify "<how we will know it works>".',
        ),
        (f"action Page on XID --owner <@UALEX> --due {DUE}", 'add --verify "<how we will know it works>"'),
        (f"action Page on XID --owner <@UALEX> --due {DUE} --verify", "`--verify` needs a value."),
        (f'action Page on XID --owner <@UALEX> --due {DUE} --verify ""', 'add --verify "<how we will know it works>"'),
        (f"action --owner <@UALEX> --due {DUE} --verify x", "say what the item is"),
        (f"action Page --owner alex --due {DUE} --verify x", "`--owner alex` is not a person: mention them"),
        (f"action Page --owner @alex --due {DUE} --verify x", "`--owner @alex` is not a person"),
        (f"action Page --owner <#C123|ops> --due {DUE} --verify x", "is not a person"),
        (f"action Page --owner <!here> --due {DUE} --verify x", "is not a person"),
        ("action Page --owner <@UALEX> --due 2026-12-32 --verify x", "`--due 2026-12-32` is not a real date"),
        ("action Page --owner <@UALEX> --due 12/03/2026 --verify x", "is not a date: use YYYY-MM-DD"),
        ("action Page --owner <@UALEX> --due tomorrow --verify x", "is not a date: use YYYY-MM-DD"),
        (f"action Page --owner <@UALEX> --due {DUE} --verify x --kind pager", "`--kind pager` is not a kind"),
        (f"action Page --owner <@UALEX> --due {DUE} --verify x --assignee <@UBOB>", "Unknown option `--assignee`"),
    ],
)
async def test_an_item_that_would_not_ship_is_refused_with_what_to_type(app, typed, says):
    inc = await app.declare("GPU hang", sev=2)
    out = shown(await app.run(typed, channel=inc.channel_id))
    assert says in out, out
    assert "Usage:" in out
    await nothing_stored(app, inc.id)


@pytest.mark.parametrize(
    ("due", "says"),
    [
        (
            "2026-11-29",
            "`--due 2026-11-29` is in the past (today is 2026-11-30 UTC): give today or a later date, like "
            "`--due 2026-12-14`. Nothing was recorded.",
        ),
        ("2027-12-02", "`--due 2027-12-02` is more than a year away: an item that far out won't ship."),
    ],
)
async def test_a_due_date_in_the_past_or_a_year_out_is_refused(app, due, says):
    inc = await app.declare("GPU hang", sev=2)
    out = await app.run(f"action Page --owner <@UALEX> --due {due} --verify x", channel=inc.channel_id)
    assert out.startswith(says), out
    await nothing_stored(app, inc.id)
    [e] = await entries(app, inc.id, "command.action")
    assert e["detail"]["result"] == "refused"


# Reminders -------------------------------------------------------------------------------------


async def test_reminded_on_the_due_date_once_then_daily_until_done(app, clock):
    inc = await app.declare("GPU hang", sev=2)
    ch = inc.channel_id
    before = await scrape(app)
    await app.run(ADD, channel=ch)
    clock.set(BASE - 1)
    await app.tick()
    assert reminders(app, ch) == []
    clock.set(BASE)
    await app.tick()
    await app.tick()
    assert reminders(app, ch) == [
        f":pushpin: <@UALEX> AI-1 is due today ({DUE}): Page on XID 79 per node\n"
        "Verify: inject XID 79 in staging; the page fires\n"
        "When it ships: `/incident action done AI-1 <evidence>`."
    ]
    assert await pending(app) == BASE + DAY
    clock.set(BASE + DAY - 1)
    await app.tick()
    assert len(reminders(app, ch)) == 1
    clock.set(BASE + DAY)
    await app.tick()
    assert len(reminders(app, ch)) == 2
    assert reminders(app, ch)[1].startswith(f":pushpin: <@UALEX> AI-1 is 1 day overdue (due {DUE}):")
    clock.set(BASE + 2 * DAY + 600)
    await app.tick()
    assert reminders(app, ch)[2].startswith(f":pushpin: <@UALEX> AI-1 is 2 days overdue (due {DUE}):")
    out = await app.run("action done AI-1 https://ci.example/runs/812 the staging page fired", user="UALEX", channel=ch)
    assert out == "AI-1 is done; its reminders stop."
    assert await pending(app) is None
    for day in (3, 4, 10):
        clock.set(BASE + day * DAY)
        await app.tick()
    assert len(reminders(app, ch)) == 3
    [item] = await actions(app.services, inc.id)
    assert (item.state, item.done_by, item.evidence) == (
        "done",
        "UALEX",
        "https://ci.example/runs/812 the staging page fired",
    )
    assert item.reminded == [BASE, BASE + DAY, BASE + 2 * DAY + 600]
    ok = [e["detail"] for e in await entries(app, inc.id, "command.action_remind") if e["detail"]["result"] == "ok"]
    assert [(d["round"], d["lateness_s"], d["late"]) for d in ok] == [(1, 0, False), (2, 0, False), (3, 600, True)]
    assert all(e["actor"] == "system" for e in await entries(app, inc.id, "command.action_remind"))
    d = Delta(before, await scrape(app))  # /metrics: the third round was 600 s late
    assert d("firebreak_reminder_lateness_seconds_count", kind="action_item") == 3
    assert d("firebreak_reminder_lateness_seconds_sum", kind="action_item") == 600
    assert d("firebreak_reminders_late_total", kind="action_item") == 1


async def test_an_item_due_today_added_after_nine_is_reminded_at_once(app, clock):
    inc = await app.declare("GPU hang", sev=2)
    clock.set(T0 + 10 * 3600)  # 13:10 UTC
    out = await app.run("action Runbook --owner <@UALEX> --due 2026-11-30 --verify read", channel=inc.channel_id)
    assert "reminded in this channel shortly (it is due today)" in out
    await app.tick()
    assert len(reminders(app, inc.channel_id)) == 1
    assert await pending(app) == T0 - 3 * 3600 - 10 * 60 + 9 * 3600 + DAY  # tomorrow 09:00


async def test_two_replicas_remind_once(slack, redis_url, clock):
    a, b = [await start_app(slack, redis_url, clock) for _ in range(2)]
    try:
        inc = await a.declare("GPU hang", sev=2)
        await b.run(ADD, channel=inc.channel_id)
        for t in (BASE, BASE + 1, BASE + DAY):
            clock.set(t)
            await asyncio.gather(a.tick(), b.tick(), a.tick(), b.tick())
        assert len(reminders(a, inc.channel_id)) == 2
        ok = [e for e in await entries(a, inc.id, "command.action_remind") if e["detail"]["result"] == "ok"]
        assert [e["detail"]["round"] for e in ok] == [1, 2]
    finally:
        await a.stop()
        await b.stop()


async def test_a_restart_between_scheduling_and_firing_still_reminds_once(slack, redis_url, clock):
    first = await start_app(slack, redis_url, clock)
    inc = await first.declare("GPU hang", sev=2)
    await first.run(ADD, channel=inc.channel_id)
    await first.stop()  # the process that scheduled it is gone
    clock.set(BASE + 30)
    second, third = [await start_app(slack, redis_url, clock) for _ in range(2)]  # two replicas come back
    try:
        for hook in second.services.scheduler.startup:  # start-up repairs run on each
            await hook()
        for hook in third.services.scheduler.startup:
            await hook()
        await asyncio.gather(second.tick(), third.tick())
        await asyncio.gather(second.tick(), third.tick())
        assert len(reminders(second, inc.channel_id)) == 1
        [e] = [e for e in await entries(second, inc.id, "command.action_remind") if e["detail"]["result"] == "ok"]
        assert e["detail"]["round"] == 1 and e["detail"]["lateness_s"] == 30
        assert await pending(second) == BASE + DAY
    finally:
        await second.stop()
        await third.stop()


async def test_every_process_down_for_days_reminds_once_late_not_once_per_missed_day(slack, redis_url, clock):
    first = await start_app(slack, redis_url, clock)
    inc = await first.declare("GPU hang", sev=2)
    await first.run(ADD, channel=inc.channel_id)
    await first.stop()
    clock.set(BASE + 3 * DAY + 3600)
    back = await start_app(slack, redis_url, clock)
    try:
        for _ in range(3):
            await back.tick()
        [text] = reminders(back, inc.channel_id)
        assert "is 3 days overdue" in text
        [e] = [e for e in await entries(back, inc.id, "command.action_remind") if e["detail"]["result"] == "ok"]
        assert e["detail"]["late"] is True
        assert await pending(back) == BASE + 4 * DAY
    finally:
        await back.stop()


async def test_a_claimer_killed_after_its_post_landed_does_not_post_again(app, clock):
    inc = await app.declare("GPU hang", sev=2)
    await app.run(ADD, channel=inc.channel_id)
    clock.set(BASE)
    kill_at_post(app, ":pushpin:", landed=True)
    await killed_tick(app)
    assert len(reminders(app, inc.channel_id)) == 1
    clock.advance(LEASE + 1)  # the lease ran out: the job is handed out again
    await app.tick()
    await app.tick()
    assert len(reminders(app, inc.channel_id)) == 1
    [e] = [e for e in await entries(app, inc.id, "command.action_remind") if e["detail"]["result"] == "ok"]
    assert e["detail"]["found_posted"] is True
    assert await pending(app) == BASE + DAY  # and the next round is still coming


async def test_a_claimer_killed_before_its_post_landed_posts_once_after_the_lease(app, clock):
    inc = await app.declare("GPU hang", sev=2)
    await app.run(ADD, channel=inc.channel_id)
    clock.set(BASE)
    kill_at_post(app, ":pushpin:", landed=False)
    await killed_tick(app)
    assert reminders(app, inc.channel_id) == []
    clock.advance(LEASE + 1)
    await app.tick()
    assert len(reminders(app, inc.channel_id)) == 1


async def test_a_reminder_slack_refuses_is_tried_again_and_the_chain_goes_on(app, clock):
    inc = await app.declare("GPU hang", sev=2)
    await app.run(ADD, channel=inc.channel_id)
    await app.run("mitigated", channel=inc.channel_id)  # no update reminders to take the refusals
    clock.set(BASE)
    app.slack.fail_next("chat.postMessage", "ratelimited_for_good", times=5)
    for _ in range(5):  # five refusals, one every RETRY_S: the reminders do not die
        await app.tick()
        assert await pending(app) == clock.now() + pm_actions.RETRY_S
        clock.advance(pm_actions.RETRY_S)
    await app.tick()
    assert len(reminders(app, inc.channel_id)) == 1
    assert await pending(app) == BASE + DAY
    refused = [e for e in await entries(app, inc.id, "command.action_remind") if e["detail"]["result"] == "refused"]
    assert len(refused) == 5 and refused[0]["detail"]["slack_error"] == "ratelimited_for_good"


async def test_a_lost_reminder_job_is_put_back_at_start(app, clock):
    inc = await app.declare("GPU hang", sev=2)
    await app.run(ADD, channel=inc.channel_id)
    s = app.services.scheduler
    await s.cancel(pm_actions.REMIND, "AI-1")  # as if the job had gone dead
    for hook in s.startup:
        await hook()
    assert await pending(app) == BASE
    clock.set(BASE)
    await app.tick()
    await s.cancel(pm_actions.REMIND, "AI-1")
    clock.set(BASE + 2 * DAY + 60)  # two rounds later
    for hook in s.startup:
        await hook()
    assert await pending(app) == BASE + DAY  # the round after the last one posted: due, so it fires now
    await app.tick()
    assert len(reminders(app, inc.channel_id)) == 2
    assert await pending(app) == BASE + 3 * DAY


async def test_a_job_for_an_item_never_stored_posts_nothing(app, clock):
    """A process that died between scheduling the first reminder and storing the item."""
    inc = await app.declare("GPU hang", sev=2)
    await app.services.scheduler.schedule(pm_actions.REMIND, "AI-7", BASE, {"incident": inc.id, "round": 1})
    clock.set(BASE)
    await app.tick()
    assert reminders(app, inc.channel_id, "AI-7") == []
    assert await app.services.scheduler.pending(pm_actions.REMIND, "AI-7") is None
    [e] = await entries(app, inc.id, "command.action_remind")
    assert e["detail"]["skipped"] == "missing"


async def test_items_work_after_resolve_and_their_reminders_go_on(app, clock):
    inc = await app.declare("GPU hang", sev=2)
    await app.run("resolved", channel=inc.channel_id)
    assert (await app.run(ADD, channel=inc.channel_id)).startswith("AI-1 added")
    clock.set(BASE)
    await app.tick()
    assert len(reminders(app, inc.channel_id)) == 1
    assert (await app.run("action done AI-1 shipped, see PR 4411", channel=inc.channel_id)).startswith("AI-1 is done")


# Closing ----------------------------------------------------------------------------------------


async def test_done_needs_evidence_the_owner_or_ic_and_happens_once(app, clock):
    inc = await app.declare("GPU hang", sev=2, roles={"ops": "UOPS"})
    other = await app.declare("Another", sev=3)
    ch = inc.channel_id
    await app.run(ADD, channel=ch)
    for typed, user, says in [
        ("action done AI-1", "UALEX", "evidence is required to close AI-1: `action done AI-1 <a link"),
        ("action done AI-1    ", "UALEX", "evidence is required to close AI-1"),
        ("action done", "UALEX", "name the item and how you know it shipped"),
        ("action done 1 shipped", "UALEX", "`1` is not an action item: name it like `AI-3`"),
        ("action done AI-1 shipped --owner <@UBOB>", "UALEX", "`action done` takes no --owner"),
    ]:
        out = shown(await app.run(typed, user=user, channel=ch))
        assert says in out and "Usage:" in out, out
    out = await app.run("action done AI-1 shipped", user="UOPS", channel=ch)
    assert out == "Only the item's owner or the IC can close AI-1 (<@UALEX> or the IC <@U_IC>); nothing changed."
    out = await app.run("action done AI-9 shipped", user="UALEX", channel=ch)
    assert out.startswith(f"{inc.id} has no AI-9; nothing changed.")
    out = await app.run("action done AI-1 shipped", user="U_IC", channel=other.channel_id)
    assert out.startswith(f"{other.id} has no AI-1; nothing changed.")
    [item] = await actions(app.services, inc.id)
    assert item.state == "open" and await pending(app) == BASE
    clock.advance(60)
    assert await app.run("action done AI-1 the page fired in staging", user="U_IC", channel=ch) == (
        "AI-1 is done; its reminders stop."
    )
    out = await app.run("action done AI-1 a second opinion", user="UALEX", channel=ch)
    assert out == (
        "AI-1 was closed already by <@U_IC> (2026-11-30 03:11 UTC) with: the page fired in staging. "
        "The first evidence stands; nothing changed."
    )
    [item] = await actions(app.services, inc.id)
    assert (item.evidence, item.done_by, item.done_at) == ("the page fired in staging", "U_IC", T0 + 60)
    done = [e["detail"] for e in await entries(app, inc.id, "command.action") if e["detail"]["args"]["done"]]
    assert [d["result"] for d in done] == ["refused", "refused", "ok", "refused"]
    assert done[2]["evidence"] == "the page fired in staging"
    closed = [m["text"] for m in app.slack.messages(ch) if m["text"].startswith(":white_check_mark:")]
    assert closed == [
        ":white_check_mark: AI-1 done (<@U_IC>): Page on XID 79 per node\nEvidence: the page fired in staging"
    ]


async def test_concurrent_closes_close_once(app):
    inc = await app.declare("GPU hang", sev=2)
    await app.run(ADD, channel=inc.channel_id)
    outs = await asyncio.gather(
        *(app.run(f"action done AI-1 evidence {i}", user="UALEX", channel=inc.channel_id) for i in range(5))
    )
    assert sum(o == "AI-1 is done; its reminders stop." for o in outs) == 1
    assert sum(o.startswith("AI-1 was closed already") for o in outs) == 4


# The pure rules -------------------------------------------------------------------------------


def test_reminder_schedule():
    due = date(2026, 12, 3)
    assert rules.reminder_base(due) == BASE
    assert rules.reminder_at(due, 1, T0) == BASE
    assert rules.reminder_at(due, 1, BASE + 3600) == BASE + 3600  # added later that day: at once
    assert rules.reminder_at(due, 3, T0) == BASE + 2 * DAY
    assert rules.next_round(due, 1, T0, BASE) == 2
    assert rules.next_round(due, 1, T0, BASE + 5 * DAY + 1) == 7  # missed rounds are not replayed
    assert rules.overdue_days(due, BASE - 1) == 0 and rules.overdue_days(due, BASE + DAY) == 1


def test_due_refusal_and_who_closes():
    assert rules.due_refusal(date(2026, 11, 30), T0) is None
    assert rules.due_refusal(date(2027, 12, 1), T0) is None
    assert rules.due_refusal(date(2026, 11, 29), T0) is not None
    assert rules.due_refusal(date(2027, 12, 2), T0) is not None
    assert rules.may_close("UALEX", "UALEX", "U_IC") and rules.may_close("U_IC", "UALEX", "U_IC")
    assert not rules.may_close("UBOB", "UALEX", "U_IC") and not rules.may_close("UBOB", "UALEX", None)
