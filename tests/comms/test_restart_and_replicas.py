"""Durability and replicas: restarts while reminders are due; three processes, one Redis, 200 incidents."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections import Counter

from bot.clock import SystemClock
from bot.comms import timers
from bot.config import load_settings
from bot.core import dispatch
from bot.core.request import Request, Source
from bot.incidents.commands import Update
from bot.incidents.models import Incident, RoleHolder
from bot.incidents.store import repo
from bot.runtime import build_services
from tests.support.comms import TITLE, escalations, reminders
from tests.support.core import REPO
from tests.support.harness import T0, audit_entries, start_app


async def test_reminder_due_while_every_process_was_down_fires_once_marked_late(slack, redis_url, clock):
    app = await start_app(slack, redis_url, clock)
    inc = await app.declare(TITLE, sev=1, cells=())
    await app.stop()  # every process down
    clock.set(T0 + 900 + 3600)  # both the reminder and the escalation fell due meanwhile
    app2, app3 = [await start_app(slack, redis_url, clock) for _ in range(2)]  # two replicas come back
    await asyncio.gather(app2.tick(), app3.tick())
    await asyncio.gather(app2.tick(), app3.tick())
    assert len(reminders(app2, inc.channel_id)) == 1
    assert len(escalations(app2, inc.channel_id)) == 1
    entries = [e for e in await audit_entries(app2, inc.id) if e["action"] == "command.remind"]
    assert len(entries) == 1 and entries[0]["detail"]["late"] is True
    assert entries[0]["detail"]["lateness_s"] == 3600
    await app2.stop()
    await app3.stop()


async def test_start_hook_reschedules_a_reminder_lost_between_transition_and_sync(app, clock):
    inc = await app.declare(TITLE, sev=1, cells=())
    s = app.services.scheduler
    await s.cancel("cadence.remind", inc.id)  # as if the process died before scheduling
    for hook in s.startup:
        await hook()
    assert await s.pending("cadence.remind", inc.id) == T0 + 900
    clock.set(T0 + 900)
    await app.tick()
    assert len(reminders(app, inc.channel_id)) == 1
    await s.cancel("cadence.escalate", inc.id)  # as if it died right after the reminder
    for hook in s.startup:
        await hook()
    assert await s.pending("cadence.escalate", inc.id) == T0 + 1200
    assert await s.pending("cadence.remind", inc.id) is None
    clock.set(T0 + 1200)
    await app.tick()
    assert len(escalations(app, inc.channel_id)) == 1


async def test_three_processes_200_incidents_every_reminder_once_and_on_time(slack, redis_url, clock):
    apps = [await start_app(slack, redis_url, clock) for _ in range(3)]
    incs = []
    for i in range(200):
        clock.set(T0 + i * 3)  # declarations spread over 10 minutes
        incs.append(await apps[i % 3].declare(f"incident {i}", sev=1 + i % 4, cells=()))
    resolved = {inc.id for inc in incs[::10]}
    updated = {inc.id for inc in incs[1::5]}
    for inc in incs:
        if inc.id in resolved:
            await apps[0].run("resolved", channel=inc.channel_id)
    end = T0 + 2 * 3600
    t = T0 + 600
    while t <= end:
        clock.set(t)
        await asyncio.gather(*(a.tick() for a in apps))
        if t == T0 + 1500:  # after the SEV1/2 first reminders, before the SEV3/4 ones
            for inc in incs:
                if inc.id in updated:
                    await dispatch.execute(
                        apps[1].services,
                        Request(
                            command=Update(text="Chat API, us-east: investigating"),
                            actor="U_IC",
                            source=Source.slash,
                            incident_id=inc.id,
                        ),
                    )
        t += 1
    entries = [e for e in await audit_entries(apps[0]) if e["action"] in ("command.remind", "command.escalate")]
    ok = [e for e in entries if e["detail"]["result"] == "ok"]
    assert all(e["detail"]["lateness_s"] <= 2 for e in ok)
    per_inc = Counter((e["incident"], e["action"]) for e in ok)
    for inc in incs:
        n_rem = len(reminders(apps[0], inc.channel_id))
        n_esc = len(escalations(apps[0], inc.channel_id))
        if inc.id in resolved:
            assert (n_rem, n_esc) == (0, 0), inc.id
            continue
        expected_rem = 1
        if inc.id in updated and inc.sev <= 2:
            # SEV1/2: first due at +15 min, update at 03:35 resets to +15/+30 min: reminded again in the window.
            expected_rem = 2
        assert n_rem == expected_rem == per_inc[(inc.id, "command.remind")], (inc.id, inc.sev, n_rem)
        assert n_esc == per_inc[(inc.id, "command.escalate")]
    # Every reminder and escalation was posted exactly once overall, shared by the three processes.
    assert sum(per_inc.values()) == len(ok)
    for a in apps:
        await a.stop()


async def test_real_scheduler_loops_in_three_processes_post_each_reminder_once_on_time(slack, redis_url):
    """The production loop (Scheduler.run) in three OS processes on the real clock: 30 reminders
    due over 5 s, each posted exactly once, none early, each within 2 s of its due."""
    cmd = [sys.executable, "-m", "tests.comms.scheduler_worker", redis_url, slack.api_url]
    workers = [
        await asyncio.create_subprocess_exec(*cmd, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        for _ in range(3)
    ]
    try:
        for w in workers:  # interpreter start-up is not the scheduler's lateness
            assert (await asyncio.wait_for(w.stdout.readline(), 30)).strip() == b"ready"
        svc = build_services(
            load_settings(
                slack_bot_token="xoxb-t", slack_signing_secret="t", slack_api_url=slack.api_url, redis_url=redis_url
            ),
            SystemClock(),
        )
        first, n, window = time.time() + 1.5, 30, 5.0
        due: dict[str, float] = {}
        for i in range(1, n + 1):
            ch = slack.add_channel(f"inc-mp-{i}")
            now = time.time()
            inc = Incident(
                id=f"INC-{i}",
                number=i,
                title=f"mp {i}",
                sev=1,
                channel_id=ch,
                channel_name=f"inc-mp-{i}",
                declared_by="U_IC",
                declared_at=now,
                detected_at=now,
                next_update_due=first + window * (i - 1) / n,
                roles={"ic": RoleHolder(user="U_IC", since=now, by="U_IC")},
            )
            await repo(svc).create(inc)
            await repo(svc).bind_channel(inc.id, ch)
            await timers.sync(svc, inc.id)
            due[ch] = inc.next_update_due
        assert time.time() < first, "seeding overran the first due time"
        await svc.chat.close()
        await svc.redis.aclose()
        await asyncio.sleep(first + window + 2.5 - time.time())
    finally:
        for w in workers:
            await w.communicate(b"")
    posts = [c for c in slack.calls_to("chat.postMessage") if str(c.args.get("text", "")).startswith(":alarm_clock:")]
    assert Counter(c.args["channel"] for c in posts) == Counter({ch: 1 for ch in due})
    lateness = sorted(c.timestamp - due[c.args["channel"]] for c in posts)
    assert lateness[0] >= 0 and lateness[-1] < 2.0, (lateness[0], lateness[-1])
