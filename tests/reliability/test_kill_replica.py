"""A replica SIGKILLed mid-lever and mid-approval while the other keeps serving (issue 13, item 4).

Two `firebreak serve` processes share one redis-server, the fake Slack and a fake cell's API
server. Replica A takes the request and is SIGKILLed at the worst moment: its PATCH on its way to
the API server, or the approval decided and the lever not started yet. Replica B, which nobody
restarts, finishes the story on its own scheduler loop:

- the lever is neither lost (it ends done or failed, said in the channel) nor run twice (the
  PATCHes that reach the API server are counted there);
- the audit, read with `firebreak audit export` and checked with `firebreak audit verify`, says
  what happened: B's settle or resume, and, once the dead request's intent is old enough for the
  repair sweep, A's request as ``interrupted``.

The policy shortens the waits so the test runs in seconds: a request in flight counts as abandoned
after STUCK seconds (shipped: 300), an approval window is 15 s (shipped: 10 min).
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.approvals.store import ballots
from bot.clock import ManualClock
from bot.core import intents
from fbworld.kube import FakeKubeCluster, samples, write_kubeconfig
from fbworld.slack import FakeSlack
from levers.store import lever_store
from tests.support.reliability.replicas import Pair, exported, start_pair, token, verified, write_policy
from tests.support.reliability.world import CELL, CQ_PATH, OPS, close, has_button, observer, text_of, until, writes

pytestmark = pytest.mark.reliability

STUCK = 4.0  # levers.yaml stuck_after_seconds: longer than any live request takes here
API_TIMEOUT = 2.0
WINDOW_S = 15.0
PATCH_DELAY = 1.5  # the PATCH is on its way this long: A is killed meanwhile
HOLD = "lever kueue-hold research-h100"
DRAIN = "lever kueue-hold-drain research-h100"


@pytest.fixture
async def cell() -> AsyncIterator[FakeKubeCluster]:
    async with FakeKubeCluster(CELL) as c:
        c.put(samples.cluster_queue())
        yield c


@pytest.fixture
def policy(tmp_path: Path) -> Path:
    return write_policy(
        tmp_path,
        levers={"stuck_after_seconds": STUCK, "api_timeout_seconds": API_TIMEOUT},
        approvals={"lever": {"window_minutes": WINDOW_S / 60}},
    )


@pytest.fixture
async def pair(slack: FakeSlack, redis_url: str, cell: FakeKubeCluster, policy: Path, tmp_path: Path):
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", {CELL: cell.url})
    p = await start_pair(slack, redis_url, KUBECONFIG=str(kubeconfig), FIREBREAK_POLICY_DIR=str(policy))
    yield p
    await p.stop()


def stop_policy(cell: FakeKubeCluster) -> str:
    return str(cell.get("clusterqueue", "research-h100")["spec"]["stopPolicy"])


def channel_posts(slack: FakeSlack, channel: str, needle: str) -> list:
    return [
        c
        for c in slack.calls_to("chat.postMessage")
        if c.args.get("channel") == channel and needle in str(c.args.get("text", ""))
    ]


async def repair_later(pair: Pair, policy: Path) -> int:
    """The intent-repair sweep as it runs STALE_AFTER_S later (any replica, every minute): a
    ManualClock stands for the five minutes the test does not wait."""
    later = observer(pair.redis_url, pair.slack.api_url, policy, ManualClock(time.time() + intents.STALE_AFTER_S + 1))
    try:
        return await intents.repair(later)
    finally:
        await close(later)


def story(entries: list[dict], *actions: str) -> list[tuple[str, str, str | None]]:
    return [(e["action"], e["actor"], e["detail"].get("result")) for e in entries if e["action"] in actions]


@pytest.mark.parametrize("landed", [True, False], ids=["write-landed", "write-lost"])
async def test_replica_killed_while_its_patch_is_on_the_way(pair: Pair, cell, policy, slack, landed):
    a, b = pair.a, pair.b
    channel = await pair.declare(a, "Research queue starving", cells=(CELL,), ops=OPS)
    cell.delay_next("PATCH", CQ_PATH, PATCH_DELAY)
    if not landed:  # the API server answers 500 after the delay: the write never lands
        cell.fail_next("PATCH", CQ_PATH, 500)
    _, ack, _ = await pair.command(a, HOLD, OPS, channel)
    assert ack.startswith("Planning kueue-hold on research-h100"), ack
    await until(lambda: writes(cell), 10, "A's PATCH at the API server")
    await a.kill()

    # B serves on while A's request is in limbo, and shows it as running.
    status = await pair.run(b, "status", "U_IC", channel)
    assert "REQ-1 kueue-hold research-h100 (us-east-3) running" in status, status

    svc = observer(pair.redis_url, slack.api_url, policy)
    try:
        rec = await until(lambda: _settled(svc, "REQ-1"), STUCK + 15, "B to settle REQ-1 on its stuck-request timer")
    finally:
        await close(svc)
    # Not re-applied: the one PATCH A sent is the only one the API server ever got.
    assert len(writes(cell)) == 1
    said = rec.result["message"]
    if landed:
        assert (rec.state, stop_policy(cell)) == ("done", "Hold")
        assert said.startswith("REQ-1 kueue-hold research-h100 (us-east-3): applied and verified (stopPolicy=Hold; ")
        assert "found stuck in flight; read back, not re-applied" in said
    else:
        assert (rec.state, stop_policy(cell)) == ("failed", "None")
        assert said == (
            "REQ-1 kueue-hold research-h100 (us-east-3): failed: interrupted before the write landed; "
            "nothing changed (found stuck in flight; read back, not re-applied)."
        )

    # Said once in the incident channel, by B (its post follows the settle it reports).
    def outcomes() -> list:
        return [c for c in channel_posts(slack, channel, "REQ-1 kueue-hold") if "applying now" not in c.args["text"]]

    await until(outcomes, 10, "B's post of REQ-1's outcome")
    [post] = outcomes()
    assert post.token == token("b") and post.args["text"] == said
    # Before its write, A (only A) said in the channel that it was applying, with the price.
    [applying] = channel_posts(slack, channel, "REQ-1 kueue-hold research-h100 (us-east-3): applying now")
    assert applying.token == token("a") and "Price (read now):" in applying.args["text"]

    # The audit: B's settle, then (the repair sweep, five minutes on) A's request as interrupted.
    entries = exported(pair.redis_url, "INC-1")
    settled = "done" if landed else "failed"
    [settle] = [e for e in entries if e["action"] == "command.lever_settle"]
    assert settle["actor"] == "system" and settle["detail"]["source"] == "scheduler"
    assert (settle["detail"]["was"], settle["detail"]["settled"]) == ("executing", settled)
    [event] = [e for e in entries if e["action"] == f"lever.{settled}"]
    assert event["detail"]["request"] == "REQ-1" and event["detail"]["reconciled"] is True
    assert not [e for e in entries if e["action"] == "command.lever"]  # A died before its entry
    assert await repair_later(pair, policy) == 1
    entries = exported(pair.redis_url, "INC-1")
    [lever] = [e for e in entries if e["action"] == "command.lever"]
    assert (lever["actor"], lever["detail"]["result"]) == (OPS, "interrupted")
    assert lever["seq"] > settle["seq"]
    assert verified(pair.redis_url).startswith("audit chain OK")

    # Nothing lost, nothing twice: what comes next works from B, one write each.
    if landed:
        out = await pair.run(b, "undo REQ-1", OPS, channel)
        assert "REQ-1" in out and "undone" in out, out
        assert stop_policy(cell) == "None"
    else:
        out = await pair.run(b, HOLD, OPS, channel)
        assert out.startswith("REQ-2 kueue-hold research-h100 (us-east-3): applied and verified"), out
        assert stop_policy(cell) == "Hold"
    assert len(writes(cell)) == 2
    assert b.problems() == [], b.problems()


async def _settled(svc, rid: str):
    """Settled and its result written: a read-back settle moves the state first (the compare-and-set
    that decides who settles), then stores the result it reports."""
    rec = await lever_store(svc).get(rid)
    done = rec is not None and rec.state not in ("executing", "approved", "pending_approval")
    return rec if done and rec.result.get("message") else None


async def _request_drain(pair: Pair, channel: str) -> str:
    out = await pair.run(pair.a, DRAIN, OPS, channel)
    rid = re.search(r"REQ-\d+", out)
    assert rid and "approval" in out, out
    await until(lambda: _card(pair.slack, channel), 10, "the approval card")
    return rid.group(0)


def _card(slack: FakeSlack, channel: str) -> dict | None:
    cards = [m for m in slack.messages(channel) if has_button(m, "lever.approve")]
    return cards[0] if cards else None


async def test_replica_killed_after_the_approval_before_the_lever_ran(pair: Pair, cell, policy, slack):
    """A records the IC's approval, then dies before it starts the lever (stuck editing the card).
    B runs it, once, when the approval window's timer fires: the approved plan is not lost."""
    a, b = pair.a, pair.b
    channel = await pair.declare(a, "Research queue starving", cells=(CELL,), ops=OPS)
    rid = await _request_drain(pair, channel)
    slack.delay_next("chat.update", 5.0)  # A's "executing…" edit of the card hangs in Slack
    mark = len(slack.calls)  # the incident card's edits from seating Ops may come late: not those
    await pair.press(a, "lever.approve", rid, "U_IC", channel)
    await until(
        lambda: any(c.method == "chat.update" and c.token == token("a") for c in slack.calls[mark:]),
        10,
        "A's edit of the approval card",
    )
    await a.kill()

    svc = observer(pair.redis_url, slack.api_url, policy)
    try:
        b_ = await ballots(svc).get("INC-1", rid)
        assert b_ is not None and b_.state == "approved" and b_.decided_by == "U_IC"
        assert (await lever_store(svc).get(rid)).state == "approved"  # approved, not started
        assert writes(cell) == []
        status = await pair.run(b, "status", "U_IC", channel)  # B serves meanwhile
        assert "INC-1" in status, status
        rec = await until(lambda: _settled(svc, rid), WINDOW_S + 20, "B to run the approved lever")
    finally:
        await close(svc)
    assert rec.state == "done" and rec.result["verified"] is True
    assert len(writes(cell)) == 1 and stop_policy(cell) == "HoldAndDrain"
    said = rec.result["message"]
    assert said.startswith(f"{rid} kueue-hold-drain research-h100 (us-east-3): applied and verified"), said
    # The card is edited after the record settles.
    card = await until(
        lambda: (c := _card(slack, channel)) is not None and said in text_of(c) and c, 10, "the card's outcome"
    )
    assert "Approved by <@U_IC> (IC) at " in text_of(card)

    entries = exported(pair.redis_url, "INC-1")
    assert story(entries, "approval.requested", "command.approval_settle", "lever.apply", "lever.done") == [
        ("approval.requested", OPS, None),
        ("lever.apply", OPS, None),
        ("lever.done", OPS, None),
        ("command.approval_settle", "system", "ok"),
    ], entries
    [resumed] = [e for e in entries if e["action"] == "command.approval_settle"]
    assert resumed["detail"]["settled"] == "resumed" and resumed["detail"]["state"] == "done"
    assert await repair_later(pair, policy) == 1
    entries = exported(pair.redis_url, "INC-1")
    [press] = [e for e in entries if e["action"] == "command.approve"]
    assert (press["actor"], press["detail"]["result"]) == ("U_IC", "interrupted")
    assert verified(pair.redis_url).startswith("audit chain OK")
    assert len(writes(cell)) == 1
    assert b.problems() == [], b.problems()


async def test_replica_killed_while_the_approved_lever_is_being_applied(pair: Pair, cell, policy, slack):
    """A runs the approved lever and dies with its PATCH on the way. B settles it from a read-back on
    the stuck-request timer (not re-applied), says so on the card, and the window's end runs nothing."""
    a, b = pair.a, pair.b
    channel = await pair.declare(a, "Research queue starving", cells=(CELL,), ops=OPS)
    rid = await _request_drain(pair, channel)
    requested = time.monotonic()
    cell.delay_next("PATCH", CQ_PATH, PATCH_DELAY)
    await pair.press(a, "lever.approve", rid, "U_IC", channel)
    await until(lambda: writes(cell), 10, "A's PATCH at the API server")
    await a.kill()

    svc = observer(pair.redis_url, slack.api_url, policy)
    try:
        rec = await until(lambda: _settled(svc, rid), STUCK + 15, "B to settle the approved lever")
        assert rec.state == "done" and rec.result["reconciled"] is True
        assert stop_policy(cell) == "HoldAndDrain"
        card = await until(
            lambda: (c := _card(slack, channel)) and rec.result["message"] in text_of(c) and c,
            10,
            "the card to show B's settle",
        )
        assert "Approved by <@U_IC> (IC)" in text_of(card)
        # Past the approval window: its timer (cancelled by the settle, or finding it done) runs nothing.
        await until(lambda: time.monotonic() > requested + WINDOW_S + 2, WINDOW_S + 5, "the window's end")
        assert (await lever_store(svc).get(rid)).state == "done"
    finally:
        await close(svc)
    assert len(writes(cell)) == 1  # applied once, by A; B read it back

    assert await repair_later(pair, policy) == 1
    entries = exported(pair.redis_url, "INC-1")
    [settle] = [e for e in entries if e["action"] == "command.lever_settle"]
    assert (settle["detail"]["was"], settle["detail"]["settled"]) == ("executing", "done")
    [press] = [e for e in entries if e["action"] == "command.approve"]
    assert (press["actor"], press["detail"]["result"]) == ("U_IC", "interrupted")
    assert [e["detail"]["request"] for e in entries if e["action"] == "lever.done"] == [rid]
    assert verified(pair.redis_url).startswith("audit chain OK")
    assert b.problems() == [], b.problems()
