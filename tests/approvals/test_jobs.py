"""Approval timers run as system requests: an error is retried by the scheduler, and a
security-channel post that failed is said in the reply and kept in the audit."""

from __future__ import annotations

from redis.exceptions import ConnectionError as RedisConnectionError

from bot.approvals.commands import ApprovalSettle
from bot.approvals.store import Ballots
from levers.store import lever_store
from tests.support.approvals import grant, request_drain
from tests.support.harness import audit_entries


async def test_a_failed_settle_is_delivered_again_and_settles(world, monkeypatch):
    rid = await request_drain(world)
    real, calls = Ballots.expire, []

    async def blip_once(self, *a, **kw):
        calls.append(a)
        if len(calls) == 1:
            raise RedisConnectionError("store blip")
        return await real(self, *a, **kw)

    monkeypatch.setattr(Ballots, "expire", blip_once)
    settles = f"command.{ApprovalSettle.name}"
    world.svc.clock.advance(601)
    await world.tick()
    assert (await lever_store(world.svc).get(rid)).state == "pending_approval"
    [failed] = [e for e in await audit_entries(world.app, "INC-1") if e["action"] == settles]
    assert failed["detail"]["result"] == "error"

    world.svc.clock.advance(world.svc.scheduler.lease + 1)  # the job's lease runs out
    await world.tick()
    assert (await lever_store(world.svc).get(rid)).state == "expired"
    entries = [e for e in await audit_entries(world.app, "INC-1") if e["action"] == settles]
    assert [e["detail"]["result"] for e in entries] == ["error", "ok"]
    assert entries[1]["detail"]["settled"] == "expired"
    assert world.patches() == []


async def test_a_failed_security_post_is_said_and_audited(world):
    await world.declare(ops="UOPS")
    bid = await grant(world)
    world.slack.fail_next("chat.postMessage", "channel_not_found", times=2)  # the channel note, then security
    out = await world.press("breakglass.approve", bid, user="U_IC")
    assert f"\n{bid} approved" in out and "could not post this to the security channel" in out, out
    [vote] = [e for e in await audit_entries(world.app, "INC-1") if e["action"] == "command.approve"]
    assert vote["detail"]["security_posted"] is False
    requested = [e for e in await audit_entries(world.app, "INC-1") if e["action"] == "command.breakglass"]
    assert requested[0]["detail"]["security_posted"] is True
