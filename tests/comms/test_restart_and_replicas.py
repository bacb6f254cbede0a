"""Durability and replicas: restarts while reminders are due; three processes, one Redis, 200 incidents."""
from __future__ import annotations

import asyncio
from collections import Counter

from bot.core import dispatch
from bot.core.request import Request, Source
from bot.incidents.commands import Update
from tests.comms.helpers import declare, escalations, reminders, tick
from tests.conftest import T0, audit_entries
from tests.harness import start_app


async def test_reminder_due_while_every_process_was_down_fires_once_marked_late(slack, redis_url, clock):
    first = await start_app(slack, redis_url, clock)
    inc = await declare(first, sev=1)
    await first.stop()  # every process down
    clock.set(T0 + 900 + 3600)  # both the reminder and the escalation fell due meanwhile
    replicas = [await start_app(slack, redis_url, clock) for _ in range(2)]
    await asyncio.gather(*(tick(r) for r in replicas))
    await asyncio.gather(*(tick(r) for r in replicas))
    assert len(reminders(replicas[0], inc.channel_id)) == 1
    assert len(escalations(replicas[0], inc.channel_id)) == 1
    entries = [e for e in await audit_entries(replicas[0], inc.id) if e["action"] == "command.remind"]
    assert len(entries) == 1 and entries[0]["detail"]["late"] is True
    assert entries[0]["detail"]["lateness_s"] == 3600
    for r in replicas:
        await r.stop()


async def test_start_hook_reschedules_a_reminder_lost_between_transition_and_sync(slack, redis_url, clock):
    app = await start_app(slack, redis_url, clock)
    inc = await declare(app, sev=1)
    s = app.services.extras["scheduler"]
    await s.cancel("cadence.remind", inc.id)  # as if the process died before scheduling
    from bot.scheduler import STARTUP

    for hook in STARTUP:
        await hook(app.services)
    assert await s.pending("cadence.remind", inc.id) == T0 + 900
    clock.set(T0 + 900)
    await tick(app)
    assert len(reminders(app, inc.channel_id)) == 1
    await s.cancel("cadence.escalate", inc.id)  # as if it died right after the reminder
    for hook in STARTUP:
        await hook(app.services)
    assert await s.pending("cadence.escalate", inc.id) == T0 + 1200
    assert await s.pending("cadence.remind", inc.id) is None
    clock.set(T0 + 1200)
    await tick(app)
    assert len(escalations(app, inc.channel_id)) == 1
    await app.stop()


async def test_three_processes_200_incidents_every_reminder_once_and_on_time(slack, redis_url, clock):
    apps = [await start_app(slack, redis_url, clock) for _ in range(3)]
    incs = []
    for i in range(200):
        clock.set(T0 + i * 3)  # declarations spread over 10 minutes
        incs.append(await declare(apps[i % 3], f"incident {i}", sev=1 + i % 4))
    resolved = {inc.id for inc in incs[::10]}
    updated = {inc.id for inc in incs[1::5]}
    for inc in incs:
        if inc.id in resolved:
            await apps[0].run("resolved", channel=inc.channel_id)
    end = T0 + 2 * 3600
    t = T0 + 600
    while t <= end:
        clock.set(t)
        await asyncio.gather(*(tick(a) for a in apps))
        if t == T0 + 1500:  # after the SEV1/2 first reminders, before the SEV3/4 ones
            for inc in incs:
                if inc.id in updated:
                    await dispatch.execute(apps[1].services, Request(
                        command=Update(text="Chat API, us-east: investigating"), actor="U_IC",
                        source=Source.slash, incident_id=inc.id))
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
