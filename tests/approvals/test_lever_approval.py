"""Lever approval end to end: signed block_actions in, fake Slack and fake Kubernetes out."""

from __future__ import annotations

import asyncio
import re

import pytest

from fbworld.slack import block_actions_body
from levers import executor
from levers.store import lever_store
from tests.support.approvals import DRAIN, buttons, card, request_drain, text_of
from tests.support.harness import MODES, T0, audit_entries

pytestmark = pytest.mark.parametrize("mode", MODES)  # over HTTP and over Socket Mode (docs/operating.md)


async def test_card_shows_the_plan_and_buttons(world):
    rid = await request_drain(world)
    m = card(world, rid)
    shown = text_of(m)
    assert buttons(m) == ["lever.approve", "lever.deny"]
    values = {el["value"] for b in m["blocks"] for el in b.get("elements", []) if el.get("type") == "button"}
    assert values == {rid}
    assert "kubectl --context us-east-3 patch" in shown and "HoldAndDrain" in shown
    assert '/spec/stopPolicy: "None"' in shown and "one object in cell us-east-3" in shown and "<@UOPS>" in shown
    assert "expires 03:20 UTC" in shown
    assert world.patches() == []
    requested = [e for e in await audit_entries(world.app, "INC-1") if e["action"] == "approval.requested"]
    assert requested[0]["detail"]["digest"] == (await lever_store(world.svc).get(rid)).digest


async def test_approved_request_changes_the_object_exactly_once(world):
    rid = await request_drain(world)
    rec = await lever_store(world.svc).get(rid)
    world.svc.clock.advance(120)
    out = await world.press("lever.approve", rid, user="U_IC")
    assert rid in out
    assert (await lever_store(world.svc).get(rid)).state == "done"
    assert len(world.patches()) == len(rec.plan["calls"])
    assert world.cell.get("clusterqueues", "research-h100")["spec"]["stopPolicy"] == "HoldAndDrain"
    m = card(world, rid)
    assert buttons(m) == []  # edited in place, buttons gone
    assert (
        f"Approved by <@U_IC> (IC) at 03:12 UTC → {rid} kueue-hold-drain research-h100 (us-east-3): "
        "applied and verified (stopPolicy=HoldAndDrain" in text_of(m)
    )
    # A late second press changes nothing and is told why.
    again = await world.press("lever.approve", rid, user="U_IC")
    assert "already approved by <@U_IC>" in again
    assert len(world.patches()) == len(rec.plan["calls"])
    acts = [(e["action"], e["detail"].get("result")) for e in await audit_entries(world.app, "INC-1")]
    assert ("command.approve", "ok") in acts and ("command.approve", "refused") in acts


async def test_refusals_are_ephemeral_audited_and_change_nothing(world):
    rid = await request_drain(world)
    cases = [
        ("UOPS", "you cannot decide it"),
        ("UCOMMS", "Only the IC of INC-1 (now <@U_IC>)"),
        ("U_STRANGER", "you hold none of those roles"),
    ]
    for user, says in cases:
        assert says in await world.press("lever.approve", rid, user=user)
        assert says in await world.press("lever.deny", rid, user=user)
    assert (await lever_store(world.svc).get(rid)).state == "pending_approval"
    assert world.patches() == []
    refused = [
        e
        for e in await audit_entries(world.app, "INC-1")
        if e["action"] in ("command.approve", "command.deny") and e["detail"]["result"] == "refused"
    ]
    assert len(refused) == 6 and {e["actor"] for e in refused} == {"UOPS", "UCOMMS", "U_STRANGER"}
    assert all(e["detail"]["digest"] for e in refused)
    assert buttons(card(world, rid)) == ["lever.approve", "lever.deny"]


async def test_a_forged_button_value_is_refused(world):
    await request_drain(world)
    out = await world.press("lever.approve", "REQ-1; drop", user="U_IC")
    assert "not one Firebreak made" in out
    out = await world.press("lever.approve", "REQ-99", user="U_IC")
    assert "REQ-99 is not an approval request of INC-1" in out
    assert world.patches() == []


async def test_concurrent_approvals_across_two_processes_run_once(world):
    rid = await request_drain(world)
    rec = await lever_store(world.svc).get(rid)
    other = await world.second_process()
    try:
        replies = await asyncio.gather(
            *(world.press("lever.approve", rid, user="U_IC", app=(world.app, other)[i % 2]) for i in range(6))
        )
    finally:
        await other.stop()
    assert len(world.patches()) == len(rec.plan["calls"])
    assert (await lever_store(world.svc).get(rid)).state == "done"
    assert sum("already approved" in r for r in replies) == 5
    approvals = [
        e
        for e in await audit_entries(world.app, "INC-1")
        if e["action"] == "command.approve" and e["detail"]["result"] == "ok"
    ]
    assert len(approvals) == 1


async def test_denied_request_changes_nothing(world):
    rid = await request_drain(world)
    out = await world.press("lever.deny", rid, user="U_IC")
    assert f"{rid} denied" in out
    assert (await lever_store(world.svc).get(rid)).state == "denied"
    m = card(world, rid)
    assert buttons(m) == [] and "Denied by <@U_IC> at 03:10 UTC" in text_of(m)
    assert "already denied" in await world.press("lever.approve", rid, user="U_IC")
    world.svc.clock.advance(3600)
    await world.tick()
    assert world.patches() == []
    assert world.cell.get("clusterqueues", "research-h100")["spec"]["stopPolicy"] == "None"


async def test_expiry_one_second_either_side(world):
    rid = await request_drain(world)
    world.svc.clock.advance(600 - 1)
    await world.tick()
    assert (await lever_store(world.svc).get(rid)).state == "pending_approval"
    world.svc.clock.advance(2)  # expires_at + 1s
    await world.tick()
    assert (await lever_store(world.svc).get(rid)).state == "expired"
    m = card(world, rid)
    assert buttons(m) == [] and "Expired at 03:20 UTC" in text_of(m)
    assert "already expired" in await world.press("lever.approve", rid, user="U_IC")
    assert world.patches() == []
    settle = [e for e in await audit_entries(world.app, "INC-1") if e["action"] == "command.approval_settle"]
    assert [e["detail"]["settled"] for e in settle] == ["expired"] and settle[0]["actor"] == "system"


async def test_click_just_inside_the_window_runs_and_just_outside_does_not(world):
    rid = await request_drain(world)
    world.svc.clock.set(T0 + 600 - 1)
    assert rid in await world.press("lever.approve", rid, user="U_IC")
    assert (await lever_store(world.svc).get(rid)).state == "done"

    out = await world.run(DRAIN, user="UOPS")  # a second request, pressed 1 s after its window
    rid2 = re.search(r"REQ-\d+", out).group(0)
    before = len(world.patches())
    world.svc.clock.advance(600 + 1)
    assert "expired at" in await world.press("lever.approve", rid2, user="U_IC")
    assert (await lever_store(world.svc).get(rid2)).state == "expired"
    assert len(world.patches()) == before


async def test_a_target_changed_after_the_request_blocks_execution(world):
    rid = await request_drain(world)
    cq = world.cell.get("clusterqueues", "research-h100")
    cq["spec"]["stopPolicy"] = "Hold"  # someone else touched it since the plan was shown
    world.cell.put(cq)
    out = await world.press("lever.approve", rid, user="U_IC")
    assert (await lever_store(world.svc).get(rid)).state == "stale"
    assert world.patches() == []
    said = (
        f"{rid} kueue-hold-drain research-h100 (us-east-3): not applied: the target changed since it was "
        "planned and approved. Pull the lever again for a fresh plan and approval."
    )
    assert out.split("\n", 1)[1] == said  # after the line naming what was approved
    m = card(world, rid)
    assert buttons(m) == [] and f"Approved by <@U_IC> (IC) at 03:10 UTC → {said}" in text_of(m)
    assert world.cell.get("clusterqueues", "research-h100")["spec"]["stopPolicy"] == "Hold"


async def test_restart_between_approval_and_execution_runs_once(world, monkeypatch):
    rid = await request_drain(world)
    rec = await lever_store(world.svc).get(rid)

    async def crash(*a, **kw):
        raise ConnectionError("process killed")

    monkeypatch.setattr(executor, "execute_approved", crash)
    out = await world.press("lever.approve", rid, user="U_IC")
    assert "Something failed" in out
    assert (await lever_store(world.svc).get(rid)).state == "approved"
    assert world.patches() == []
    monkeypatch.undo()
    await world.restart()  # start hooks resume what was approved and not run
    assert (await lever_store(world.svc).get(rid)).state == "done"
    assert len(world.patches()) == len(rec.plan["calls"])
    world.svc.clock.advance(900)
    await world.tick()  # the window's timer finds it done: nothing more
    await world.restart()
    assert len(world.patches()) == len(rec.plan["calls"])
    assert "Approved by <@U_IC>" in text_of(card(world, rid))


async def test_status_lists_pending_approvals(world):
    rid = await request_drain(world)
    out = await world.run("status", user="UCOMMS")
    assert f"{rid} awaiting approval until 03:20 UTC" in out


async def test_card_post_failure_refuses_and_nothing_runs(world):
    await world.declare(ops="UOPS")
    world.slack.fail_next("chat.postMessage", "channel_not_found")
    out = await world.run(DRAIN, user="UOPS")
    assert "Slack refused the approval card (channel_not_found)" in out and "nothing will run" in out
    rid = re.search(r"REQ-\d+", out).group(0)
    world.svc.clock.advance(601)
    await world.tick()
    assert (await lever_store(world.svc).get(rid)).state == "expired"
    assert world.patches() == []


async def test_the_audit_tells_the_whole_story(world):
    rid = await request_drain(world)
    await world.press("lever.approve", rid, user="UOPS")  # refused: the requester
    await world.press("lever.approve", rid, user="U_IC")
    entries = await audit_entries(world.app, "INC-1")
    story = [
        (e["action"], e["actor"], e["detail"].get("result"))
        for e in entries
        if e["action"] in ("approval.requested", "command.approve", "lever.apply", "lever.done")
    ]
    # The press's own entry closes it: the approval ran the lever inside that request.
    assert story == [
        ("approval.requested", "UOPS", None),
        ("command.approve", "UOPS", "refused"),
        ("lever.apply", "UOPS", None),
        ("lever.done", "UOPS", None),
        ("command.approve", "U_IC", "ok"),
    ]
    ok = next(e for e in entries if e["action"] == "command.approve" and e["detail"]["result"] == "ok")
    assert (
        ok["detail"]["seat"] == "ic"
        and ok["detail"]["digest"]
        == entries[[e["action"] for e in entries].index("approval.requested")]["detail"]["digest"]
    )
    assert await world.svc.audit.verify() is None


async def test_a_retried_block_actions_delivery_changes_the_object_once(world):
    """Slack re-sends the same signed payload (X-Slack-Retry-Num) when the first ack looked slow."""
    rid = await request_drain(world)
    rec = await lever_store(world.svc).get(rid)
    body = block_actions_body(
        "lever.approve",
        rid,
        "U_IC",
        world.channel,
        message_ts=world.app.message_with(world.channel, "lever.approve", rid),  # pressed on the card
        response_url=world.slack.response_url("retried"),
    )
    form = "application/x-www-form-urlencoded"
    first = await world.app.sender.post(body, form)
    again = await world.app.sender.post(
        body, form, extra_headers={"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"}
    )
    assert first[0] == 200 and again[0] == 200
    await world.app.drain()  # both deliveries handled: the run, and a second one if there were one
    assert (await lever_store(world.svc).get(rid)).state == "done"
    assert len(world.patches()) == len(rec.plan["calls"])
    ok = [
        e
        for e in await audit_entries(world.app, "INC-1")
        if e["action"] == "command.approve" and e["detail"]["result"] == "ok"
    ]
    assert len(ok) == 1
