"""Handoffs take effect only on the receiver's Accept; role tenure is recorded."""

from __future__ import annotations

import pytest

from bot.incidents.store import repo
from tests.support.core import BOB, CAROL, IC, OPS, TITLE
from tests.support.harness import MODES, T0, audit_entries

pytestmark = pytest.mark.parametrize("mode", MODES)  # over HTTP and over Socket Mode (docs/operating.md)


async def _handoff(app, ch: str, role: str = "ic", to: str = CAROL, user: str = IC) -> dict:
    await app.run(f"handoff {role} <@{to}>", user=user, channel=ch)
    return next(m for m in reversed(app.slack.messages(ch)) if "handing to" in m["text"])


async def test_someone_elses_click_is_refused_ephemeral_audited_and_changes_nothing(app):
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    post = await _handoff(app, ch)
    before = len(app.slack.messages(ch))
    key = await app.press("handoff.accept", "INC-1/HO-1", user=BOB, channel=ch, message_ts=post["ts"])
    assert await app.reply(key) == f"Only <@{CAROL}> can accept this handoff."
    [body] = app.slack.responses_for(key)
    assert body["response_type"] == "ephemeral" and body["replace_original"] is False
    assert (await app.incident("INC-1")).holder("ic") == IC
    assert len(app.slack.messages(ch)) == before  # nothing announced
    assert not [c for c in app.slack.calls_to("chat.update") if c.args["ts"] == post["ts"]]
    e = (await audit_entries(app))[-1]
    assert (e["action"], e["actor"], e["incident"]) == ("command.accept", BOB, "INC-1")
    assert e["detail"]["result"] == "refused" and e["detail"]["handoff"] == "HO-1"
    assert e["detail"]["source"] == "button"
    h = await repo(app.services).get_handoff("INC-1", "HO-1")
    assert h.status == "pending"


async def test_accept_twice_runs_once(app):
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    post = await _handoff(app, ch)
    k1 = await app.press("handoff.accept", "INC-1/HO-1", user=CAROL, channel=ch, message_ts=post["ts"])
    assert await app.reply(k1) == "You are now Incident Commander in INC-1."
    k2 = await app.press("handoff.accept", "INC-1/HO-1", user=CAROL, channel=ch, message_ts=post["ts"])
    assert await app.reply(k2) == "Handoff HO-1 was already accepted."
    accepted = [e for e in await audit_entries(app) if e["action"] == "command.accept"]
    assert [e["detail"]["result"] for e in accepted] == ["ok", "refused"]


async def test_holder_may_hand_off_their_own_role_but_others_may_not(app):
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    await app.run(f"role ops <@{OPS}>", user=IC, channel=ch)
    assert await app.run(f"handoff ops <@{BOB}>", user=CAROL, channel=ch) == (
        f"Only the role's holder or the IC can run `handoff` in INC-1 (IC: <@{IC}>)."
    )
    out = await app.run(f"handoff ops <@{BOB}>", user=OPS, channel=ch)
    assert out.startswith("Handoff HO-1 posted: Ops lead to <@UBOB>")


async def test_forged_button_value_is_refused_without_touching_state(app):
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    key = await app.press("handoff.accept", "INC-1/not-a-handoff", user=CAROL, channel=ch)
    assert await app.reply(key) == "That button's value is not one Firebreak made; nothing changed."
    assert (await app.incident("INC-1")).holder("ic") == IC
    e = (await audit_entries(app))[-1]
    assert (e["action"], e["actor"]) == ("button.invalid", CAROL)
    key = await app.press("handoff.accept", "INC-1/HO-9", user=CAROL, channel=ch)
    assert await app.reply(key) == "Handoff HO-9 does not exist in INC-1."


async def test_role_tenure_records_who_and_when(app):
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    await app.run(f"role ops <@{OPS}>", user=IC, channel=ch)
    app.clock.advance(300)
    await app.run(f"role ops <@{BOB}>", user=IC, channel=ch)
    app.clock.advance(300)
    post = await _handoff(app, ch)
    app.clock.advance(60)
    await app.reply(await app.press("handoff.accept", "INC-1/HO-1", user=CAROL, channel=ch, message_ts=post["ts"]))
    got = [
        (
            t.role,
            t.user,
            t.assumed_at - T0,
            t.assumed_by,
            None if t.renounced_at is None else t.renounced_at - T0,
            t.renounced_by,
        )
        for t in await repo(app.services).tenure("INC-1")
    ]
    assert got == [
        ("ic", IC, 0, IC, 660, CAROL),
        ("ops", OPS, 0, IC, 300, IC),
        ("ops", BOB, 300, IC, None, None),
        ("ic", CAROL, 660, CAROL, None, None),
    ]


async def test_a_stale_handoff_cannot_take_the_role_from_its_new_holder(app):
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    await _handoff(app, ch, to=BOB)  # HO-1: IC -> Bob
    post2 = await _handoff(app, ch, to=CAROL)  # HO-2: IC -> Carol
    assert (
        await app.reply(await app.press("handoff.accept", "INC-1/HO-2", user=CAROL, channel=ch, message_ts=post2["ts"]))
        == "You are now Incident Commander in INC-1."
    )
    key = await app.press("handoff.accept", "INC-1/HO-1", user=BOB, channel=ch)
    out = await app.reply(key)
    assert out.startswith("Handoff HO-1 is out of date") and f"<@{CAROL}> holds it now" in out, out
    assert (await app.incident("INC-1")).holder("ic") == CAROL
    assert (await repo(app.services).get_handoff("INC-1", "HO-1")).status == "superseded"
    e = (await audit_entries(app))[-1]
    assert (e["action"], e["actor"], e["detail"]["result"]) == ("command.accept", BOB, "refused")
    assert e["detail"]["superseded"] is True and e["detail"]["holder"] == CAROL
    assert [t.user for t in await repo(app.services).tenure("INC-1") if t.role == "ic"] == [IC, CAROL]


async def test_a_handoff_slack_would_not_post_is_closed_not_left_pending(app):
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    app.slack.fail_next("chat.postMessage", "channel_is_archived")
    out = await app.run(f"handoff ic <@{CAROL}>", user=IC, channel=ch)
    assert out == (
        f"Handoff HO-1 could not be posted in the channel (channel_is_archived); ic stays with <@{IC}>. "
        "Try the handoff again."
    )
    assert (await repo(app.services).get_handoff("INC-1", "HO-1")).status == "failed"
    assert await app.services.scheduler.pending("handoff.nudge", "INC-1/HO-1") is None
    key = await app.press("handoff.accept", "INC-1/HO-1", user=CAROL, channel=ch)
    assert await app.reply(key) == "Handoff HO-1 was never posted; ask for a new handoff."
    assert (await app.incident("INC-1")).holder("ic") == IC


async def test_a_failed_invite_still_posts_the_handoff_and_says_so(app):
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    app.slack.fail_next("conversations.invite", "user_disabled")
    out = await app.run(f"handoff ic <@{CAROL}>", user=IC, channel=ch)
    assert out.startswith("Handoff HO-1 posted") and "could not invite <@UCAROL> to the channel: user_disabled" in out
    assert (await repo(app.services).get_handoff("INC-1", "HO-1")).status == "pending"
