"""Each /incident command: its happy path and its usage error, through signed HTTP."""

from __future__ import annotations

import json

import pytest

from bot.incidents.store import repo
from tests.support.core import BOB, CAROL, IC, OPS, TITLE, raw_incident
from tests.support.harness import audit_entries


async def test_declare_opens_channel_card_and_makes_declarer_ic(app):
    out = await app.run("declare Chat TTFT p99 over SLO --sev 2 --cell us-east-3 --product chat --region us", user=IC)
    assert out.startswith("Declared INC-1 (SEV2)") and "you are IC" in out
    inc = await app.incident("INC-1")
    assert inc.sev == 2 and inc.cells == ["us-east-3"] and inc.products == ["chat"] and inc.regions == ["us"]
    assert inc.holder("ic") == IC
    ch = app.slack.channel(inc.channel_id)
    assert ch.name == "inc-20261130-1-chat-ttft-p99-over-slo" and IC in ch.members
    assert ch.pins == [inc.card_ts]
    [e] = await audit_entries(app)
    assert (e["action"], e["actor"], e["incident"], e["detail"]["result"]) == ("command.declare", IC, "INC-1", "ok")


@pytest.mark.parametrize(
    "text, says",
    [
        ("declare", "Missing <title>"),
        ("declare ab", "Title is too short: at least 3 characters."),
        ("declare GPU hang --sev 7", "not a SEV"),
        ("declare GPU hang --cell US_EAST", "not a cell name"),
        ("declare GPU hang --colour red", "Unknown option `--colour`"),
    ],
)
async def test_declare_usage_errors_say_what_to_type_and_change_nothing(app, text, says):
    out = await app.run(text, user=IC)
    assert says in out, out
    assert "Usage: `/incident declare <title>" in out
    assert app.slack.calls_to("conversations.create") == []
    assert await repo(app.services).open_ids() == []
    [e] = await audit_entries(app)
    assert e["action"] == "command.invalid" and e["actor"] == IC


async def test_sev_raises_and_announces(app):
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    out = await app.run("sev 2 training fleet stalled on xid79", user=IC, channel=ch)
    assert out == "INC-1 is now SEV2 (was SEV3)."
    assert (await raw_incident(app))["sev"] == "2"
    assert any("SEV3 → SEV2" in m["text"] for m in app.slack.messages(ch))


@pytest.mark.parametrize("text", ["sev", "sev 5 worse", "sev two bad", "sev 2"])
async def test_sev_usage_errors(app, text):
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    out = await app.run(text, user=IC, channel=ch)
    assert "Usage: `/incident sev <1-4> <reason>`" in out
    assert (await raw_incident(app))["sev"] == "3"


async def test_sev_by_non_ic_is_refused(app):
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    out = await app.run("sev 1 everything is down", user=BOB, channel=ch)
    assert out == f"Only the IC can run `sev` in INC-1 (IC: <@{IC}>)."
    assert (await raw_incident(app))["sev"] == "3"
    assert (await audit_entries(app))[-1]["detail"]["result"] == "refused"


async def test_assess_uses_the_matrix_and_only_raises(app):
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    out = await app.run("assess --users-burn 15 --gpus 100", user=IC, channel=ch)
    assert (
        "Matrix says SEV1, decided by users (SLO burn 15x ≥ 14.4x); also: gpu → SEV3." in out
        and "INC-1 is now SEV1" in out
    )
    out = await app.run("assess --gpus 100", user=IC, channel=ch)
    assert "stays SEV1" in out
    assert (await raw_incident(app))["sev"] == "1"
    last = (await audit_entries(app))[-1]["detail"]
    assert last["assessed_sev"] == 3 and last["deciding_axis"] == "gpu"


@pytest.mark.parametrize(
    "text, says",
    [
        ("assess", "give at least one axis"),
        ("assess --users-burn lots", "`--users-burn lots`: needs a number, e.g. 14.4."),
        ("assess --gpus", "`--gpus` needs a value"),
    ],
)
async def test_assess_usage_errors(app, text, says):
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    out = await app.run(text, user=IC, channel=ch)
    assert says in out and "Usage: `/incident assess" in out


async def test_role_assigns_invites_and_updates_card(app):
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    out = await app.run(f"role ops <@{OPS}|ops-person>", user=IC, channel=ch)
    assert out == f"<@{OPS}> is now Ops lead in INC-1."
    inc = await app.incident("INC-1")
    assert inc.holder("ops") == OPS and OPS in app.slack.channel(ch).members
    card = next(m for m in app.slack.messages(ch) if m["ts"] == inc.card_ts)
    assert f"<@{OPS}>" in str(card["blocks"]) and card["edits"]


@pytest.mark.parametrize(
    "text, says",
    [
        ("role ops", "Missing <@user>."),
        ("role chef <@UOPS>", "is not a role"),
        ("role ops bob", "is not a Slack user"),
    ],
)
async def test_role_usage_errors(app, text, says):
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    out = await app.run(text, user=IC, channel=ch)
    assert says in out and "Usage: `/incident role <role> <@user>`" in out
    assert (await app.incident("INC-1")).holder("ops") is None


async def test_role_ic_goes_through_handoff(app):
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    out = await app.run(f"role ic <@{BOB}>", user=IC, channel=ch)
    assert "handoff ic" in out
    assert (await app.incident("INC-1")).holder("ic") == IC


async def test_handoff_then_accept_moves_the_role(app):
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    out = await app.run(f'handoff ic <@{CAROL}> --threads "xid79 nodes; comms cadence"', user=IC, channel=ch)
    assert out.startswith("Handoff HO-1 posted: Incident Commander to <@UCAROL>")
    post = next(m for m in app.slack.messages(ch) if "handing to" in m["text"])
    assert "open threads: xid79 nodes, comms cadence; next update 04:10 UTC" in post["text"]
    assert post["text"].startswith("IC handing to <@UCAROL> at 03:10 UTC; ")
    button = post["blocks"][1]["elements"][0]
    assert (button["action_id"], button["value"]) == ("handoff.accept", "INC-1/HO-1")
    assert (await app.incident("INC-1")).holder("ic") == IC  # not until Accept
    key = await app.press("handoff.accept", "INC-1/HO-1", user=CAROL, channel=ch, message_ts=post["ts"])
    assert await app.reply(key) == "You are now Incident Commander in INC-1."
    assert (await app.incident("INC-1")).holder("ic") == CAROL
    edited = next(m for m in app.slack.messages(ch) if m["ts"] == post["ts"])
    assert "accepted by <@UCAROL>" in str(edited["blocks"])


@pytest.mark.parametrize(
    "text, says",
    [
        ("handoff", "Missing <role>"),
        ("handoff ic", "Missing <@user>."),
        ("handoff ic <@UCAROL> --threads", "`--threads` needs a value"),
        ("handoff boss <@UCAROL>", "is not a role"),
    ],
)
async def test_handoff_usage_errors(app, text, says):
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    out = await app.run(text, user=IC, channel=ch)
    assert says in out and "Usage: `/incident handoff <role> <@user>" in out
    assert not [m for m in app.slack.messages(ch) if "handing to" in m["text"]]


async def test_update_posts_and_resets_cadence(app):
    ch = (await app.declare(TITLE, sev=2, user=IC)).channel_id
    app.clock.advance(600)
    out = await app.run("update Mitigation in progress: traffic shifted away from us-east.", user=IC, channel=ch)
    assert out.startswith("Update posted. Next update due 03:50 UTC.")  # SEV2: every 30 minutes from 03:20
    assert any("Mitigation in progress" in m["text"] for m in app.slack.messages(ch))
    raw = await raw_incident(app)
    assert float(raw["next_update_due"]) == app.clock.now() + 30 * 60


async def test_update_usage_error_and_non_comms_refused(app):
    ch = (await app.declare(TITLE, sev=2, user=IC)).channel_id
    assert "Usage: `/incident update <text>`" in await app.run("update", user=IC, channel=ch)
    assert await app.run("update hello", user=BOB, channel=ch) == (
        f"Only the Comms lead or the IC can run `update` in INC-1 (Comms lead: nobody; IC: <@{IC}>)."
    )
    assert "last_update_at" not in await raw_incident(app)


async def test_status_shows_sev_roles_and_due(app):
    ch = (await app.declare(TITLE, sev=2, user=IC)).channel_id
    await app.run(f"role comms <@{BOB}>", user=IC, channel=ch)
    out = await app.run("status", user=CAROL, channel=ch)
    assert "*INC-1* SEV2 · active · GPU hang in us-east" in out
    assert f"Roles: ic <@{IC}>, comms <@{BOB}>" in out
    assert "next update due: 03:25 UTC" in out


async def test_status_usage_error_and_outside_incident(app):
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    assert "Unexpected `now`" in await app.run("status now", user=IC, channel=ch)
    assert "works inside an incident channel" in await app.run("status", user=IC, channel="C_GENERAL")


async def test_mitigated_then_resolved(app):
    ch = (await app.declare(TITLE, sev=2, user=IC)).channel_id
    assert await app.run("mitigated", user=IC, channel=ch) == "INC-1 is now mitigated."
    raw = await raw_incident(app)
    assert raw["status"] == "mitigated" and "next_update_due" not in raw
    assert await app.run("resolved", user=IC, channel=ch) == "INC-1 is now resolved."
    assert await repo(app.services).open_ids() == []
    assert "resolved" in await app.run("sev 1 again", user=IC, channel=ch)
    assert "*INC-1* SEV2 · resolved" in await app.run("status", user=IC, channel=ch)


@pytest.mark.parametrize("cmd", ["mitigated", "resolved"])
async def test_status_change_usage_errors(app, cmd):
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    out = await app.run(f"{cmd} yes really", user=IC, channel=ch)
    assert f"Usage: `/incident {cmd}`" in out
    assert (await raw_incident(app))["status"] == "active"


async def test_help_lists_the_grammar_and_unknown_commands_point_to_it(app):
    out = await app.run("help", user=BOB)
    for usage in ("/incident declare <title>", "/incident sev <1-4> <reason>", "/incident handoff <role>"):
        assert usage in out
    assert (
        await app.run("help sev", user=BOB)
        == "`/incident sev <1-4> <reason>`: raise severity (never lowers while open)"
    )
    assert "Unknown command `frobnicate`. Try `/incident help`." in await app.run("frobnicate now", user=BOB)


async def test_help_about_an_unknown_command_is_a_usage_error_listing_the_commands(app):
    out = json.loads(await app.run("help bogus", user=BOB))["text"]  # the ack is the answer
    assert out.startswith("`bogus` is not a command; ask about one of: declare, sev, assess,"), out
    assert "Usage: `/incident help [command]`" in out
    [e] = await audit_entries(app)
    assert e["action"] == "command.invalid" and e["detail"]["text"] == "help bogus"


async def test_help_in_a_resolved_channel_lists_only_what_still_works(app):
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    assert "resolved" in await app.run("resolved", user=IC, channel=ch)
    out = await app.run("help", user=IC, channel=ch)
    assert out.startswith("*INC-1 is resolved; these still work here*"), out
    assert "/incident status" in out and "/incident help" in out
    assert "/incident sev" not in out and "/incident lever " not in out
