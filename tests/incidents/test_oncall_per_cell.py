"""Issue 35 item 4, tried as an attacker would: `oncall` made the on-call of one cell an eligible
IC and approver everywhere (any of the incident's cells, which the IC chooses; the fleet with no
cell at all), and oncall.yaml was read once, so someone rotated off call stayed eligible until a
restart. Now `oncall` counts only in the cell a command acts on, for the IC seat in the cells the
incident opened with, and the file is read again when it changes.

ONCALL_A and ONCALL_B are in no user group: they are eligible only as an on-call."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.support.harness import RunningApp, start_app
from tests.support.signals import policy_dir

ONCALL_A, ONCALL_B, ONCALL_NEW = "UONCALLA", "UONCALLB", "UONCALLNEW"
CELL_A, CELL_B, CELL_C = "us-east-1", "us-east-2", "us-east-3"


@pytest.fixture
async def app(slack, redis_url, clock, tmp_path: Path) -> AsyncIterator[RunningApp]:
    d = policy_dir(tmp_path, {CELL_A: ONCALL_A, CELL_B: ONCALL_B, CELL_C: None})
    running = await start_app(slack, redis_url, clock, firebreak_policy_dir=d)
    running.policy_dir = d
    yield running
    await running.stop()


def rotate(app: RunningApp, cells: dict[str, str | None]) -> None:
    """Rewrite oncall.yaml as a pager job would: a new file moved into place."""
    d: Path = app.policy_dir
    tmp = d / "oncall.yaml.new"
    tmp.write_text(json.dumps({"default": None, "cells": cells}) + "\n")
    os.replace(tmp, d / "oncall.yaml")


async def test_someone_rotated_off_call_stops_being_eligible_without_a_restart(app):
    inc = await app.declare("TTFT up", sev=2, user="U_IC", cells=(CELL_A,))
    rotate(app, {CELL_A: ONCALL_NEW, CELL_B: ONCALL_B})
    out = await app.run(f"handoff ic <@{ONCALL_A}>", user="U_IC", channel=inc.channel_id)
    assert f"<@{ONCALL_A}> isn't in @ml-ic or the on-call for {CELL_A}" in out and "nothing changed" in out, out
    out = await app.run(f"handoff ic <@{ONCALL_NEW}>", user="U_IC", channel=inc.channel_id)
    assert out.startswith("Handoff HO-1 posted"), out

    # A broken rewrite names nobody (fail closed) and says why; fixed, it counts again.
    (app.policy_dir / "oncall.yaml").write_text("cells: [not, a, map]\n")
    out = await app.run(f"handoff ic <@{ONCALL_B}>", user="U_IC", channel=inc.channel_id)
    assert "oncall.yaml can't be read" in out and "nothing changed" in out, out
    rotate(app, {CELL_A: ONCALL_B})
    out = await app.run(f"handoff ic <@{ONCALL_B}>", user="U_IC", channel=inc.channel_id)
    assert out.startswith("Handoff HO-2 posted"), out


async def test_the_ic_seat_is_judged_on_the_cells_the_incident_opened_with(app):
    inc = await app.declare("TTFT up", sev=2, user="U_IC", cells=(CELL_A,))
    out = await app.run(f"scope add {CELL_B}", user="U_IC", channel=inc.channel_id)
    assert out.startswith(f"{inc.id}'s scope is now {CELL_A}, {CELL_B}"), out
    # ONCALL_B is on call for a cell the IC added: that makes nobody IC-eligible here.
    out = await app.run(f"handoff ic <@{ONCALL_B}>", user="U_IC", channel=inc.channel_id)
    assert f"isn't in @ml-ic or the on-call for {CELL_A}" in out and "nothing changed" in out, out
    out = await app.run(f"handoff ic <@{ONCALL_A}>", user="U_IC", channel=inc.channel_id)
    assert out.startswith("Handoff HO-1 posted"), out


async def _card_ts(app: RunningApp, channel: str, bid: str) -> str:
    [m] = [m for m in app.slack.messages(channel) if bid in (m.get("text") or "")]
    return m["ts"]


async def _ask(app: RunningApp, channel: str, scope: str) -> str:
    out = await app.run(f"breakglass {scope} 10 ops lead unreachable", user="UX", channel=channel)
    assert out.startswith("BG-"), out
    return out.split(" ", 1)[0]


async def _approve(app: RunningApp, channel: str, bid: str, user: str) -> str:
    key = await app.press(
        "breakglass.approve", bid, user=user, channel=channel, message_ts=await _card_ts(app, channel, bid)
    )
    return await app.reply(key)


async def test_an_on_call_approves_only_in_their_own_cell_and_never_on_the_fleet(app):
    # ONCALL_A declares with their cell: IC-eligible as its on-call, and IC.
    inc = await app.declare("TTFT up", sev=2, user=ONCALL_A, cells=(CELL_A,))
    ch = inc.channel_id
    assert (await app.run(f"scope add {CELL_B}", user=ONCALL_A, channel=ch)).startswith(f"{inc.id}'s scope is now")

    other = await _ask(app, ch, f"cell:{CELL_B}")
    out = await _approve(app, ch, other, ONCALL_A)
    assert f"can't grant as it: <@{ONCALL_A}> isn't in @ml-ic or the on-call for {CELL_B}" in out, out

    fleet = await _ask(app, ch, "fleet")
    out = await _approve(app, ch, fleet, ONCALL_A)
    assert "can't grant as it" in out and "never on the fleet context" in out, out

    across = await _ask(app, ch, "kueue-hold")  # a named lever covers every cell: no one cell's on-call
    assert "can't grant as it" in await _approve(app, ch, across, ONCALL_A)

    own = await _ask(app, ch, f"cell:{CELL_A}")
    out = await _approve(app, ch, own, ONCALL_A)
    assert "can't grant" not in out and own in out, out
