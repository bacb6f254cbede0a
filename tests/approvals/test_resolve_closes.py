"""Resolving an incident ends its grants, expires its pending approval and break-glass requests,
cancels the lever requests that never ran (none runs afterwards, whatever timer fires or button
is pressed), lists the levers still in force, and leaves `undo` working for the lever's roles."""

from __future__ import annotations

import re

from bot.approvals.jobs import EXPIRE_JOB, REAP_JOB
from bot.approvals.store import ballots
from levers.store import lever_store
from tests.support.approvals import buttons, text_of
from tests.support.harness import audit_entries

HOLD = "lever kueue-hold research-h100 --cell us-east-3"
DRAIN = "lever kueue-hold-drain research-h100 --cell us-east-3"


def card(world, action: str, rid: str) -> dict:
    [m] = [m for m in world.cards(action) if rid in (m.get("text") or "")]
    return m


async def test_resolve_ends_grants_and_expires_pending_requests(world):
    await world.declare(ops="UOPS")
    active = (await world.run("breakglass kueue-hold 30 ops lead unreachable", user="UX")).split()[0]
    assert "may pull" in await world.press("breakglass.approve", active, user="U_IC")
    pending = (await world.run("breakglass jobset-suspend 30 need it", user="UY")).split()[0]
    rid = re.search(r"REQ-\d+", await world.run(DRAIN, user="UOPS")).group(0)
    assert world.patches() == []
    sched = world.svc.scheduler

    async def timers() -> list[float | None]:
        return [
            await sched.pending(EXPIRE_JOB, rid),
            await sched.pending(EXPIRE_JOB, pending),
            await sched.pending(REAP_JOB, active),
        ]

    assert None not in await timers()

    assert await world.app.run("resolved", user="U_IC", channel=world.channel) == (
        f"INC-1 is now resolved.\nCancelled (never ran): {rid}."
    )

    states = {b.id: b.state for b in await ballots(world.svc).all("INC-1")}
    assert states == {active: "ended", pending: "expired", rid: "expired"}, states
    assert (await lever_store(world.svc).get(rid)).state == "cancelled"
    for action, bid in (("breakglass.approve", active), ("breakglass.approve", pending), ("lever.approve", rid)):
        m = card(world, action, bid)
        assert buttons(m) == [] and "INC-1 was resolved" in text_of(m), text_of(m)
    sec = world.security_posts()
    assert any(f"{active} in INC-1 ended" in t and "resolved" in t for t in sec), sec
    assert any(f"{pending} in INC-1 closed unapproved" in t for t in sec), sec
    closed = {
        e["detail"]["request"]: e["detail"]["closed"]
        for e in await audit_entries(world.app, "INC-1")
        if e["action"] == "approval.closed_at_resolve"
    }
    assert closed == {active: "ended", pending: "expired", rid: "expired"}

    # Nothing they covered works any more, and nothing reaches the API server.
    assert "is resolved" in await world.press("lever.approve", rid, user="U_IC")
    assert "is resolved" in await world.run(HOLD, user="UX")
    assert world.patches() == []
    # Their timers were cancelled: past every window and grant, no job runs and nothing more is said.
    assert await timers() == [None, None, None]
    entries, posts = len(await audit_entries(world.app)), len(world.slack.calls)
    world.svc.clock.advance(31 * 60)  # the grant was for 30 min; the approval windows are 10
    assert await world.tick() == 0
    assert len(await audit_entries(world.app)) == entries and len(world.slack.calls) == posts
    assert {b.id: b.state for b in await ballots(world.svc).all("INC-1")} == states


async def test_an_approved_request_never_runs_after_resolve(world):
    await world.declare(ops="UOPS")
    rid = re.search(r"REQ-\d+", await world.run(DRAIN, user="UOPS")).group(0)
    # The deciding vote was recorded, and the record approved, by a process that died before it
    # executed: what the settle timer (and the restart sweep) would finish.
    now = world.svc.clock.now()
    b = await ballots(world.svc).get("INC-1", rid)
    on_card = (b.card_channel, b.card_ts)
    assert (
        await ballots(world.svc).vote("INC-1", rid, "U_IC", "approve", now, on_card, ["ic"])
    ).code.value == "approved"
    assert await lever_store(world.svc).transition(rid, {"pending_approval"}, "approved", approved_by="U_IC")
    assert await world.svc.scheduler.pending(EXPIRE_JOB, rid) is not None

    out = await world.app.run("resolved", user="U_IC", channel=world.channel)
    assert out == f"INC-1 is now resolved.\nCancelled (never ran): {rid}.", out
    rec = await lever_store(world.svc).get(rid)
    assert rec.state == "cancelled"
    said = [m["text"] for m in world.slack.messages(world.channel)]
    assert any(f"{rid} kueue-hold-drain research-h100 (us-east-3) (asked by <@UOPS>)" in t for t in said), said
    [entry] = [e for e in await audit_entries(world.app, "INC-1") if e["action"] == "lever.cancelled"]
    assert entry["detail"]["request"] == rid and entry["detail"]["was"] == "approved"

    # The settle timer fires, and the IC presses Approve: nothing reaches the API server.
    world.svc.clock.advance(11 * 60)
    await world.tick()
    assert "is resolved" in await world.press("lever.approve", rid, user="U_IC")
    assert world.patches() == []
    assert (await lever_store(world.svc).get(rid)).state == "cancelled"


async def test_undo_lifts_a_hold_after_resolve(world):
    await world.declare(ops="UOPS")
    before = world.cell.get("clusterqueue", "research-h100")["spec"].get("stopPolicy")
    out = await world.run(HOLD, user="UOPS")
    assert "applied and verified" in out, out
    rid = re.search(r"REQ-\d+", out).group(0)
    assert world.cell.get("clusterqueue", "research-h100")["spec"]["stopPolicy"] == "Hold"

    out = await world.app.run("resolved", user="U_IC", channel=world.channel)
    assert out == (
        f"INC-1 is now resolved.\nStill in force:\n• {rid} kueue-hold research-h100 (us-east-3): `/incident undo {rid}`"
    ), out

    # Only the lever's roles undo it; the rest of a resolved channel stays closed.
    refused = await world.run(f"undo {rid}", user="UX")
    assert refused.startswith("Not undone, nothing changed: Only the Ops lead can undo `kueue-hold` in INC-1"), refused
    assert "is resolved" in await world.run(HOLD, user="UOPS")
    assert "is resolved" in await world.run("scope add us-east-1", user="U_IC")

    out = await world.run(f"undo {rid}", user="UOPS")
    assert "undone" in out, out
    assert world.cell.get("clusterqueue", "research-h100")["spec"].get("stopPolicy") == before != "Hold"
    assert (await lever_store(world.svc).get(rid)).state == "undone"
