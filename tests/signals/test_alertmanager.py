"""A real Alertmanager (0.25) fed through its API, delivering to the app's POST /alertmanager:
grouping by cell, a 400-alert storm, security alerts, tickets, redelivery and resolved alerts.

Alertmanager groups by `cell` with group_wait/group_interval 1s (tests/support/alertmanager.py),
so each test waits on outcomes: the scheduler's delivery jobs run when it ticks the app.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest
from redis.asyncio.cluster import RedisCluster

from bot.signals.store import store as signals_store
from tests.support.alertmanager import AlertmanagerServer, alert
from tests.support.harness import audit_entries
from tests.support.signals import CELL_A, CELL_B, ONCALL_A, TOKEN, incidents, settle, summaries, texts


@pytest.fixture
async def am(app, tmp_path, services_installed) -> AsyncIterator[AlertmanagerServer]:
    async with AlertmanagerServer(tmp_path / "am", f"{app.url}/alertmanager", TOKEN) as server:
        yield server


def page(name: str, cell: str | None, node: str | None = None, **labels: str) -> dict:
    extra = {"severity": "page", **labels}
    if node:
        extra["node"] = node
    return alert(
        name,
        cell=cell,
        labels=extra,
        annotations={"summary": f"{name} in {cell}"},
        generator_url=f"http://prometheus:9090/graph?g0.expr={name}",
    )


async def _alert_entries(app, inc: str | None = None) -> list[dict]:
    return [e for e in await audit_entries(app, inc) if e["action"] == "command.alerts"]


async def _incidents_n(app, n: int):
    found = await incidents(app)
    return found if len(found) >= n else None


async def _summaries_n(app, channel: str | None, n: int):
    got = summaries(app, channel)
    return got if len(got) >= n else None


async def test_alerts_are_grouped_by_cell_one_incident_and_one_summary_each(app, am):
    await am.post_alerts(
        [
            page("CellTTFTBurnFast", CELL_A, sev="2"),
            page("KVCacheHigh", CELL_A, node="gpu-a3-0101"),
            page("KVCacheHigh", CELL_A, node="gpu-a3-0102"),
            page("DCGMXid79", CELL_B, node="gpu-b1-0007"),
            page("DCGMXid79", CELL_B, node="gpu-b1-0008"),
            alert("NodeRemediationFlapping", cell=CELL_A, labels={"severity": "ticket"}),
        ]
    )
    found = await settle(app, lambda: _incidents_n(app, 2))
    by_cell = {i.cells[0]: i for i in found}
    assert set(by_cell) == {CELL_A, CELL_B} and len(found) == 2

    a, b = by_cell[CELL_A], by_cell[CELL_B]
    # SEV from the worst `sev` label (default 3); IC from policies/oncall.yaml, or an empty seat.
    assert (a.sev, a.holder("ic"), a.declared_by) == (2, ONCALL_A, "system")
    assert (b.sev, b.holder("ic")) == (3, None)
    # The title is commonAnnotations.summary, else the most frequent alertname.
    assert (a.title, b.title) == ("KVCacheHigh", "DCGMXid79 in us-east-2")
    assert ONCALL_A in app.slack.channel(a.channel_id).members

    [sa] = await settle(app, lambda: _summaries_n(app, a.channel_id, 1))
    assert "3 alerts firing in `us-east-1`: `KVCacheHigh` ×2, `CellTTFTBurnFast` ×1." in sa
    assert "2 nodes: `gpu-a3-0101`, `gpu-a3-0102`." in sa
    assert f"IC: <@{ONCALL_A}> (on call for `us-east-1`)" in sa
    assert "Ticket" not in sa and "NodeRemediationFlapping" not in sa  # tickets open and join nothing
    [sb] = await settle(app, lambda: _summaries_n(app, b.channel_id, 1))
    assert "2 alerts firing in `us-east-2`: `DCGMXid79` ×2." in sb
    assert "Nobody is on call for `us-east-2`" in sb and "/incident role ic @yourself" in sb
    card = app.slack.messages(b.channel_id)[0]
    assert "Incident Commander*: _empty_" in str(card["blocks"])

    # Kept for the postmortem: each alert's startsAt, generatorURL, fingerprint and labels.
    records = await signals_store(app.services).alert_records(a.id)
    assert len(records) == 3
    for fp, r in records.items():
        assert r.fingerprint == fp and r.starts_at and r.generator_url.startswith("http://prometheus:9090/graph")
        assert r.labels["cell"] == CELL_A and r.status == "firing" and r.received_at == a.detected_at
    [entry] = await _alert_entries(app, a.id)
    assert entry["actor"] == "system" and entry["detail"]["source"] == "alertmanager"
    assert entry["detail"]["opened"] is True and entry["detail"]["firing"] == 3


async def test_a_storm_of_400_alerts_is_one_incident_and_one_summary(app, am):
    storm = [page("DCGMXid79", CELL_A, node=f"gpu-a3-{i // 4:04d}", gpu=str(i % 4)) for i in range(400)]
    await am.post_alerts(storm)
    [inc] = await settle(app, lambda: incidents(app))
    [summary] = await settle(app, lambda: _summaries_n(app, inc.channel_id, 1))
    assert "400 alerts firing in `us-east-1`: `DCGMXid79` ×400. 100 nodes:" in summary
    assert "and 90 more." in summary
    # The card and the one summary: never a message per alert.
    assert len(texts(app, inc.channel_id)) == 2
    assert len(app.slack.calls_to("chat.postMessage")) == 2
    assert len(await _alert_entries(app)) == 1
    assert len(await signals_store(app.services).alert_records(inc.id)) == 400


async def test_a_security_alert_opens_its_own_sev1_posts_to_security_and_links_the_cell_incident(app, am):
    await am.post_alerts([page("CellTTFTBurnFast", CELL_A)])
    [cell_inc] = await settle(app, lambda: incidents(app))
    await settle(app, lambda: _summaries_n(app, cell_inc.channel_id, 1))
    before = len(texts(app, cell_inc.channel_id))

    await am.post_alerts(
        [
            alert(
                "WeightExfilSuspected",
                cell=CELL_A,
                labels={"category": "security", "severity": "ticket", "sev": "3", "tenant": "acme"},
                annotations={"summary": "Unusual egress of model weights"},
            )
        ]
    )
    found = await settle(app, lambda: _incidents_n(app, 2))
    sec = found[1]
    assert (sec.sev, sec.cells, sec.alert_group) == (1, [CELL_A], f"security:{CELL_A}")
    assert sec.title == "Security: Unusual egress of model weights"
    [line] = await settle(app, lambda: _list(texts(app, app.security)))
    assert line.startswith(f":lock: Security alert in `us-east-1`: {sec.id} (SEV1) opened in <#{sec.channel_id}>.")
    assert f"Open incident of the same cell: {cell_inc.id} in <#{cell_inc.channel_id}>." in line
    [summary] = await settle(app, lambda: _summaries_n(app, sec.channel_id, 1))
    assert "Security alert: SEV1 by policy." in summary and f"Open incident of the same cell: {cell_inc.id}" in summary
    # The cell's incident is not told (containment narrows who knows), and its alerts stay its own.
    assert len(texts(app, cell_inc.channel_id)) == before
    assert len(await signals_store(app.services).alert_records(cell_inc.id)) == 1
    [entry] = await _alert_entries(app, sec.id)
    assert entry["detail"]["linked"] == cell_inc.id and entry["detail"]["security_channel"] == "posted"


async def _list(items):
    return items or None


async def _webhook_notified(am: AlertmanagerServer) -> tuple[float, float]:
    """Alertmanager's own count of webhook notifications sent and failed (its /metrics)."""
    async with aiohttp.ClientSession() as s, s.get(f"{am.url}/metrics") as resp:
        body = await resp.text()
    sent = failed = 0.0
    for line in body.splitlines():
        if line.startswith('alertmanager_notifications_total{integration="webhook"}'):
            sent = float(line.split()[-1])
        if line.startswith('alertmanager_notifications_failed_total{integration="webhook"}'):
            failed = float(line.split()[-1])
    return sent, failed


async def test_tickets_open_nothing(app, am):
    ticket = {"severity": "ticket"}
    await am.post_alerts(
        [alert("NodeRemediationFlapping", cell=CELL_A, labels={**ticket, "node": f"n{i}"}) for i in range(5)]
    )
    for _ in range(100):  # until Alertmanager has delivered (and the app answered 200)
        sent, failed = await _webhook_notified(am)
        if sent:
            break
        await asyncio.sleep(0.1)
    assert (sent, failed) == (1, 0)
    await app.tick()
    assert await incidents(app) == [] and app.slack.calls_to("chat.postMessage") == []
    assert await audit_entries(app) == []


async def test_partial_then_full_redelivery_adds_only_what_is_new(app, am):
    first = [page("KVCacheHigh", CELL_A, node=f"gpu-a3-01{i:02d}") for i in range(2)]
    await am.post_alerts(first)
    [inc] = await settle(app, lambda: incidents(app))
    [s1] = await settle(app, lambda: _summaries_n(app, inc.channel_id, 1))
    assert "2 alerts firing" in s1

    # Alertmanager sends the whole group again with the two new ones: only those are news.
    more = [page("KVCacheHigh", CELL_A, node=f"gpu-a3-02{i:02d}") for i in range(2)]
    await am.post_alerts(first + more)
    got = await settle(app, lambda: _summaries_n(app, inc.channel_id, 2))
    assert "2 alerts firing in `us-east-1`: `KVCacheHigh` ×2. 2 nodes: `gpu-a3-0200`, `gpu-a3-0201`." in got[1]
    assert len(await incidents(app)) == 1
    assert len(await signals_store(app.services).alert_records(inc.id)) == 4
    entries = await _alert_entries(app, inc.id)
    assert [e["detail"]["firing"] for e in entries] == [2, 2]
    assert entries[1]["detail"]["unchanged"] == 2


async def test_resolved_alerts_go_on_the_timeline_and_people_resolve_the_incident(app, am):
    alerts = [page("KVCacheHigh", CELL_A, node=f"gpu-a3-01{i:02d}") for i in range(3)]
    await am.post_alerts(alerts)
    [inc] = await settle(app, lambda: incidents(app))
    await settle(app, lambda: _summaries_n(app, inc.channel_id, 1))

    await am.resolve_alerts(alerts[:2])
    got = await settle(app, lambda: _summaries_n(app, inc.channel_id, 2))
    assert got[1].startswith(":white_check_mark: 2 alerts resolved: `KVCacheHigh` ×2. 2 nodes:")
    assert "firing" not in got[1]
    entries = await _alert_entries(app, inc.id)
    assert (entries[-1]["detail"]["resolved"], entries[-1]["detail"]["firing"]) == (2, 0)
    records = await signals_store(app.services).alert_records(inc.id)
    assert sorted(r.status for r in records.values()) == ["firing", "resolved", "resolved"]
    assert all(r.ends_at for r in records.values() if r.status == "resolved")
    assert (await app.incident(inc.id)).status.value == "active"  # humans resolve incidents

    await am.resolve_alerts(alerts[2:])
    await settle(app, lambda: _summaries_n(app, inc.channel_id, 3))
    assert (await app.incident(inc.id)).status.value == "active"


async def test_an_alert_that_fires_again_after_its_incident_was_resolved_opens_one_and_feeds_it(app, am):
    """Issue 25: people resolve the incident while the alert still fires; its resolve arrives late
    (the incident is resolved, so it is not recorded there); then it fires again. Alertmanager
    gives the same fingerprint a new startsAt: a new episode, which opens an incident, and whose
    own resolve feeds that incident (not the old one)."""
    kv = page("KVCacheHigh", CELL_A, node="gpu-a3-0101")
    await am.post_alerts([kv])
    [old] = await settle(app, lambda: incidents(app))
    [first] = (await signals_store(app.services).alert_records(old.id)).values()
    assert "resolved" in await app.run("resolved", user=ONCALL_A, channel=old.channel_id)

    await am.resolve_alerts([kv])  # the late resolve: it belongs to the resolved incident
    await _delivered(app)
    assert len(await incidents(app)) == 1

    await asyncio.sleep(1.1)  # a startsAt (Alertmanager's "now") after the resolve's endsAt
    await am.post_alerts([kv])
    found = await settle(app, lambda: _incidents_n(app, 2))
    new = found[1]
    assert new.is_open and new.cells == [CELL_A]
    [again] = (await signals_store(app.services).alert_records(new.id)).values()
    assert again.fingerprint == first.fingerprint and again.starts_at > first.starts_at
    assert again.status == "firing"

    await am.resolve_alerts([kv])  # this episode's resolve goes to the incident it opened
    got = await settle(app, lambda: _summaries_n(app, new.channel_id, 2))
    assert got[1].startswith(":white_check_mark: 1 alert resolved: `KVCacheHigh`"), got[1]
    [done] = (await signals_store(app.services).alert_records(new.id)).values()
    assert done.status == "resolved" and len(await incidents(app)) == 2


async def _delivered(app) -> None:
    """Wait for Alertmanager's next delivery to reach the app (its body waits in Redis for its job),
    then run the job."""
    for _ in range(200):
        if await _pending(app):
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("Alertmanager delivered nothing")
    while await _pending(app):
        await app.tick()
        await asyncio.sleep(0.05)


async def _pending(app) -> bool:
    """A delivery body waiting for its job. KEYS on Redis Cluster asks one node unless told all."""
    r = app.services.redis
    every = {"target_nodes": RedisCluster.PRIMARIES} if isinstance(r, RedisCluster) else {}
    return bool(await r.keys("fb:signals:delivery:*", **every))
