"""The incident store keeps incidents; an incident's alerts are signals' state and its updates comms'
state, each in the store beside its capability, under the keys they always had (no migration)."""

from __future__ import annotations

from bot.comms.store import UpdateRecorded
from bot.comms.store import store as comms_store
from bot.incidents.store import IncidentRepo
from bot.signals.models import Alert
from bot.signals.store import AlertsRecorded
from bot.signals.store import store as signals_store
from tests.support.core import IC, TITLE
from tests.support.harness import T0


def test_the_incident_repo_keeps_no_alert_or_update_state() -> None:
    moved = ("record_alerts", "delivery_recorded", "alert_records", "record_update")
    assert [n for n in moved if hasattr(IncidentRepo, n)] == []


async def test_signals_records_an_incidents_alerts_under_the_same_keys(app):
    inc = await app.declare(TITLE, sev=3, user=IC)
    alerts = signals_store(app.services)
    fired = Alert(fingerprint="fp1", status="firing", labels={"alertname": "DCGMXid79"})
    got = await alerts.record_alerts(inc.id, "d1:g", T0 + 5, [fired.record(T0 + 5)])
    assert (got.code, got.fired, got.cleared) == (AlertsRecorded.RECORDED, [0], [])
    again = await alerts.record_alerts(inc.id, "d1:g", T0 + 9, [fired.record(T0 + 9)])
    assert (again.code, again.fired) == (AlertsRecorded.REPLAYED, [0])  # a retried delivery: the same answer
    assert await alerts.delivery_recorded(inc.id, "d1:g") and not await alerts.delivery_recorded(inc.id, "d2:g")
    assert list(await alerts.alert_records(inc.id)) == ["fp1"]
    assert await alerts.alert_records(inc.id, ["fp1", "fp9"]) == {"fp1": fired.record(T0 + 5)}
    redis = app.services.redis
    assert list(await redis.hgetall(f"fb:inc:{{{inc.id}}}:alerts")) == ["fp1"]
    assert await redis.exists(f"fb:inc:{{{inc.id}}}:alerts:delivery:d1:g/0")


async def test_comms_records_an_incidents_update_on_the_incident(app):
    inc = await app.declare(TITLE, sev=3, user=IC)
    now = T0 + 60
    got = await comms_store(app.services).record_update(inc.id, "rolling back", now, {1: 15, 2: 30, 3: 60, 4: 120})
    assert (got.code, got.due) == (UpdateRecorded.RECORDED, now + 60 * 60)
    after = await app.incident(inc.id)
    assert (after.last_update_text, after.last_update_at, after.next_update_due) == ("rolling back", now, now + 3600)
    missing = await comms_store(app.services).record_update("INC-99", "x", now, {1: 15, 2: 30, 3: 60, 4: 120})
    assert (missing.code, missing.due) == (UpdateRecorded.MISSING, None)
