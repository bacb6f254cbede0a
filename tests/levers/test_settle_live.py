"""A lever left in flight is settled by the RUNNING process (a timer armed when it entered flight),
and a settle never puts a pre-state back over a change a later request made (issue 9, item 3).

The store really dies here: a private redis-server with an append-only file is SIGKILLed while the
lever's PATCH is on its way to the API server, and restarted with its data (as a Redis with AOF
comes back in production). Other tests leave a request in flight the way a dead process would
(test_reconcile.py does the same)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from levers.inflight import JOB
from levers.store import lever_store
from tests.support.harness import T0, audit_entries
from tests.support.killed_redis import aof_redis, kill, restart
from tests.support.levers import (
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
from tests.support.redis_server import RedisServer

HOLD = "lever kueue-hold research-h100 --cell us-east-3"
CQ_PATH = r"/clusterqueues/research-h100$"
STUCK = 300


@pytest.fixture
def policy_overrides() -> dict:
    return {"rollout_verify_seconds": 1, "api_timeout_seconds": 5, "stuck_after_seconds": STUCK}


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    yield from aof_redis(tmp_path)


@pytest.fixture
def redis_url(own_redis: RedisServer) -> str:  # the levers `app` fixture runs against this test's own Redis
    return own_redis.url


async def _until(check: Callable[[], object], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.01)


def _settles(entries: list[dict], rid: str) -> list[dict]:
    return [e for e in entries if e["action"] == "command.lever_settle" and e["detail"]["args"]["request"] == rid]


def _events(entries: list[dict], rid: str) -> list[str]:
    return [e["action"] for e in entries if e["action"].startswith("lever.") and e["detail"].get("request") == rid]


async def test_a_lever_whose_store_died_after_the_write_is_settled_live_and_never_undoes_a_newer_pull(
    app, cells, clock, own_redis
):
    """The issue's REQ-1/REQ-3: REQ-1's hold lands while Redis dies, so REQ-1 stays `executing`; a
    newer pull of the same lever on the same queue is applied and verified; the running process
    settles REQ-1 on its timer, without a restart, as done and superseded, and the hold stays."""
    inc = await app.declare(roles={"ops": OPS})
    original = cells.east3.get("clusterqueue", "research-h100")
    cells.east3.delay_next("PATCH", CQ_PATH, seconds=1.0)  # the write is on its way when the store dies
    key = await app.command(HOLD, user=OPS, channel=inc.channel_id)
    await _until(lambda: cells.east3.find_requests("PATCH", CQ_PATH))
    kill(own_redis)
    reply = await app.reply(key, timeout=30)
    assert reply.startswith("REQ-1 kueue-hold research-h100 (us-east-3): sent to the API server, but Firebreak "), reply
    assert "Nothing will be re-applied" in reply and "Traceback" not in reply
    assert cells.east3.get("clusterqueue", "research-h100")["spec"]["stopPolicy"] == "Hold"  # the write landed

    await restart(own_redis, app.services.redis)
    store = lever_store(app.services)
    assert (await store.get("REQ-1")).state == "executing"
    assert await app.services.scheduler.pending(JOB, "REQ-1") == T0 + STUCK  # armed before the claim

    out = await say(app, HOLD, OPS, inc.channel_id)  # the newer pull ("REQ-3" in the issue)
    assert out.startswith("REQ-2 kueue-hold research-h100 (us-east-3): applied and verified"), out
    writes = len(patches(cells.east3))
    before = await audit_entries(app, inc.id)

    clock.advance(STUCK - 1)
    await app.tick()
    assert (await store.get("REQ-1")).state == "executing"  # a live process may still own it
    clock.advance(2)
    await app.tick()  # the running process, no restart

    one, two = await store.get("REQ-1"), await store.get("REQ-2")
    assert (one.state, one.result["superseded_by"]) == ("done", "REQ-2")
    assert two.state == "done" and two.result["verified"] is True
    cq = cells.east3.get("clusterqueue", "research-h100")
    assert cq["spec"]["stopPolicy"] == "Hold"  # the hold did not lift
    assert cq["metadata"]["annotations"]["firebreak.io/request"] == "REQ-2"
    assert len(patches(cells.east3)) == writes  # nothing was put back
    said = one.result["message"]
    assert said.startswith("REQ-1 kueue-hold research-h100 (us-east-3): applied and verified (stopPolicy=Hold; ")
    assert "superseded by REQ-2 (kueue-hold, done), which has changed research-h100 since: nothing was put back" in said
    assert said in channel_texts(app, inc.channel_id)
    entries = await audit_entries(app, inc.id)
    new = entries[len(before) :]
    [settle] = _settles(entries, "REQ-1")
    assert settle["detail"]["source"] == "scheduler" and settle["detail"]["settled"] == "done"
    assert _events(new, "REQ-1") == ["lever.done"] and _events(new, "REQ-2") == []
    [event] = [e for e in new if e["action"] == "lever.done"]
    assert event["request_id"] == settle["request_id"] and event["detail"]["superseded_by"] == "REQ-2"
    assert await app.services.scheduler.pending(JOB, "REQ-1") is None
    # And the stack unwinds in order: REQ-2 gives back REQ-1's hold, REQ-1 gives back the original.
    assert "undone" in await say(app, "undo REQ-2", OPS, inc.channel_id)
    assert cells.east3.get("clusterqueue", "research-h100")["spec"]["stopPolicy"] == "Hold"
    assert "undone" in await say(app, "undo REQ-1", OPS, inc.channel_id)
    assert comparable(cells.east3.get("clusterqueue", "research-h100"), False) == comparable(original, False)


async def test_a_restart_sweep_does_not_undo_a_newer_pull_either(app, cells):
    """The same race found by the sweep at start: REQ-1 (its write landed) is settled as done and
    superseded, never by putting back its pre-state."""
    inc = await app.declare(roles={"ops": OPS})
    rid = await _stored(app, cells, HOLD, OPS, inc.channel_id)
    await _crashed_executing(app, rid, T0 - 600)
    await _send(app, rid)
    out = await say(app, HOLD, OPS, inc.channel_id)
    assert "applied and verified" in out, out
    writes = len(patches(cells.east3))
    await start_hooks(app)

    rec = await lever_store(app.services).get(rid)
    assert rec.state == "done" and rec.result["superseded_by"] == "REQ-2"
    assert cells.east3.get("clusterqueue", "research-h100")["spec"]["stopPolicy"] == "Hold"
    assert len(patches(cells.east3)) == writes
    assert len(_settles(await audit_entries(app, inc.id), rid)) == 1


async def test_a_stuck_request_whose_write_never_landed_fails_without_touching_the_newer_pull(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    rid = await _stored(app, cells, HOLD, OPS, inc.channel_id)
    await _crashed_executing(app, rid, T0 - 600)  # died before its write went out
    assert "applied and verified" in await say(app, HOLD, OPS, inc.channel_id)
    writes = len(patches(cells.east3))
    await start_hooks(app)

    rec = await lever_store(app.services).get(rid)
    assert rec.state == "failed" and rec.result["superseded_by"] == "REQ-2"
    assert rec.result["message"].startswith(
        f"{rid} kueue-hold research-h100 (us-east-3): failed: interrupted before the write landed; superseded by REQ-2"
    )
    assert cells.east3.get("clusterqueue", "research-h100")["metadata"]["annotations"]["firebreak.io/request"] == (
        "REQ-2"
    )
    assert len(patches(cells.east3)) == writes


async def test_an_undo_whose_restore_landed_before_a_newer_pull_settles_as_undone(app, cells, clock):
    inc = await app.declare(roles={"ops": OPS})
    original = cells.east3.get("clusterqueue", "research-h100")
    assert "applied and verified" in await say(app, HOLD, OPS, inc.channel_id)
    store = lever_store(app.services)
    # REQ-1's undo: claimed, its restore landed, then the process died before recording it.
    assert await store.transition("REQ-1", {"done"}, "undoing", undone_by=OPS, undone_at=clock.now())
    cells.east3.put(original)
    assert "applied and verified" in await say(app, HOLD, OPS, inc.channel_id)  # REQ-2 holds it again
    writes = len(patches(cells.east3))
    await start_hooks(app)  # young: left to its process (and its timer)
    clock.advance(STUCK + 1)
    await app.tick()

    rec = await store.get("REQ-1")
    assert rec.state == "undone" and rec.result["undo"]["superseded_by"] == "REQ-2"
    assert (await store.get("REQ-2")).state == "done"
    assert cells.east3.get("clusterqueue", "research-h100")["spec"]["stopPolicy"] == "Hold"
    assert len(patches(cells.east3)) == writes
    assert any(
        t.startswith("REQ-1 kueue-hold research-h100 (us-east-3): undone by <@U0OPS> (superseded by REQ-2")
        for t in channel_texts(app, inc.channel_id)
    )
    assert "is undone" in await say(app, "undo REQ-1", OPS, inc.channel_id)  # nothing left to undo


async def test_an_undo_whose_restore_never_landed_stays_applied_beneath_the_newer_pull(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    original = cells.east3.get("clusterqueue", "research-h100")
    assert "applied and verified" in await say(app, HOLD, OPS, inc.channel_id)
    store = lever_store(app.services)
    assert await store.transition("REQ-1", {"done"}, "undoing", undone_by=OPS, undone_at=T0 - 600)
    assert "applied and verified" in await say(app, HOLD, OPS, inc.channel_id)
    await start_hooks(app)

    rec = await store.get("REQ-1")
    assert rec.state == "done"
    said = [t for t in channel_texts(app, inc.channel_id) if t.startswith("REQ-1 kueue-hold research-h100")][-1]
    assert "superseded by REQ-2" in said and "REQ-1 stays applied beneath REQ-2" in said, said
    assert "undone" in await say(app, "undo REQ-2", OPS, inc.channel_id)
    assert "undone" in await say(app, "undo REQ-1", OPS, inc.channel_id)
    assert comparable(cells.east3.get("clusterqueue", "research-h100"), False) == comparable(original, False)


async def test_the_settle_timer_is_armed_while_in_flight_and_dropped_when_finished(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    scheduler = app.services.scheduler
    cells.east3.delay_next("PATCH", CQ_PATH, seconds=0.5)
    key = await app.command(HOLD, user=OPS, channel=inc.channel_id)
    await _until(lambda: cells.east3.find_requests("PATCH", CQ_PATH))
    assert await scheduler.pending(JOB, "REQ-1") == T0 + STUCK
    assert "applied and verified" in await app.reply(key, timeout=15)
    assert await scheduler.pending(JOB, "REQ-1") is None
    assert "undone" in await say(app, "undo REQ-1", OPS, inc.channel_id)
    assert await scheduler.pending(JOB, "REQ-1") is None
