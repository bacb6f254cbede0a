"""The executor's crash-recovery intents have their own store (bot/core/intent_store.py), beside the
repair that reads them; the audit log only closes one inside its append, in the same script."""

from __future__ import annotations

from bot import audit
from bot.audit import AuditLog
from bot.core import intent_store
from tests.support.core import IC, TITLE
from tests.support.harness import T0, audit_entries

KEY = "fb:{audit}:intents"  # unchanged: the audit append closes an intent in its own slot


def test_the_audit_log_keeps_no_intents() -> None:
    assert [n for n in ("open_intent", "note_intent", "intents", "close_intent") if hasattr(AuditLog, n)] == []
    assert not hasattr(audit, "Intent")


async def test_an_intent_lives_in_its_own_store_under_the_same_key(app):
    intents = intent_store.store(app.services)
    await intents.open(
        "r-1", command="role", args={"role": "ops"}, actor=IC, source="slash", incident=None, started_at=T0
    )
    assert await intents.note("r-1", channel="C1") is True
    assert await intents.note("r-2", channel="C2") is False  # never opened: nothing noted
    assert set(await app.services.redis.hgetall(KEY)) == {"r-1", "r-1|notes"}
    [found] = await intents.open_ones()
    assert (found.request_id, found.command, found.notes) == ("r-1", "role", {"channel": "C1"})

    entry = await intents.close(found, incident=None, detail={"result": "interrupted"})
    assert entry is not None and (entry.action, entry.request_id) == ("command.role", "r-1")
    assert await intents.open_ones() == [] and await app.services.redis.hgetall(KEY) == {}
    assert await intents.close(found, incident=None, detail={}) is None  # closed already: nothing written
    assert [e["request_id"] for e in await audit_entries(app) if e["action"] == "command.role"] == ["r-1"]


async def test_a_request_opens_its_intent_and_its_entry_closes_it(app):
    await app.declare(TITLE, sev=3, user=IC)
    assert await intent_store.store(app.services).open_ones() == []
    [e] = [e for e in await audit_entries(app) if e["action"] == "command.declare"]
    assert e["detail"]["result"] == "ok"
