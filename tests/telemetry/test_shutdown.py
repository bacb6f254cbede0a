"""`firebreak serve` (a real process) gets SIGTERM with a slash command and timed jobs in flight:
readiness fails at once, requests are still taken for the linger and then get a 503, the
in-flight command completes, jobs it claimed but had not started are handed back (another
replica runs them at once, not after the 60 s lease), and the process exits 0 within its grace."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections import Counter

import aiohttp

from bot.clock import SystemClock
from bot.comms import timers
from bot.incidents.models import Incident, RoleHolder
from bot.incidents.store import repo
from bot.server import UNSIGNED
from fbworld.slack import FakeSlack, SlackSender
from tests.support.harness import RunningApp, start_app
from tests.support.serve import GRACE, LINGER, SERVE_SECRET, SERVE_TOKEN, Serve

SLOW_S = 4.0  # how long Slack takes to answer the calls in flight at SIGTERM
JOBS, SLOTS = 40, 32  # reminders due at once; the scheduler runs 32 at a time (Scheduler concurrency)


async def _get(url: str) -> tuple[int, dict]:
    async with aiohttp.ClientSession() as s, s.get(url) as r:
        return r.status, await r.json()


async def _seed(other: RunningApp, slack: FakeSlack, due: float) -> dict[str, str]:
    """JOBS open incidents whose update reminders all fall due at ``due``; channel -> incident."""
    channels = {}
    for i in range(101, 101 + JOBS):  # numbers a declare does not take (it starts at INC-1)
        ch = slack.add_channel(f"inc-term-{i}")
        now = time.time()
        inc = Incident(
            id=f"INC-{i}",
            number=i,
            title=f"term {i}",
            sev=1,
            channel_id=ch,
            channel_name=f"inc-term-{i}",
            declared_by="U_IC",
            declared_at=now,
            detected_at=now,
            next_update_due=due,
            roles={"ic": RoleHolder(user="U_IC", since=now, by="U_IC")},
        )
        await repo(other.services).create(inc)
        await repo(other.services).bind_channel(inc.id, ch)
        await timers.sync(other.services, inc.id)
        channels[ch] = inc.id
    return channels


def _reminders(slack: FakeSlack, token: str | None = None) -> list:
    return [
        c
        for c in slack.calls_to("chat.postMessage")
        if str(c.args.get("text", "")).startswith(":alarm_clock:") and (token is None or c.token == token)
    ]


async def test_sigterm_drains_hands_back_claimed_jobs_and_exits_0_within_the_grace(slack, redis_url):
    # Another replica on the same Redis and Slack; it runs no loop of its own, only the ticks below.
    other = await start_app(slack, redis_url, SystemClock())
    serve = await Serve(redis_url, slack).start()
    try:
        assert await _get(serve.url + "/readyz") == (200, {"ok": True, "redis": True, "audit": UNSIGNED})
        # Every reminder post is slow: the serving process claims all 40 jobs, runs 32 (stuck in
        # Slack), and holds 8 that wait for a free slot.
        slack.delay_next("chat.postMessage", SLOW_S, times=SLOTS)
        channels = await _seed(other, slack, due=time.time() + 1.0)
        for _ in range(200):
            if len(_reminders(slack)) >= SLOTS:
                break
            await asyncio.sleep(0.05)
        assert len(_reminders(slack, SERVE_TOKEN)) == SLOTS
        # A slash command in flight: its channel is still being created when SIGTERM comes.
        sender = SlackSender(serve.url, SERVE_SECRET)
        slack.delay_next("conversations.create", SLOW_S)
        status, _, _ = await sender.command(
            "declare Ingress flapping --sev 3", user="U_IC", channel="C_GENERAL", response_url=slack.response_url("d")
        )
        assert status == 200
        await slack.wait_for(lambda c: c.method == "conversations.create", timeout=5)

        serve.proc.send_signal(signal.SIGTERM)
        term = time.monotonic()
        # Readiness fails at once, so the Service stops sending here.
        assert await _get(serve.url + "/readyz") == (503, {"ok": False, "draining": True})
        # Requests still on their way during the linger are taken…
        status, _, _ = await sender.command("help", user="U_IC", channel="C_GENERAL")
        assert status == 200 and time.monotonic() - term < LINGER
        # …the 8 claimed jobs it never started are handed back at once: this replica runs them now.
        ran = 0
        for _ in range(40):
            ran += await other.tick()
            if ran >= JOBS - SLOTS:
                break
            await asyncio.sleep(0.1)
        assert ran == JOBS - SLOTS and time.monotonic() - term < 5.0  # the lease is 60 s
        # After the linger, a request that still arrives gets a 503 (Slack retries an event elsewhere).
        await asyncio.sleep(max(0.0, LINGER + 0.2 - (time.monotonic() - term)))
        status, body, _ = await sender.command("help", user="U_IC", channel="C_GENERAL")
        assert (status, json.loads(body)) == (503, {"ok": False, "error": "shutting_down"})
        assert serve.proc.returncode is None  # still finishing what it took

        code = await asyncio.wait_for(serve.proc.wait(), GRACE + 5)
        took = time.monotonic() - term
        assert code == 0 and SLOW_S - 1 < took < GRACE, (code, took, serve.lines[-20:])
    finally:
        await serve.stop()
        await other.stop()

    # The command in flight at SIGTERM completed: channel made, incident stored, answer sent.
    reply = await slack.wait_for_response("d", timeout=1)
    assert str(reply.body.get("text", "")).startswith("Declared INC-1 "), reply.body
    # Every reminder was posted exactly once: 32 by the process that was stopping (they finished),
    # 8 by the other replica right after they were handed back.
    posted = Counter(c.args["channel"] for c in _reminders(slack))
    assert posted == Counter(dict.fromkeys(channels, 1))
    assert len(_reminders(slack, SERVE_TOKEN)) == SLOTS
    assert len(_reminders(slack, "xoxb-test-token")) == JOBS - SLOTS

    events = serve.events()  # every line is JSON (json.loads raised otherwise)
    names = [e["event"] for e in events]
    assert names.index("shutdown_signal") < names.index("shutdown_started") < names.index("shutdown_done")
    released = [e for e in events if e["event"] == "job_released"]
    assert len(released) == JOBS - SLOTS and {e["code"] for e in released} == {1}
    assert {e["job"] for e in released} == {"cadence.remind"} and all(e["incident_id"] for e in released)
    [declared] = [e for e in events if e["event"] == "request_done" and e.get("command") == "declare"]
    assert declared["incident_id"] == "INC-1" and len(declared["request_id"]) == 12
    assert not [e for e in events if e["event"] in ("after_ack_dropped", "after_ack_cut_short")]
    assert not [e for e in events if e["level"] in ("error", "critical")], [e for e in events if e["level"] == "error"]
    text = "\n".join(serve.lines)
    assert SERVE_TOKEN not in text and SERVE_SECRET not in text


async def test_a_job_still_running_at_the_end_of_the_grace_is_cut_and_left_to_its_lease(slack, redis_url):
    """Nothing blocks exit past the grace: a handler stuck in Slack is cancelled 3 s before it ends;
    the process still exits 0, and the job is redelivered when its lease runs out."""
    other = await start_app(slack, redis_url, SystemClock())
    serve = Serve(redis_url, slack)
    serve.env["FIREBREAK_SHUTDOWN_GRACE"] = "5"
    await serve.start()
    try:
        slack.delay_next("chat.postMessage", 7)  # past the grace (the fake answers it late, at teardown)
        await _seed_one(other, slack)
        await slack.wait_for(lambda c: c.method == "chat.postMessage", timeout=10)
        serve.proc.send_signal(signal.SIGTERM)
        term = time.monotonic()
        code = await asyncio.wait_for(serve.proc.wait(), 10)
        assert code == 0 and time.monotonic() - term < 5.0
    finally:
        await serve.stop()
        await other.stop()
    assert [e["event"] for e in serve.events() if e["event"] == "scheduler_stop_cancelling"]
    leased = await other.services.redis.zcard("fb:{sched}:lease")
    assert leased == 1  # still leased: delivered again after the lease, when the dedupe mark has lapsed


async def _seed_one(other: RunningApp, slack: FakeSlack) -> None:
    ch = slack.add_channel("inc-stuck")
    now = time.time()
    inc = Incident(
        id="INC-1",
        number=1,
        title="stuck",
        sev=1,
        channel_id=ch,
        channel_name="inc-stuck",
        declared_by="U_IC",
        declared_at=now,
        detected_at=now,
        next_update_due=now + 0.5,
        roles={"ic": RoleHolder(user="U_IC", since=now, by="U_IC")},
    )
    await repo(other.services).create(inc)
    await repo(other.services).bind_channel(inc.id, ch)
    await timers.sync(other.services, inc.id)
