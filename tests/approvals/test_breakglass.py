"""Break-glass end to end: request, votes, use under the grant, security posts, expiry, revocation."""

from __future__ import annotations

import asyncio
import re

import pytest

from bot.approvals.store import ballots
from tests.support.approvals import buttons, grant, text_of
from tests.support.harness import MODES, T0, audit_entries

pytestmark = pytest.mark.parametrize("mode", MODES)  # over HTTP and over Socket Mode (docs/operating.md)

HOLD = "lever kueue-hold research-h100 --cell us-east-3"


def card(world, bid: str) -> dict:
    [m] = [m for m in world.cards("breakglass.approve") if bid in (m.get("text") or "")]
    return m


async def test_grant_use_and_security_posts(world):
    await world.declare(ops="UOPS")
    refused = await world.run(HOLD, user="UX")
    assert "Only the Ops lead can pull `kueue-hold`" in refused and "breakglass" in refused
    assert world.patches() == []

    bid = await grant(world)
    m = card(world, bid)
    assert buttons(m) == ["breakglass.approve", "breakglass.deny"]
    assert any(f"{bid} break-glass requested" in t for t in world.security_posts())

    assert "you cannot decide it" in await world.press("breakglass.approve", bid, user="UX")
    assert "you hold none" in await world.press("breakglass.approve", bid, user="UOPS")
    world.svc.clock.advance(60)
    out = await world.press("breakglass.approve", bid, user="U_IC")
    assert "may pull kueue-hold in any cell (not the fleet context) until 03:41 UTC" in out
    assert buttons(card(world, bid)) == [] and "active until 03:41 UTC" in text_of(card(world, bid))

    done = await world.run(HOLD, user="UX")
    assert "REQ-" in done
    assert len(world.patches()) >= 1
    assert world.cell.get("clusterqueues", "research-h100")["spec"]["stopPolicy"] == "Hold"
    used = [t for t in world.security_posts() if f"{bid} used" in t]
    assert len(used) == 1 and "<@UX>" in used[0] and "kueue-hold research-h100" in used[0]
    entries = await audit_entries(world.app, "INC-1")
    assert [e["detail"]["grant"] for e in entries if e["action"] == "breakglass.used"] == [bid]

    # Undo under the grant: no approval needed, restored exactly, and posted too.
    rid = re.search(r"REQ-\d+", done).group(0)
    assert "REQ" in await world.run(f"undo {rid}", user="UX")
    assert world.cell.get("clusterqueues", "research-h100")["spec"]["stopPolicy"] == "None"
    assert any(f"{bid} used" in t and "undid kueue-hold" in t for t in world.security_posts())

    # Outside the scope: another lever is still refused.
    before = len(world.cell.requests)
    out = await world.run("lever jobset-suspend train-llm/pretrain-405b --cell us-east-3", user="UX")
    assert "Only the Ops lead can pull `jobset-suspend`" in out
    assert [r for r in world.cell.requests[before:] if r.method != "GET"] == []


async def test_expiry_is_checked_at_use_even_before_the_reaper_runs(world):
    await world.declare(ops="UOPS")
    bid = await grant(world, minutes=10)
    await world.press("breakglass.approve", bid, user="U_IC")
    world.svc.clock.set(T0 + 600 - 1)  # one second inside the grant
    assert "REQ-" in await world.run(HOLD + " --dry-run", user="UX")
    world.svc.clock.set(T0 + 600 + 1)  # one second after; the reaper has not run yet
    out = await world.run(HOLD, user="UX")
    assert "Only the Ops lead can pull `kueue-hold`" in out
    assert world.patches() == []
    assert (await ballots(world.svc).get("INC-1", bid)).state == "approved"
    await world.tick()
    b = await ballots(world.svc).get("INC-1", bid)
    assert b.state == "ended"
    assert "Grant ended at 03:20 UTC" in text_of(card(world, bid))
    assert any(f"{bid} in INC-1 ended" in t for t in world.security_posts())
    assert any(
        e["action"] == "command.breakglass_end" and e["detail"].get("ended")
        for e in await audit_entries(world.app, "INC-1")
    )
    await world.tick()  # the reaper ran once; nothing is left
    ends = [e for e in await audit_entries(world.app, "INC-1") if e["action"] == "command.breakglass_end"]
    assert len(ends) == 1


async def test_reaper_survives_a_restart_and_runs_once_across_replicas(world):
    await world.declare(ops="UOPS")
    bid = await grant(world, minutes=5)
    await world.press("breakglass.approve", bid, user="U_IC")
    await world.restart()
    other = await world.second_process()
    try:
        world.svc.clock.advance(5 * 60 + 30)
        await asyncio.gather(world.tick(), world.tick(other))
    finally:
        await other.stop()
    ends = [e for e in await audit_entries(world.app, "INC-1") if e["action"] == "command.breakglass_end"]
    assert len(ends) == 1 and ends[0]["detail"]["ended"] is True
    assert sum(f"{bid} in INC-1 ended" in t for t in world.security_posts()) == 1


async def test_revocation(world):
    await world.declare(ops="UOPS", security="USEC")
    bid = await grant(world)
    await world.press("breakglass.approve", bid, user="U_IC")
    assert "Only the grantee or the IC and the Security lead" in await world.run(
        f"breakglass revoke {bid}", user="UOPS"
    )
    out = await world.run(f"breakglass revoke {bid}", user="USEC")
    assert f"{bid} revoked" in out
    assert "Revoked by <@USEC>" in text_of(card(world, bid))
    assert any(f"{bid} in INC-1 revoked" in t for t in world.security_posts())
    assert "Only the Ops lead can pull `kueue-hold`" in await world.run(HOLD, user="UX")
    assert world.patches() == []
    assert "already revoked" in await world.run(f"breakglass revoke {bid}", user="U_IC")
    world.svc.clock.advance(3600)
    await world.tick()
    assert not any(
        e["action"] == "command.breakglass_end" and e["detail"].get("ended")
        for e in await audit_entries(world.app, "INC-1")
    )


async def test_sev1_needs_ic_and_security_distinct_from_the_requester(world):
    await world.declare(sev=1, ops="UOPS", security="USEC")
    bid = await grant(world, user="USEC")  # the security lead asks: they can't fill their own seat
    out = await world.press("breakglass.approve", bid, user="U_IC")
    assert "recorded" in out and "still needs the Security lead" in out
    assert "you cannot decide it" in await world.press("breakglass.approve", bid, user="USEC")
    assert "<@U_IC> (IC)" in text_of(card(world, bid)) and buttons(card(world, bid))
    b = await ballots(world.svc).get("INC-1", bid)
    assert b.state == "pending"

    bid2 = await grant(world, user="UX")
    assert "recorded" in await world.press("breakglass.approve", bid2, user="USEC")
    assert "one vote per person" in await world.press("breakglass.approve", bid2, user="USEC")
    out = await world.press("breakglass.approve", bid2, user="U_IC")
    assert "approved" in out
    b2 = await ballots(world.svc).get("INC-1", bid2)
    assert b2.state == "approved" and b2.filled == {"security": "USEC", "ic": "U_IC"}
    assert "Approved by <@U_IC> (IC) and <@USEC> (Security lead)" in text_of(card(world, bid2))


async def test_bad_requests_are_refused_with_what_to_type(world):
    await world.declare()
    assert "at most 60 minutes" in await world.run("breakglass kueue-hold 90 why not", user="UX")
    out = await world.run("breakglass cluster-admin 30 need everything", user="UX")
    assert "`cluster-admin` is not a Firebreak lever" in out and "kueue-hold" in out
    assert "number of minutes" in await world.run("breakglass kueue-hold soon please", user="UX")
    assert world.cards("breakglass.approve") == []
    assert await ballots(world.svc).all("INC-1") == []


async def test_unapproved_grant_expires_and_deny(world):
    await world.declare()
    bid = await grant(world)
    bid2 = await grant(world)
    assert f"{bid2} denied" in await world.press("breakglass.deny", bid2, user="U_IC")
    assert "Denied by <@U_IC>" in text_of(card(world, bid2))
    world.svc.clock.advance(601)
    await world.tick()
    assert (await ballots(world.svc).get("INC-1", bid)).state == "expired"
    assert "Expired at 03:20 UTC" in text_of(card(world, bid))
    assert "already expired" in await world.press("breakglass.approve", bid, user="U_IC")
    assert "Only the Ops lead can pull `kueue-hold`" in await world.run(HOLD, user="UX")
    assert world.patches() == []


async def test_status_shows_an_active_grant(world):
    await world.declare()
    bid = await grant(world, scope="cell:us-east-3", minutes=20)
    await world.press("breakglass.approve", bid, user="U_IC")
    out = await world.run("status", user="UX")
    assert f"{bid} break-glass <@UX> (every lever in cell us-east-3) until 03:30 UTC" in out


async def test_a_grant_covers_the_role_not_the_second_person(world):
    """Under a grant, a lever that needs approval still goes through the approval path."""
    await world.declare()
    bid = await grant(world, scope="kueue-hold-drain")
    await world.press("breakglass.approve", bid, user="U_IC")
    out = await world.run("lever kueue-hold-drain research-h100 --cell us-east-3", user="UX")
    rid = re.search(r"REQ-\d+", out).group(0)
    assert world.patches() == [] and world.cards("lever.approve")
    assert "you cannot decide it" in await world.press("lever.approve", rid, user="UX")
    await world.press("lever.approve", rid, user="U_IC")
    assert world.cell.get("clusterqueues", "research-h100")["spec"]["stopPolicy"] == "HoldAndDrain"
    used = [t for t in world.security_posts() if f"{bid} used" in t]
    assert len(used) == 2 and f"{rid} pending approval" in used[0] and f"{rid} now done" in used[1], used


async def test_the_requester_may_withdraw_a_pending_request(world):
    await world.declare()
    bid = await grant(world)
    assert f"{bid} revoked" in await world.run(f"breakglass revoke {bid}", user="UX")
    assert "withdrawn by <@UX>" in await world.press("breakglass.approve", bid, user="U_IC")
    assert buttons(card(world, bid)) == []
    assert "Only the Ops lead can pull `kueue-hold`" in await world.run(HOLD, user="UX")


async def test_a_failed_pull_under_a_grant_is_posted_to_security_too(world):
    await world.declare(ops="UOPS")
    bid = await grant(world)
    await world.press("breakglass.approve", bid, user="U_IC")
    world.cell.fail_next("PATCH", r"clusterqueues/research-h100", 403)
    out = await world.run(HOLD, user="UX")
    assert "failed" in out and "403" in out
    assert world.cell.get("clusterqueues", "research-h100")["spec"].get("stopPolicy") in (None, "None")
    used = [t for t in world.security_posts() if f"{bid} used" in t]
    assert len(used) == 1 and "now failed" in used[0], used
