"""A lever acts only inside its incident's cells, which only the IC widens (`scope add`); and
fleet-wide is decided by the API server a context reaches, not by the context's name."""

from __future__ import annotations

from levers.store import lever_store
from tests.support.harness import audit_entries
from tests.support.levers import OPS, patches, say

HOLD_EAST1 = "lever kueue-hold research-h100 --cell us-east-1"


def card_cells(app, inc) -> str:
    [card] = [m for m in app.slack.messages(inc.channel_id) if m.get("ts") == inc.card_ts]
    fields = [f["text"] for b in card["blocks"] for f in b.get("fields") or []]
    return next(f for f in fields if f.startswith("*Cells*"))


async def test_a_cell_outside_the_incident_is_refused_until_the_ic_adds_it(app, cells):
    inc = await app.declare(roles={"ops": OPS})  # scope: us-east-3
    out = await say(app, HOLD_EAST1, OPS, inc.channel_id)
    assert out == (
        f"us-east-1 is not in {inc.id}'s scope (us-east-3). The IC can widen it: "
        "`/incident scope add us-east-1`; nothing changed."
    ), out
    assert cells.east1.requests == []  # not even a read reached that cell
    assert await lever_store(app.services).for_incident(inc.id) == []

    # Only the IC widens a scope; a name that is no known cell (or the fleet) is refused by name.
    denied = await app.run("scope add us-east-1", user=OPS, channel=inc.channel_id)
    assert denied.startswith(f"Only the IC can run `scope` in {inc.id}"), denied
    unknown = await app.run("scope add eu-west-9", user="U_IC", channel=inc.channel_id)
    assert unknown.startswith("`eu-west-9` is not a cell Firebreak knows (cells: us-east-1, us-east-3)"), unknown
    fleet = await app.run("scope add global", user="U_IC", channel=inc.channel_id)
    assert "is the fleet context, not a cell" in fleet, fleet
    assert (await app.incident(inc.id)).cells == ["us-east-3"]

    added = await app.run("scope add us-east-1", user="U_IC", channel=inc.channel_id)
    assert added == f"{inc.id}'s scope is now us-east-3, us-east-1.", added
    again = await app.run("scope add us-east-1", user="U_IC", channel=inc.channel_id)
    assert again.startswith(f"us-east-1 is already in {inc.id}'s scope"), again
    now = await app.incident(inc.id)
    assert now.cells == ["us-east-3", "us-east-1"]
    assert "us-east-1" in card_cells(app, now)

    out = await say(app, HOLD_EAST1, OPS, inc.channel_id)
    assert "applied and verified" in out, out
    assert cells.east1.get("clusterqueue", "research-h100")["spec"]["stopPolicy"] == "Hold"
    assert not patches(cells.east3)

    scoped = [e for e in await audit_entries(app, inc.id) if e["action"] == "command.scope"]
    assert [(e["actor"], e["detail"]["result"]) for e in scoped] == [
        (OPS, "refused"),
        ("U_IC", "refused"),
        ("U_IC", "refused"),
        ("U_IC", "ok"),
        ("U_IC", "ok"),
    ]
    assert scoped[3]["detail"]["cells_after"] == ["us-east-3", "us-east-1"]


async def test_an_incident_with_no_cells_reaches_none(app, cells):
    inc = await app.declare(cells=(), roles={"ops": OPS})
    out = await say(app, HOLD_EAST1, OPS, inc.channel_id)
    assert out.startswith(f"us-east-1 is not in {inc.id}'s scope (no cells yet)."), out
    assert cells.east1.requests == []
