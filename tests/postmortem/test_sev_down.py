"""`postmortem sev <N> <reason>`: the only way a SEV goes down. Refused while the incident is
open, only downwards after resolve, the IC's, with a reason; audited, announced, and kept on the
incident's own log (facts().sev_lowered)."""

from __future__ import annotations

import asyncio

import pytest

from bot.incidents.store import SevLowered, repo
from bot.postmortem.store import facts
from tests.support.harness import T0, RunningApp, audit_entries


async def pm_entries(app: RunningApp, inc_id: str) -> list[dict]:
    return [e for e in await audit_entries(app, inc_id) if e["action"] == "command.postmortem"]


async def test_refused_while_open_in_every_open_state(app):
    inc = await app.declare("GPU hang", sev=2)
    ch = inc.channel_id
    out = await app.run("postmortem sev 3 smaller than we thought", channel=ch)
    assert out == (
        f"SEV never goes down during an incident: {inc.id} is active. "
        f"Once it is resolved, `/incident postmortem sev 3 <reason>` lowers it."
    )
    await app.run("mitigated", channel=ch)
    out = await app.run("postmortem sev 4 smaller than we thought", channel=ch)
    assert out.startswith(f"SEV never goes down during an incident: {inc.id} is mitigated.")
    assert (await app.incident(inc.id)).sev == 2
    assert (await facts(app.services, inc.id)).sev_lowered == []
    details = [e["detail"] for e in await pm_entries(app, inc.id)]
    assert [d["result"] for d in details] == ["refused", "refused"]
    assert details[0]["sev_current"] == 2 and details[0]["sev_asked"] == 3


async def test_after_resolve_it_lowers_is_audited_announced_and_recorded(app, clock):
    inc = await app.declare("GPU hang", sev=1)
    ch = inc.channel_id
    await app.run("resolved", channel=ch)
    clock.advance(3600)
    out = await app.run("postmortem sev 3 only the research queue was hit", channel=ch)
    assert out == f"{inc.id} is now SEV3 (was SEV1)."
    after = await app.incident(inc.id)
    assert (after.sev, after.sev_reason, after.status.value) == (3, "only the research queue was hit", "resolved")
    [change] = (await facts(app.services, inc.id)).sev_lowered
    assert (change.from_, change.to, change.reason, change.by, change.at) == (
        1,
        3,
        "only the research queue was hit",
        "U_IC",
        T0 + 3600,
    )
    [e] = await pm_entries(app, inc.id)
    assert e["actor"] == "U_IC"
    assert {k: e["detail"][k] for k in ("result", "sev_from", "sev_to", "reason")} == {
        "result": "ok",
        "sev_from": 1,
        "sev_to": 3,
        "reason": "only the research queue was hit",
    }
    said = [m["text"] for m in app.slack.messages(ch) if m["text"].startswith(":arrow_down:")]
    assert said == [
        f":arrow_down: {inc.id} lowered SEV1 → SEV3 in the postmortem by <@U_IC>: only the research queue was hit"
    ]
    # The pinned card shows the new SEV.
    card = app.slack.calls_to("chat.update")[-1].args
    assert "SEV3" in card["text"]
    # Lowered again later: both kept, in order.
    await app.run("postmortem sev 4 no customer saw it", channel=ch)
    assert [(c.from_, c.to) for c in (await facts(app.services, inc.id)).sev_lowered] == [(1, 3), (3, 4)]


@pytest.mark.parametrize(
    ("typed", "says"),
    [
        (
            "postmortem sev 1 it was worse",
            "`postmortem sev` only lowers: INC-1 is SEV2 and SEV1 is worse. A SEV is raised while the incident is "
            "open (`/incident sev`); give a number above 2, or leave it.",
        ),
        ("postmortem sev 2 same", "INC-1 is already SEV2; nothing changed."),
    ],
)
async def test_after_resolve_only_downwards(app, typed, says):
    inc = await app.declare("GPU hang", sev=2)
    await app.run("resolved", channel=inc.channel_id)
    assert await app.run(typed, channel=inc.channel_id) == says
    assert (await app.incident(inc.id)).sev == 2
    assert (await facts(app.services, inc.id)).sev_lowered == []
    assert [e["detail"]["result"] for e in await pm_entries(app, inc.id)] == ["refused"]


@pytest.mark.parametrize(
    ("typed", "says"),
    [
        ("postmortem sev 3", "say why the SEV goes down: `postmortem sev 3 <reason>`"),
        ("postmortem sev", "give the SEV and why"),
        ("postmortem sev 5 tiny", "`5` is not a SEV: use 1 (worst) to 4"),
        ("postmortem sev three tiny", "`three` is not a SEV"),
    ],
)
async def test_a_reason_and_a_real_sev_are_required(app, typed, says):
    inc = await app.declare("GPU hang", sev=2)
    await app.run("resolved", channel=inc.channel_id)
    out = await app.run(typed, channel=inc.channel_id)
    assert says in out and "Usage:" in out
    assert (await app.incident(inc.id)).sev == 2
    assert await pm_entries(app, inc.id) == []


async def test_only_the_ic_lowers(app):
    inc = await app.declare("GPU hang", sev=2, roles={"ops": "UOPS"})
    await app.run("resolved", channel=inc.channel_id)
    out = await app.run("postmortem sev 4 tiny", user="UOPS", channel=inc.channel_id)
    assert out == f"Only the IC can lower {inc.id}'s SEV (<@U_IC>); nothing changed."
    assert (await app.incident(inc.id)).sev == 2
    [e] = await pm_entries(app, inc.id)
    assert e["actor"] == "UOPS" and e["detail"]["result"] == "refused"
    # The other facts are the IC's and the scribe's (issue 35 item 12: tests/postmortem/test_fact_seats.py).
    assert "Rework" in await app.run("postmortem rework 2", user="U_IC", channel=inc.channel_id)


async def test_the_raise_command_still_cannot_lower_and_points_here(app):
    inc = await app.declare("GPU hang", sev=2)
    out = await app.run("sev 3 smaller", channel=inc.channel_id)
    assert "Downgrades happen in the postmortem." in out
    assert (await app.incident(inc.id)).sev == 2


async def test_the_store_lowers_only_a_resolved_incident_atomically(app):
    """The Lua's own guard (the handler checks first; a reopen in between cannot slip past)."""
    inc = await app.declare("GPU hang", sev=1)
    r = repo(app.services)
    assert (await r.lower_sev(inc.id, 3, "x", "U_IC", T0)).code is SevLowered.OPEN
    assert (await r.lower_sev("INC-99", 3, "x", "U_IC", T0)).code is SevLowered.MISSING
    await app.run("resolved", channel=inc.channel_id)
    got = await asyncio.gather(*(r.lower_sev(inc.id, s, f"to {s}", "U_IC", T0) for s in (2, 3, 4, 4)))
    assert {c.code for c in got} <= {SevLowered.LOWERED, SevLowered.NOT_LOWER, SevLowered.SAME}
    assert (await app.incident(inc.id)).sev == 4
    log = await r.sev_lowerings(inc.id)
    assert [(c["from"], c["to"]) for c in log] == [
        (c.before, s) for c, s in zip(got, (2, 3, 4, 4), strict=True) if c.code is SevLowered.LOWERED
    ]
