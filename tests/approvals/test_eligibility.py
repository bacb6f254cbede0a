"""Every Approve press checks the approver's eligibility for the seat at that moment (docs/security-model.md):
an IC who is not IC-eligible coordinates but does not approve, and a Security lead taken out of
@ml-security no longer grants break-glass. Nothing runs on a refused press."""

from __future__ import annotations

import re

from levers.store import lever_store
from tests.support.approvals import CELL
from tests.support.harness import audit_entries
from tests.support.workspace import GROUPS, OUTSIDER

DRAIN = "lever kueue-hold-drain research-h100 --cell us-east-3"


async def test_an_ineligible_declarer_is_ic_but_cannot_approve_as_ic(world):
    inc = await world.app.declare("Research queue starving", sev=2, cells=(CELL,), user=OUTSIDER)
    world.channel = inc.channel_id
    assert "is now Ops lead" in await world.run("role ops <@UOPS>", user=OUTSIDER)  # seating others: fine
    out = await world.run(DRAIN, user="UOPS")
    rid = re.search(r"REQ-\d+", out).group(0)
    assert "needs approval" in out, out

    out = await world.press("lever.approve", rid, user=OUTSIDER)
    assert out == (
        f"You hold the IC of {inc.id} but can't approve as it: <@{OUTSIDER}> isn't in @ml-ic or the on-call "
        "for us-east-3, which the IC seat needs: ask an admin of @ml-ic to add them; nothing changed."
    ), out
    assert world.patches() == [] and (await lever_store(world.svc).get(rid)).state == "pending_approval"
    [refused] = [e for e in await audit_entries(world.app, inc.id) if e["action"] == "command.approve"]
    assert refused["detail"]["result"] == "refused" and refused["detail"]["ineligible"] == OUTSIDER

    # Handing the IC seat to someone in @ml-ic gives the approval its power.
    assert "Handoff HO-1 posted" in await world.run("handoff ic <@UCAROL>", user=OUTSIDER)
    assert "You are now Incident Commander" in await world.press("handoff.accept", f"{inc.id}/HO-1", user="UCAROL")
    out = await world.press("lever.approve", rid, user="UCAROL")
    assert "applied" in out, out
    assert len(world.patches()) == 1


async def test_a_security_lead_out_of_the_group_cannot_grant_break_glass(world):
    await world.declare(sev=1, security="USEC")
    out = await world.run("breakglass kueue-hold 30 ops lead unreachable", user="UX")
    assert out.startswith("BG-1 requested"), out
    assert "still needs the Security lead" in await world.press("breakglass.approve", "BG-1", user="U_IC")

    world.slack.set_usergroup_users("ml-security", [u for u in GROUPS["ml-security"] if u != "USEC"])
    world.svc.clock.advance(world.svc.settings.firebreak_group_cache_seconds)  # the cached membership is over
    out = await world.press("breakglass.approve", "BG-1", user="USEC")
    assert out == (
        "You hold the Security lead of INC-1 but can't grant as it: <@USEC> isn't in @ml-security, which the "
        "Security lead seat needs: ask an admin of @ml-security to add them; nothing changed."
    ), out
    assert "awaiting approval" in await world.run("status", user="UX")
    assert not [t for t in world.security_posts() if "granted" in t]
