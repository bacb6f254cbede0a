"""Issue 35 item 1, incident squatting, tried as an attacker would: anyone declares with a cell's
name and is IC. The cell's pages must not join an incident whose IC is not IC-eligible for that
cell; someone IC-eligible may take the IC seat from such a holder (audited, announced); and
`declare --cell` takes only cells the policy knows.

The app (tests/signals/conftest.py): oncall.yaml names ONCALL_A for us-east-1 and nobody for
us-east-2; OUTSIDER is in no user group; U_IC is in @ml-ic."""

from __future__ import annotations

from bot.signals.store import store as signals_store
from tests.support.harness import audit_entries
from tests.support.signals import CELL_A, ONCALL_A, incidents, payload, post, settle, summaries, texts, wire
from tests.support.workspace import OUTSIDER


async def _two(app):
    found = await incidents(app)
    return found if len(found) >= 2 else None


async def test_a_page_does_not_join_an_incident_a_squatter_declared_with_its_cell(app):
    squat = await app.declare("All of us-east-1", sev=4, user=OUTSIDER, cells=(CELL_A,))
    await post(app, payload([wire("CellTTFTBurnFast")]))
    _, own = await settle(app, lambda: _two(app))
    # The page opened its own incident, its on-call seated as IC; the squatter's heard nothing of it.
    assert own.cells == [CELL_A] and own.holder("ic") == ONCALL_A and own.alert_group == CELL_A
    assert summaries(app, squat.channel_id) == []
    assert await signals_store(app.services).alert_records(squat.id) == {}

    # Later deliveries for the cell keep feeding the page's own incident.
    await post(app, payload([wire("KVCacheHigh", node="gpu-9")]))
    await settle(app, lambda: _n(summaries(app, own.channel_id), 2))
    assert len(await incidents(app)) == 2 and summaries(app, squat.channel_id) == []


def _n(items, n):
    async def check():
        return len(items) >= n or None

    return check()


async def test_a_page_joins_an_incident_whose_ic_is_on_call_for_the_cell(app):
    # ONCALL_A is in no group: IC-eligible only as us-east-1's on-call.
    declared = await app.declare("TTFT up", sev=2, user=ONCALL_A, cells=(CELL_A,))
    await post(app, payload([wire("CellTTFTBurnFast")]))
    await settle(app, lambda: _n(summaries(app, declared.channel_id), 1))
    assert [i.id for i in await incidents(app)] == [declared.id]


async def test_an_ic_eligible_person_takes_the_seat_from_a_squatter(app):
    squat = await app.declare("All of us-east-1", sev=4, user=OUTSIDER, cells=(CELL_A,))
    out = await app.run(f"role ic <@{ONCALL_A}>", user=ONCALL_A, channel=squat.channel_id)
    assert out.startswith(f"You are now Incident Commander of {squat.id}"), out
    assert f"<@{OUTSIDER}>" in out
    inc = await app.incident(squat.id)
    assert inc.holder("ic") == ONCALL_A
    said = texts(app, squat.channel_id)
    assert any(f"<@{ONCALL_A}> took the IC seat of {squat.id} from <@{OUTSIDER}>" in t for t in said), said
    [entry] = [
        e for e in await audit_entries(app, squat.id) if e["action"] == "command.role" and e["detail"]["result"] == "ok"
    ]
    assert entry["detail"]["previous"] == OUTSIDER and entry["detail"]["took_from_ineligible"] is True
    # The squatter, no longer IC, can't resolve it.
    assert "Only" in await app.run("resolved", user=OUTSIDER, channel=squat.channel_id)
    assert (await app.incident(squat.id)).is_open


async def test_nobody_takes_the_seat_from_an_eligible_ic_and_nobody_ineligible_takes_it(app):
    inc = await app.declare("TTFT up", sev=2, user="U_IC", cells=(CELL_A,))
    out = await app.run(f"role ic <@{ONCALL_A}>", user=ONCALL_A, channel=inc.channel_id)
    assert "ask them for a handoff" in out and "nothing changed" in out, out
    assert (await app.incident(inc.id)).holder("ic") == "U_IC"

    squat = await app.declare("All of us-east-1", sev=4, user=OUTSIDER, cells=(CELL_A,))
    out = await app.run("role ic <@U0STRANGER>", user="U0STRANGER", channel=squat.channel_id)
    assert "isn't in @ml-ic or the on-call for us-east-1" in out and "nothing changed" in out, out
    # Taking it for someone else is not a thing: the IC seat moves by handoff.
    out = await app.run(f"role ic <@{ONCALL_A}>", user="U_IC", channel=squat.channel_id)
    assert (await app.incident(squat.id)).holder("ic") == OUTSIDER, out


async def test_declare_takes_only_cells_the_policy_knows(app):
    out = await app.run("declare All the cells --sev 4 --cell us-east-1 --cell made-up-9", user=OUTSIDER)
    assert out.startswith("`made-up-9` is not a cell Firebreak knows"), out
    assert out.endswith(f"(cells: {CELL_A}); nothing was declared."), out  # the cells oncall.yaml names
    assert await incidents(app) == []
    assert (await app.run(f"declare Real one --sev 4 --cell {CELL_A}", user=OUTSIDER)).startswith("Declared INC-")
