"""Access is checked again when an approved request runs, and every pull under a grant is posted to
the security channel whatever comes of it."""

from __future__ import annotations

import re

from levers import executor
from levers.store import lever_store
from tests.support.approvals import buttons, text_of
from tests.support.harness import audit_entries

DRAIN = "lever kueue-hold-drain research-h100 --cell us-east-3"


async def _grant(world, scope: str = "kueue-hold-drain", user: str = "UX") -> str:
    out = await world.run(f"breakglass {scope} 30 ops lead unreachable", user=user)
    bid = out.split(" ", 1)[0]
    assert bid.startswith("BG-"), out
    assert "approved" in await world.press("breakglass.approve", bid, user="U_IC")
    return bid


async def _request(world, user: str) -> str:
    out = await world.run(DRAIN, user=user)
    m = re.search(r"REQ-\d+", out)
    assert m and "needs approval" in out, out
    return m.group(0)


def _card(world, rid: str) -> dict:
    [m] = [m for m in world.cards("lever.approve") if rid in text_of(m)]
    return m


def _stop_policy(world) -> str:
    return world.cell.get("clusterqueues", "research-h100")["spec"]["stopPolicy"]


async def test_a_grant_revoked_before_approval_stops_the_pull(world):
    await world.declare(ops="UOPS")
    bid = await _grant(world)
    rid = await _request(world, "UX")
    assert f"{bid} revoked" in await world.run(f"breakglass revoke {bid}", user="U_IC")

    out = await world.press("lever.approve", rid, user="U_IC")
    why = f"break-glass grant {bid} ended (revoked or expired) before it ran, and <@UX> does not hold ops"
    said = out.split("\n", 1)[1]  # after the line naming what was approved
    assert said == f"{rid} kueue-hold-drain research-h100 (us-east-3): failed: not applied: {why}; nothing changed."
    assert world.patches() == [] and _stop_policy(world) == "None"
    rec = await lever_store(world.svc).get(rid)
    assert rec.state == "failed" and rec.result["ok"] is False
    assert said in [m["text"] for m in world.slack.messages(world.channel)]
    assert buttons(_card(world, rid)) == [] and why in text_of(_card(world, rid))
    failed = [e for e in await audit_entries(world.app, "INC-1") if e["action"] == "lever.failed"]
    assert [(e["detail"]["request"], e["detail"]["reason"]) for e in failed] == [(rid, "grant ended")]
    used = [t for t in world.security_posts() if f"{bid} used" in t]
    assert len(used) == 2 and f"{rid} pending approval" in used[0] and f"{rid} now failed" in used[1], used


async def test_an_expired_grant_stops_the_pull_even_before_the_reaper(world):
    await world.declare(ops="UOPS")
    out = await world.run("breakglass kueue-hold-drain 5 ops lead unreachable", user="UX")
    bid = out.split(" ", 1)[0]
    await world.press("breakglass.approve", bid, user="U_IC")
    rid = await _request(world, "UX")
    world.svc.clock.advance(5 * 60 + 1)  # the grant is over; the approval window (10 min) is not
    out = await world.press("lever.approve", rid, user="U_IC")
    assert f"grant {bid} ended" in out and "nothing changed" in out, out
    assert world.patches() == [] and (await lever_store(world.svc).get(rid)).state == "failed"


async def test_a_role_handed_on_before_approval_stops_the_pull(world):
    await world.declare(ops="UOPS")
    rid = await _request(world, "UOPS")
    assert "is now" in await world.run("role ops <@UOTHER>", user="U_IC")

    out = (await world.press("lever.approve", rid, user="U_IC")).split("\n", 1)[1]
    assert out == (
        f"{rid} kueue-hold-drain research-h100 (us-east-3): failed: not applied: requester <@UOPS> "
        "no longer holds ops in INC-1; nothing changed."
    ), out
    assert world.patches() == [] and _stop_policy(world) == "None"
    assert (await lever_store(world.svc).get(rid)).state == "failed"
    assert out in [m["text"] for m in world.slack.messages(world.channel)]
    assert world.security_posts() == []  # no grant was involved
    failed = [e for e in await audit_entries(world.app, "INC-1") if e["action"] == "lever.failed"]
    assert [e["detail"]["reason"] for e in failed] == ["role removed"]


async def test_every_pull_under_a_grant_is_posted_whatever_its_outcome(world):
    await world.declare()
    bid = await _grant(world, scope="kueue-hold,kueue-hold-drain")

    def posts() -> list[str]:
        return [t for t in world.security_posts() if f"{bid} used" in t]

    assert "(dry run)" in await world.run("lever kueue-hold research-h100 --cell us-east-3 --dry-run", user="UX")
    assert "REQ-1 dry run (accepted by the API server); nothing changed" in posts()[-1], posts()

    out = await world.run("lever kueue-hold no-such-queue --cell us-east-3", user="UX")
    assert "not found" in out
    assert (
        "kueue-hold no-such-queue (us-east-3), (no REQ) refused: ClusterQueue no-such-queue not found" in posts()[-1]
    ), posts()

    rid = await _request(world, "UX")
    assert f"{rid} pending approval (HoldAndDrain evicts admitted workloads)" in posts()[-1], posts()
    await world.press("lever.deny", rid, user="U_IC")
    assert f"{rid} denied by <@U_IC>; nothing changed" in posts()[-1], posts()

    rid2 = await _request(world, "UX")
    world.svc.clock.advance(601)
    await world.tick()
    assert (await lever_store(world.svc).get(rid2)).state == "expired"
    assert f"{rid2} expired at 03:20 UTC without approval; nothing changed" in posts()[-1], posts()
    assert len(posts()) == 6 and world.patches() == []
    outcomes = [
        e["detail"]["outcome"] for e in await audit_entries(world.app, "INC-1") if e["action"] == "breakglass.used"
    ]
    assert len(outcomes) == 6 and outcomes[1].startswith("refused: ")


async def test_a_crash_mid_execution_is_settled_after_restart_and_the_card_says_so(world, monkeypatch):
    await world.declare(ops="UOPS")
    rid = await _request(world, "UOPS")

    async def dies_after_the_claim(svc, req_id, approver):
        assert await lever_store(svc).transition(req_id, {"approved"}, "executing", started_at=svc.clock.now())
        raise ConnectionError("process killed")

    monkeypatch.setattr(executor, "execute_approved", dies_after_the_claim)
    await world.press("lever.approve", rid, user="U_IC")
    monkeypatch.undo()
    assert (await lever_store(world.svc).get(rid)).state == "executing"
    await world.restart()  # too young to settle: another replica could still be running it
    assert (await lever_store(world.svc).get(rid)).state == "executing"
    world.svc.clock.advance(301)
    await world.tick()
    rec = await lever_store(world.svc).get(rid)
    assert rec.state == "failed" and world.patches() == []
    said = (
        "failed: interrupted before the write landed; nothing changed "
        "(found stuck in flight; read back, not re-applied)"
    )
    assert said in rec.result["message"]
    m = _card(world, rid)
    assert buttons(m) == [] and f"Approved by <@U_IC> (IC) at 03:10 UTC → {rec.result['message']}" in text_of(m)
    assert rec.result["message"] in [m["text"] for m in world.slack.messages(world.channel)]
