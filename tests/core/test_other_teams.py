"""Issue 35 item 12: a user of another Slack team (a Slack Connect guest in a shared incident
channel, another organisation's workspace) holds no seat and runs no seat command. Slack says
whose team a request's user is in (a command's ``team_id``, a button's or a form's ``user.team_id``);
the one policy check compares it with the app's own team (auth.test) and refuses everything but
`status` and `help`, however the user id reads: a guest whose id a policy group names, or whom the
IC seated, gets no further. Nothing is stored; each refusal is audited with the team."""

from __future__ import annotations

from bot.incidents.store import repo
from bot.postmortem.store import store
from tests.support.core import CAROL, IC, TITLE
from tests.support.harness import audit_entries

GUEST_TEAM = "T0THEM"


async def guest(app, text: str, user: str, channel: str) -> str:
    key = await app.command(text, user=user, channel=channel, team_id=GUEST_TEAM)
    ack = app.last_ack
    return await app.settled(key, ack) if ack and ack.strip() else await app.reply(key)


async def test_a_guest_from_another_team_cannot_declare_even_with_a_seated_users_id(app):
    out = await guest(app, "declare GPU hang --sev 1", IC, "C_GENERAL")  # U_IC is in @ml-ic at home
    assert out.startswith("You're in another Slack organisation (team T0THEM)"), out
    assert "`status` and `help`" in out, out
    assert await repo(app.services).open_ids() == []
    [e] = [e for e in await audit_entries(app) if e["action"] == "command.declare"]
    assert e["detail"]["result"] == "refused" and e["detail"]["other_team"] == GUEST_TEAM


async def test_a_guest_the_ic_seated_still_runs_no_seat_command(app):
    inc = await app.declare(TITLE, sev=2, user=IC)
    assert "is now" in await app.run(f"role scribe <@{CAROL}>", user=IC, channel=inc.channel_id)
    for text in ("cause root a bad driver", "update Chat API: investigating", "sev 1 worse", "resolved"):
        out = await guest(app, text, CAROL if text.startswith("cause") else IC, inc.channel_id)
        assert out.startswith("You're in another Slack organisation"), (text, out)
    assert await store(app.services).raw_facts(inc.id) == {}
    after = await app.incident(inc.id)
    assert after.sev == 2 and after.is_open and after.last_update_text is None
    # Reading is still open to them.
    assert "SEV2" in await guest(app, "status", CAROL, inc.channel_id)


async def test_a_guests_button_press_is_refused(app):
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    await app.run(f"handoff ic <@{CAROL}>", user=IC, channel=ch)
    post = next(m for m in reversed(app.slack.messages(ch)) if "handing to" in m["text"])
    status, body, _ = await app.sender.action(
        "handoff.accept",
        "INC-1/HO-1",
        user=CAROL,
        channel=ch,
        message_ts=post["ts"],
        response_url=app.slack.response_url("guest"),
        team_id=GUEST_TEAM,
    )
    assert status == 200, body
    assert (await app.reply("guest")).startswith("You're in another Slack organisation"), body
    assert (await app.incident("INC-1")).holder("ic") == IC
