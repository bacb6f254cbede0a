"""How deliveries open and feed incidents: one incident per cell across replicas and concurrent
deliveries, joining an incident a person declared, nothing lost when a process dies after the
answer or Slack fails, detected_at, what a resolved incident's alerts do, and the empty IC seat."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bot.signals.store import store as signals_store
from tests.support.harness import T0, audit_entries, start_app
from tests.support.signals import (
    CELL_A,
    CELL_B,
    ONCALL_A,
    TOKEN,
    incidents,
    payload,
    pending_jobs,
    policy_dir,
    post,
    settle,
    summaries,
    wire,
)
from tests.support.workspace import GROUPS, OUTSIDER

CELLS = ("us-east-1", "us-east-2", "us-east-3")


def _storm(n: int, wave: int) -> list[dict]:
    return [
        wire("DCGMXid79", cell=CELLS[i % 3], node=f"gpu-{i % 50:04d}", fingerprint=f"{wave:04x}{i:012x}")
        for i in range(n)
    ]


async def _summaries_n(app, channel, n):
    got = summaries(app, channel)
    return got if len(got) >= n else None


async def test_two_replicas_and_20_concurrent_deliveries_open_one_incident_per_cell(slack, redis_url, clock, tmp_path):
    pol = policy_dir(tmp_path)
    apps = [
        await start_app(slack, redis_url, clock, alertmanager_token=TOKEN, firebreak_policy_dir=pol) for _ in range(2)
    ]
    for a in apps:
        a.services.scheduler.batch = 3  # a few jobs per claim, so both replicas take some at once
    try:
        sent = await asyncio.gather(*(post(apps[k % 2], payload(_storm(60, k))) for k in range(20)))
        assert [s for s, _ in sent] == [200] * 20
        # Both replicas run their scheduler at once until every delivery is handled.
        for _ in range(100):
            await asyncio.gather(*(a.tick() for a in apps))
            if await pending_jobs(apps[0]) == 0 and not await apps[0].services.redis.hlen("fb:{sched}:inflight"):
                break
            await asyncio.sleep(0.05)
        found = await incidents(apps[0])
        assert sorted(i.cells[0] for i in found) == sorted(CELLS)
        for inc in found:
            records = await signals_store(apps[0].services).alert_records(inc.id)
            assert len(records) == 20 * 20  # every alert of the cell, each once
            per_delivery = summaries(apps[0], inc.channel_id)
            assert 1 <= len(per_delivery) <= 20  # one per delivery that brought news, never one per alert
            assert sum(int(s.split(" alerts firing")[0].split()[-1]) for s in per_delivery) == 400
        entries = [e for e in await audit_entries(apps[0]) if e["action"] == "command.alerts"]
        assert sum(e["detail"]["opened"] for e in entries) == 3
    finally:
        for a in apps:
            await a.stop()


async def test_a_delivery_answered_by_a_process_that_then_died_is_handled_by_another(slack, redis_url, clock, tmp_path):
    pol = policy_dir(tmp_path)
    first = await start_app(slack, redis_url, clock, alertmanager_token=TOKEN, firebreak_policy_dir=pol)
    status, _ = await post(first, payload([wire("CellTTFTBurnFast")]))
    assert status == 200
    await first.stop()  # died after answering, before its scheduler ran the job
    second = await start_app(slack, redis_url, clock, alertmanager_token=TOKEN, firebreak_policy_dir=pol)
    try:
        [inc] = await settle(second, lambda: incidents(second))
        assert inc.cells == [CELL_A]
        await settle(second, lambda: _summaries_n(second, inc.channel_id, 1))
    finally:
        await second.stop()


async def test_when_slack_fails_the_job_comes_back_and_posts_once(app):
    app.slack.fail_next("chat.postMessage", "fatal_error", times=2)  # the card, then the summary
    status, _ = await post(app, payload([wire("KVCacheHigh", node="gpu-1")]))
    assert status == 200
    await app.tick()
    [inc] = await incidents(app)
    assert summaries(app, inc.channel_id) == []
    app.clock.advance(app.services.scheduler.lease + 1)  # the job's lease runs out: delivered again
    [summary] = await settle(app, lambda: _summaries_n(app, inc.channel_id, 1))
    assert "1 alert firing" in summary
    await app.tick()
    assert len(await incidents(app)) == 1 and len(summaries(app, inc.channel_id)) == 1


async def test_when_slack_refuses_the_channel_nothing_is_open_and_the_job_comes_back(app):
    app.slack.fail_next("conversations.create", "restricted_action")
    await post(app, payload([wire("KVCacheHigh")]))
    await app.tick()
    assert await incidents(app) == []
    app.clock.advance(app.services.scheduler.lease + 1)
    [inc] = await settle(app, lambda: incidents(app))
    assert inc.id == "INC-2"  # INC-1's number was taken before Slack refused; it is not reused
    await settle(app, lambda: _summaries_n(app, inc.channel_id, 1))


async def test_detected_at_is_when_the_first_alert_arrived(app):
    await post(app, payload([wire("CellTTFTBurnFast")]))
    app.clock.advance(90)  # the scheduler ran late
    [inc] = await settle(app, lambda: incidents(app))
    assert (inc.detected_at, inc.declared_at) == (T0, T0 + 90)


async def test_alerts_join_an_incident_a_person_declared_with_the_cell(app):
    declared = await app.declare("TTFT up in us-east-1", sev=2, user="U_IC", cells=(CELL_A,))
    app.clock.advance(60)
    await post(app, payload([wire("CellTTFTBurnFast", sev="1"), wire("KVCacheHigh", cell=CELL_B)]))
    [summary] = await settle(app, lambda: _summaries_n(app, declared.channel_id, 1))
    assert "1 alert firing in `us-east-1`: `CellTTFTBurnFast` ×1." in summary
    assert "These alerts say SEV1; INC-1 is SEV2. The IC raises it with `/incident sev 1 <reason>`." in summary
    found = await incidents(app)
    assert [i.cells for i in found] == [[CELL_A], [CELL_B]]  # CELL_B has no incident: it gets its own
    inc = await app.incident(declared.id)
    assert (inc.sev, inc.detected_at, inc.holder("ic")) == (2, T0, "U_IC")  # detected when declared, before it

    # Later deliveries for the cell keep feeding it.
    await post(app, payload([wire("KVCacheHigh", node="gpu-9")]))
    await settle(app, lambda: _summaries_n(app, declared.channel_id, 2))
    assert len(await incidents(app)) == 2


async def test_after_people_resolve_it_a_still_firing_alert_opens_nothing_and_a_new_one_does(app):
    old = wire("KVCacheHigh", node="gpu-1")
    await post(app, payload([old]))
    [inc] = await settle(app, lambda: incidents(app))
    out = await app.run("resolved", user=ONCALL_A, channel=inc.channel_id)
    assert "resolved" in out

    await post(app, payload([old]))  # Alertmanager repeats the group: the alert still fires
    await app.tick()
    assert len(await incidents(app)) == 1 and len(summaries(app, inc.channel_id)) == 1

    await post(app, payload([old, wire("DCGMXid79", node="gpu-2")]))  # something new fires
    found = await settle(app, lambda: _min(incidents(app), 2))
    new = found[1]
    records = await signals_store(app.services).alert_records(new.id)
    assert [r.alertname for r in records.values()] == ["DCGMXid79"]

    # The old alert resolving belongs to the resolved incident: it changes nothing now.
    await post(app, payload([{**old, "status": "resolved", "endsAt": "2026-11-30T04:00:00Z"}]))
    await app.tick()
    assert len(summaries(app, new.channel_id)) == 1


async def test_an_alert_whose_resolve_never_came_opens_an_incident_when_it_fires_again(app):
    """Issue 25: the same fingerprint with a later startsAt is a new firing (Alertmanager keeps
    startsAt while an alert fires), even when no resolve for the first one ever arrived."""
    first = wire("KVCacheHigh", node="gpu-1", starts_at="2026-11-30T03:05:00.123456789Z")
    await post(app, payload([first]))
    [inc] = await settle(app, lambda: incidents(app))
    assert "resolved" in await app.run("resolved", user=ONCALL_A, channel=inc.channel_id)

    again = {**first, "startsAt": "2026-11-30T05:40:00.5Z"}  # same fingerprint, fired again
    await post(app, payload([again]))
    found = await settle(app, lambda: _min(incidents(app), 2))
    [record] = (await signals_store(app.services).alert_records(found[1].id)).values()
    assert (record.fingerprint, record.starts_at) == (first["fingerprint"], "2026-11-30T05:40:00.5Z")

    # A repeat of the first episode still belongs to the resolved incident.
    await post(app, payload([first]))
    await app.tick()
    assert len(await incidents(app)) == 2 and len(summaries(app, found[1].channel_id)) == 1


async def _min(coro, n):
    got = await coro
    return got if len(got) >= n else None


async def test_resolved_alerts_alone_open_nothing(app):
    await post(app, payload([wire("KVCacheHigh", status="resolved")]))
    await app.tick()
    assert await incidents(app) == [] and app.slack.calls_to("chat.postMessage") == []


async def test_the_same_delivery_again_changes_nothing(app):
    body = payload([wire("KVCacheHigh", node=f"gpu-{i}") for i in range(3)])
    await post(app, body)
    [inc] = await settle(app, lambda: incidents(app))
    await settle(app, lambda: _summaries_n(app, inc.channel_id, 1))
    entries = len(await audit_entries(app))
    posts = len(app.slack.calls)
    for _ in range(3):
        assert (await post(app, body))[0] == 200
    await app.tick()
    assert len(await audit_entries(app)) == entries and len(app.slack.calls) == posts


@pytest.fixture
async def open_seat_app(slack, redis_url, clock, tmp_path: Path):
    """The policy with commands.yaml's `role` rule as issue 11 ships it: the IC, or the person
    named taking an empty IC seat (`receiver`; the command's own rule checks the rest)."""
    pol = policy_dir(tmp_path)
    cmds = pol / "commands.yaml"
    text = cmds.read_text()
    if "role:       {allowed: [ic, receiver]}" not in text:
        text = text.replace("role:       {allowed: [ic]}", "role:       {allowed: [ic, receiver]}")
        assert "[ic, receiver]" in text
        cmds.write_text(text)
    app = await start_app(slack, redis_url, clock, alertmanager_token=TOKEN, firebreak_policy_dir=pol)
    yield app
    await app.stop()


async def test_with_nobody_on_call_anyone_may_take_the_empty_ic_seat(open_seat_app):
    app = open_seat_app
    await post(app, payload([wire("KVCacheHigh", cell=CELL_B)]))
    [inc] = await settle(app, lambda: incidents(app))
    assert inc.holder("ic") is None
    ch = inc.channel_id

    out = await app.run("role ops <@UCAROL>", user="UCAROL", channel=ch)
    assert "its IC seat is empty: take it yourself with `/incident role ic <@UCAROL>`" in out
    out = await app.run("role ic <@UCAROL>", user="UBOB", channel=ch)  # not for someone else
    assert "Only the IC can run `role`" in out
    assert (await app.incident(inc.id)).holder("ic") is None

    out = await app.run("role ic <@UBOB>", user="UBOB", channel=ch)
    assert out.startswith(f"You are now Incident Commander of {inc.id}.")
    assert (await app.incident(inc.id)).holder("ic") == "UBOB"
    assert "UBOB" in app.slack.channel(ch).members
    assert any("took the empty IC seat" in m["text"] for m in app.slack.messages(ch))

    out = await app.run("role ic <@UCAROL>", user="UCAROL", channel=ch)  # taken now, by someone IC-eligible
    assert "<@UBOB> is IC of" in out and "ask them for a handoff" in out and "nothing changed" in out, out
    out = await app.run("role ops <@UCAROL>", user="UBOB", channel=ch)
    assert "is now Ops lead" in out
    [entry] = [e for e in await audit_entries(app, inc.id) if e["detail"].get("empty_seat")]
    assert entry["actor"] == "UBOB" and entry["action"] == "command.role"


async def test_with_nobody_on_call_the_empty_ic_seat_goes_only_to_someone_ic_eligible(open_seat_app):
    app = open_seat_app
    await post(app, payload([wire("KVCacheHigh", cell=CELL_B)]))
    [inc] = await settle(app, lambda: incidents(app))
    out = await app.run(f"role ic <@{OUTSIDER}>", user=OUTSIDER, channel=inc.channel_id)
    assert out == (
        f"<@{OUTSIDER}> isn't in @ml-ic or the on-call for {CELL_B}, which the IC seat needs: ask an admin of "
        "@ml-ic to add them; nothing changed."
    ), out
    assert (await app.incident(inc.id)).holder("ic") is None
    out = await app.run("role ic <@UCAROL>", user="UCAROL", channel=inc.channel_id)
    assert out.startswith(f"You are now Incident Commander of {inc.id}."), out


async def test_the_on_call_an_alert_seats_as_ic_is_ic_eligible_without_any_group(app):
    await post(app, payload([wire("KVCacheHigh", cell=CELL_A)]))
    [inc] = await settle(app, lambda: incidents(app))
    assert inc.holder("ic") == ONCALL_A and not any(ONCALL_A in users for users in GROUPS.values())
    ch = inc.channel_id
    assert "posted" in await app.run("handoff ic <@UCAROL>", user=ONCALL_A, channel=ch)
    assert "You are now" in await app.reply(await app.press("handoff.accept", f"{inc.id}/HO-1", "UCAROL", ch))
    # Handed back: the on-call of the incident's cell is eligible for the IC seat (roles.yaml `oncall`).
    out = await app.run(f"handoff ic <@{ONCALL_A}>", user="UCAROL", channel=ch)
    assert out.startswith("Handoff HO-2 posted: Incident Commander to"), out
    out = await app.run(f"handoff ic <@{OUTSIDER}>", user="UCAROL", channel=ch)
    assert f"isn't in @ml-ic or the on-call for {CELL_A}" in out, out
