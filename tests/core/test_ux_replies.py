"""Replies a person reads at 3 a.m.: what they typed, who to ask, plain words (UX findings E–J, L)."""

from __future__ import annotations

import json

import pytest

from bot.incidents.store import repo
from tests.support.core import BOB, CAROL, IC, OPS, TITLE
from tests.support.harness import audit_entries


@pytest.mark.parametrize(
    "text, says",
    [
        ('declare ""', "Missing <title>."),
        ("declare " + "x" * 612, "Title is 612 characters; keep it under 200 (put details in the channel)."),
        ("update", "Missing <text>."),
        ("assess --users-burn high", "`--users-burn high`: needs a number, e.g. 14.4."),
        ("assess --gpus lots", "`--gpus lots`: needs a whole number, e.g. 512."),
        ("undo banana", "`banana` is not a request id"),
        ("undo", "Missing <REQ-n>."),
        ("lever", "Missing <name>."),
        ("sev 2", "Missing <reason>."),
    ],
)
async def test_usage_errors_name_what_is_typed_not_internal_fields(app, text, says):
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    out = await app.run(text, user=IC, channel=ch)
    assert says in out, out
    for leak in ("String should", "Input should", "users_burn", "request:", "title:", "text:"):
        assert leak not in out, out
    assert (await audit_entries(app))[-1]["action"] == "command.invalid"


async def test_a_typo_gets_a_suggestion(app):
    out = json.loads(await app.run("decalre GPU hang", user=IC))["text"]  # the ack is the answer
    assert out.startswith("Unknown command `decalre`. Did you mean `declare`?"), out
    assert app.slack.calls_to("conversations.create") == []


async def test_refusals_name_who_holds_the_seat(app):
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    await app.run(f"role comms <@{CAROL}>", user=IC, channel=ch)
    assert await app.run("sev 1 worse", user=BOB, channel=ch) == f"Only the IC can run `sev` in INC-1 (IC: <@{IC}>)."
    assert await app.run("update all fine", user=BOB, channel=ch) == (
        f"Only the Comms lead or the IC can run `update` in INC-1 (Comms lead: <@{CAROL}>; IC: <@{IC}>)."
    )


async def test_role_replies_use_titles_and_say_who_was_replaced(app):
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    assert await app.run(f"role ops <@{OPS}>", user=IC, channel=ch) == f"<@{OPS}> is now Ops lead in INC-1."
    assert await app.run(f"role ops <@{BOB}>", user=IC, channel=ch) == (
        f"<@{BOB}> is now Ops lead in INC-1 (replacing <@{OPS}>)."
    )
    assert await app.run(f"role ops <@{BOB}>", user=IC, channel=ch) == f"<@{BOB}> is already Ops lead in INC-1."
    assert any("is now Ops lead" in m["text"] for m in app.slack.messages(ch))


async def test_assess_explains_once_which_axis_decided(app):
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    out = await app.run("assess --security --quality", user=IC, channel=ch)
    assert out.startswith(
        "Matrix says SEV1, decided by security (SEV1 regardless of latency); "
        "also: quality → SEV1. INC-1 is now SEV1 (was SEV3)."
    ), out
    out = await app.run("assess --gpus 100", user=IC, channel=ch)
    assert (
        out == "Matrix says SEV3, decided by gpu (100 GPU-hours/h burning (≈$200/h) ≥ 64). "
        "INC-1 stays SEV1: SEV only goes up while open."
    )


async def test_a_duplicate_pending_handoff_is_refused_and_status_shows_it(app):
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    assert (await app.run(f"handoff ic <@{BOB}>", user=IC, channel=ch)).startswith("Handoff HO-1 posted")
    posted = len(app.slack.messages(ch))
    out = await app.run(f"handoff ic <@{BOB}>", user=IC, channel=ch)
    assert out == f"HO-1 is already waiting for <@{BOB}> to accept Incident Commander; they press Accept on it."
    assert len(app.slack.messages(ch)) == posted
    assert await repo(app.services).get_handoff("INC-1", "HO-2") is None
    last = (await audit_entries(app))[-1]["detail"]
    assert (last["result"], last["handoff"]) == ("refused", "HO-1")
    status = await app.run("status", user=BOB, channel=ch)
    assert f"Pending handoffs: HO-1 Incident Commander → <@{BOB}> (since 03:10 UTC)" in status
    # Another role, or another person, is a different handoff.
    assert (await app.run(f"handoff ic <@{CAROL}>", user=IC, channel=ch)).startswith("Handoff HO-2 posted")


@pytest.mark.parametrize(
    "text, suggestion",
    [
        ("Chat API slow on GPU-A3-0142 and US-EAST-3", "Chat API slow on us-east"),
        ("Chat API errors on node gpu-a3-0142", "Chat API errors on some hosts"),
    ],
)
async def test_public_rewrite_leaves_no_dangling_words(app, text, suggestion):
    ch = (await app.declare(TITLE, sev=2, user=IC)).channel_id
    out = await app.run(f"update {text}", user=IC, channel=ch)
    assert out.endswith(f"Try: `/incident update {suggestion}`"), out
