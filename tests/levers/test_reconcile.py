"""A process dying mid-execution or mid-undo leaves the request `executing` / `undoing`; the next
start settles it from a read-back of the object, never re-applying it. The crash is simulated by
putting the record in the state the dead process left (and, where it got that far, its write)."""

from __future__ import annotations

import pytest

from levers.store import lever_store
from tests.support.harness import T0, audit_entries
from tests.support.levers import (
    MODEL,
    OPS,
    _crashed_executing,
    _send,
    _stored,
    channel_texts,
    comparable,
    patches,
    say,
    start_hooks,
)

HOLD = "lever kueue-hold research-h100 --cell us-east-3"


@pytest.fixture
def policy_overrides() -> dict:
    return {"rollout_verify_seconds": 1, "api_timeout_seconds": 2, "stuck_after_seconds": 300}


async def test_executing_with_nothing_landed_becomes_failed(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    original = cells.east3.get("clusterqueue", "research-h100")
    rid = await _stored(app, cells, HOLD, OPS, inc.channel_id)
    await _crashed_executing(app, rid, T0 - 600)
    await start_hooks(app)

    rec = await lever_store(app.services).get(rid)
    said = (
        f"{rid} kueue-hold research-h100 (us-east-3): failed: interrupted before the write landed; "
        "nothing changed (found stuck in flight; read back, not re-applied)."
    )
    assert rec.state == "failed" and rec.result["message"] == said
    assert said in channel_texts(app, inc.channel_id)
    assert patches(cells.east3) == []
    assert comparable(cells.east3.get("clusterqueue", "research-h100"), False) == comparable(original, False)
    [entry] = [e for e in await audit_entries(app, inc.id) if e["action"] == "lever.failed"]
    assert entry["actor"] == "system" and entry["detail"]["reconciled"] is True
    await start_hooks(app)  # settled once: a second start finds nothing in flight
    assert len([e for e in await audit_entries(app, inc.id) if e["action"] == "lever.failed"]) == 1


async def test_executing_whose_write_landed_becomes_done_without_a_second_write(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    rid = await _stored(app, cells, HOLD, OPS, inc.channel_id)
    await _crashed_executing(app, rid, T0 - 600)
    await _send(app, rid)
    writes = len(patches(cells.east3))
    await start_hooks(app)

    rec = await lever_store(app.services).get(rid)
    assert rec.state == "done" and rec.result["verified"] is True
    assert len(patches(cells.east3)) == writes  # read back, not re-applied
    assert any(
        t.startswith(
            f"{rid} kueue-hold research-h100 (us-east-3): applied and verified (stopPolicy=Hold; found stuck in flight"
        )
        for t in channel_texts(app, inc.channel_id)
    )
    assert "lever.done" in [e["action"] for e in await audit_entries(app, inc.id)]
    assert "undone" in await say(app, f"undo {rid}", OPS, inc.channel_id)  # and it can be undone as usual


async def test_a_plan_cut_between_its_calls_is_put_back(app, cells):
    """rollout-abort annotates, then patches /status: dying in between leaves annotations to remove."""
    inc = await app.declare(roles={"model": MODEL})
    original = cells.east3.get("rollout", "llm-70b", "serve-chat")
    rid = await _stored(app, cells, "lever rollout-abort serve-chat/llm-70b", MODEL, inc.channel_id)
    await _crashed_executing(app, rid, T0 - 600)
    await _send(app, rid, slice(0, 1))
    assert cells.east3.get("rollout", "llm-70b", "serve-chat")["metadata"]["annotations"]
    await start_hooks(app)

    rec = await lever_store(app.services).get(rid)
    assert rec.state == "failed" and "interrupted part-way; what had landed was put back" in rec.result["message"]
    assert comparable(cells.east3.get("rollout", "llm-70b", "serve-chat"), False) == comparable(original, False)


async def test_a_young_in_flight_request_is_left_to_its_process_until_it_is_stuck(app, cells, clock):
    inc = await app.declare(roles={"ops": OPS})
    rid = await _stored(app, cells, HOLD, OPS, inc.channel_id)
    await _crashed_executing(app, rid, clock.now())  # another replica may be running it right now
    await start_hooks(app)
    assert (await lever_store(app.services).get(rid)).state == "executing"
    clock.advance(299)
    await app.tick()
    assert (await lever_store(app.services).get(rid)).state == "executing"
    clock.advance(2)
    await app.tick()
    assert (await lever_store(app.services).get(rid)).state == "failed"


async def test_undoing_settles_to_undone_or_back_to_done(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    original = cells.east3.get("clusterqueue", "research-h100")
    assert "applied and verified" in await say(app, HOLD, OPS, inc.channel_id)
    assert "applied and verified" in await say(app, "lever jobset-suspend train-llm/pretrain-405b", OPS, inc.channel_id)
    store = lever_store(app.services)
    # REQ-1: the dead process claimed the undo but its restore never landed.
    assert await store.transition("REQ-1", {"done"}, "undoing", undone_by=OPS, undone_at=T0 - 600)
    # REQ-2: its restore landed, then the process died before recording it.
    assert await store.transition("REQ-2", {"done"}, "undoing", undone_by=OPS, undone_at=T0 - 600)
    js = cells.east3.get("jobset", "pretrain-405b", "train-llm")
    before = (await store.get("REQ-2")).pre_state
    js["spec"]["suspend"] = before["/spec/suspend"]
    for key in ("firebreak.io/request", "firebreak.io/incident"):
        js["metadata"]["annotations"].pop(key)
    if not js["metadata"]["annotations"]:
        del js["metadata"]["annotations"]
    cells.east3.put(js)
    writes = len(patches(cells.east3))
    await start_hooks(app)

    assert (await store.get("REQ-1")).state == "done"
    assert cells.east3.get("clusterqueue", "research-h100")["spec"]["stopPolicy"] == "Hold"
    assert (await store.get("REQ-2")).state == "undone"
    assert len(patches(cells.east3)) == writes
    texts = channel_texts(app, inc.channel_id)
    assert any(
        "REQ-1 kueue-hold research-h100 (us-east-3): the undo by <@U0OPS> was interrupted before the "
        "restore landed; nothing changed, REQ-1 is still applied" in t
        for t in texts
    ), texts
    assert any(
        t.startswith(
            "REQ-2 jobset-suspend train-llm/pretrain-405b (us-east-3): undone by <@U0OPS> "
            "(restore verified by a read-back"
        )
        for t in texts
    ), texts
    acts = [
        (e["action"], e["detail"].get("request"))
        for e in await audit_entries(app, inc.id)
        if e["detail"].get("reconciled")
    ]
    assert acts == [("lever.undo_failed", "REQ-1"), ("lever.undo", "REQ-2")]
    # REQ-1 is `done` again, so a fresh undo works.
    assert "undone" in await say(app, "undo REQ-1", OPS, inc.channel_id)
    assert comparable(cells.east3.get("clusterqueue", "research-h100"), False) == comparable(original, False)


async def test_a_settle_is_one_system_command_through_the_dispatcher(app, cells, clock):
    """The restart sweep and its timer settle through dispatch: one `command.lever_settle` per settle,
    whose request id the lever.* event carries; waiting and a settled request add nothing."""
    inc = await app.declare(roles={"ops": OPS})
    rid = await _stored(app, cells, HOLD, OPS, inc.channel_id)
    await _crashed_executing(app, rid, clock.now())
    await start_hooks(app)  # young: a timer, no settle yet

    def settles(entries):
        return [e for e in entries if e["action"] == "command.lever_settle"]

    assert settles(await audit_entries(app, inc.id)) == []
    clock.advance(301)
    await app.tick()
    await start_hooks(app)  # a later start finds nothing in flight
    await app.tick()
    entries = await audit_entries(app, inc.id)
    [cmd] = settles(entries)
    assert cmd["actor"] == "system" and cmd["detail"]["source"] == "scheduler"
    assert cmd["detail"]["args"] == {"request": rid} and cmd["detail"]["result"] == "ok"
    assert cmd["detail"]["settled"] == "failed" and cmd["detail"]["was"] == "executing"
    [event] = [e for e in entries if e["action"] == "lever.failed"]
    assert cmd["request_id"] and event["request_id"] == cmd["request_id"]


async def test_an_unreadable_object_is_settled_later_and_audited_as_an_error(app, cells, clock):
    inc = await app.declare(roles={"ops": OPS})
    rid = await _stored(app, cells, HOLD, OPS, inc.channel_id)
    await _crashed_executing(app, rid, T0 - 600)
    cells.east3.fail_next("GET", "clusterqueues/research-h100", 500, times=3)  # every read attempt
    await start_hooks(app)
    assert (await lever_store(app.services).get(rid)).state == "executing"
    [err] = [e for e in await audit_entries(app, inc.id) if e["action"] == "command.lever_settle"]
    assert err["detail"]["result"] == "error" and err["detail"]["settled"] is None
    clock.advance(301)
    await app.tick()
    assert (await lever_store(app.services).get(rid)).state == "failed"
