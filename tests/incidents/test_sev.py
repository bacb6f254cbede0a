"""SEV only goes up: refusals are audited, concurrent raises end at the worst SEV sent."""

from __future__ import annotations

import asyncio
import random

from tests.support.core import BOB, IC, TITLE, raw_incident
from tests.support.harness import audit_entries


async def test_lowering_is_refused_with_the_reason_and_audited(app):
    ch = (await app.declare(TITLE, sev=2, user=IC)).channel_id
    out = await app.run("sev 3 looks calmer now", user=IC, channel=ch)
    assert out == (
        "SEV only goes up while INC-1 is open: it is SEV2, you asked for SEV3. Downgrades happen in the postmortem."
    )
    assert (await raw_incident(app))["sev"] == "2"
    e = (await audit_entries(app))[-1]
    assert e["action"] == "command.sev" and e["actor"] == IC and e["incident"] == "INC-1"
    assert e["detail"]["result"] == "refused" and e["detail"]["reason"] == out
    assert (e["detail"]["sev_current"], e["detail"]["sev_asked"]) == (2, 3)
    assert not [c for c in app.slack.calls_to("chat.update")]  # the card was not touched


async def test_fifty_concurrent_raises_end_at_the_worst_and_the_audit_is_monotonic(app):
    ch = (await app.declare(TITLE, sev=4, user=IC)).channel_id
    rng = random.Random(20261130)
    asked = [rng.choice((3, 2, 1)) for _ in range(50)]
    keys = await asyncio.gather(
        *(app.command(f"sev {n} burn rate {i}", user=IC, channel=ch) for i, n in enumerate(asked))
    )
    replies = await asyncio.gather(*(app.reply(k, timeout=30) for k in keys))
    assert len(replies) == 50
    assert (await raw_incident(app))["sev"] == str(min(asked))

    sev_entries = [e for e in await audit_entries(app, "INC-1") if e["action"] == "command.sev"]
    assert len(sev_entries) == 50  # one entry per request
    changes = [
        e["detail"]
        for e in sev_entries
        if e["detail"]["result"] == "ok" and e["detail"]["sev_from"] != e["detail"]["sev_to"]
    ]
    # Every change goes up, and together they form one path 4 → … → worst with no step taken
    # twice. (The chain orders entries by when each request finished, not by when its atomic
    # transition ran, so the path is checked as a set.)
    assert all(d["sev_to"] < d["sev_from"] for d in changes), changes
    steps = {d["sev_from"]: d["sev_to"] for d in changes}
    assert len(steps) == len(changes), changes
    level = 4
    while level in steps:
        level = steps.pop(level)
    assert level == min(asked) and not steps, changes
    for e in sev_entries:
        d = e["detail"]
        if d["result"] == "refused":
            assert d["sev_asked"] > d["sev_current"]

    # The pinned card converges on the final SEV.
    inc = await app.incident("INC-1")
    card = next(m for m in app.slack.messages(ch) if m["ts"] == inc.card_ts)
    assert f"SEV{min(asked)}" in card["text"] and f"SEV{min(asked)}" in str(card["blocks"])


async def test_card_is_pinned_and_edited_in_place_on_raise(app):
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    inc = await app.incident("INC-1")
    assert app.slack.calls_to("pins.add")[0].args == {"channel": ch, "timestamp": inc.card_ts}
    await app.run("sev 1 users seeing errors", user=IC, channel=ch)
    [upd] = app.slack.calls_to("chat.update")
    assert upd.args["channel"] == ch and upd.args["ts"] == inc.card_ts
    assert upd.args["text"].startswith("INC-1 SEV1 active")
    assert "SEV1" in str(upd.args["blocks"]) and "users seeing errors" in str(upd.args["blocks"])
    cards = [m for m in app.slack.messages(ch) if m["ts"] == inc.card_ts]
    assert len(cards) == 1 and cards[0]["edits"][0]["text"].startswith("INC-1 SEV3")


async def test_non_ic_refusal_changes_nothing_and_is_audited(app):
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    await app.run("sev 1 panic", user=BOB, channel=ch)
    e = (await audit_entries(app))[-1]
    assert (e["actor"], e["detail"]["result"]) == (BOB, "refused")
    assert (await raw_incident(app))["sev"] == "3"
