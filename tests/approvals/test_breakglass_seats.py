"""Break-glass requests that nobody could approve: the reply says who must be seated, by name."""

from __future__ import annotations

from tests.support.approvals import text_of
from tests.support.harness import audit_entries


async def test_ic_is_told_to_take_the_role_and_nothing_is_requested(world):
    await world.declare()
    out = await world.run("breakglass kueue-hold 30 ops lead unreachable", user="U_IC")
    assert out == (
        "Not requested, nothing changed: you're the IC, so you can't approve your own break-glass. "
        "Take the role instead: `/incident role ops <@U_IC>` (no break-glass needed)."
    ), out
    assert world.cards("breakglass.approve") == [] and world.security_posts() == []
    [e] = [e for e in await audit_entries(world.app, "INC-1") if e["action"] == "command.breakglass"]
    assert e["detail"]["result"] == "refused"


async def test_sev1_without_security_lead_names_the_seats(world):
    await world.declare(sev=1)
    out = await world.run("breakglass kueue-hold 30 ops lead unreachable", user="UX")
    assert out.startswith(
        "BG-1 requested: kueue-hold in any cell (not the fleet context) for 30 min from approval; "
        "nothing granted yet. It needs the IC (<@U_IC>) and a Security lead other than <@UX> by "
        "03:20 UTC. Seat them first: `/incident role security @x`."
    ), out
    [card] = world.cards("breakglass.approve")
    assert "Needs the IC (<@U_IC>) (plus the Security lead (nobody yet) at SEV1)" in text_of(card), text_of(card)

    # Once a security lead is seated, the card (re-rendered at the next vote) names them.
    assert "is now" in await world.app.run("role security <@USEC>", user="U_IC", channel=world.channel)
    assert "still needs the Security lead" in await world.press("breakglass.approve", "BG-1", user="U_IC")
    [card] = world.cards("breakglass.approve")
    shown = text_of(card)
    assert "the Security lead (<@USEC>)" in shown, shown
