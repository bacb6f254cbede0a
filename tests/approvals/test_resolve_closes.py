"""Resolving an incident ends its grants and expires its pending approval and break-glass requests."""
from __future__ import annotations

import re

from levers.requests import get_request
from tests.approvals.conftest import buttons, text_of
from tests.conftest import audit_entries

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

    assert await world.app.run("resolved", user="U_IC", channel=world.channel) == "INC-1 is now resolved."

    ballots = {b.id: b.state for b in await world.svc.extras["ballots"].all("INC-1")}
    assert ballots == {active: "ended", pending: "expired", rid: "expired"}, ballots
    assert (await get_request(world.svc.redis, rid)).state == "expired"
    for action, bid in (("breakglass.approve", active), ("breakglass.approve", pending), ("lever.approve", rid)):
        m = card(world, action, bid)
        assert buttons(m) == [] and "INC-1 was resolved" in text_of(m), text_of(m)
    sec = world.security_posts()
    assert any(f"{active} in INC-1 ended" in t and "resolved" in t for t in sec), sec
    assert any(f"{pending} in INC-1 closed unapproved" in t for t in sec), sec
    closed = {e["detail"]["request"]: e["detail"]["closed"] for e in await audit_entries(world.app, "INC-1")
              if e["action"] == "approval.closed_at_resolve"}
    assert closed == {active: "ended", pending: "expired", rid: "expired"}

    # Nothing they covered works any more, and nothing reaches the API server.
    assert "is resolved" in await world.press("lever.approve", rid, user="U_IC")
    assert "is resolved" in await world.run(HOLD, user="UX")
    assert world.patches() == []
    assert await world.tick() >= 0  # the cancelled timers find nothing to do
    assert {b.id: b.state for b in await world.svc.extras["ballots"].all("INC-1")} == ballots
