"""The price on the approval card, and GPU-hours that moved between the approval and the execution: they
are read again and announced, never a reason to ask again (docs/levers.md, "Price"; what does need a new
approval is in tests/levers/test_price_stale.py)."""

from __future__ import annotations

import pytest

from bot.clock import iso
from fbworld.kube import samples
from levers.price import Price
from levers.store import lever_store
from tests.levers.test_price import CHECKPOINT, JOBSET_PATH, NAME, NS, PULL, with_checkpoint
from tests.support.harness import T0, audit_entries
from tests.support.levers import OPS, patches, say
from tests.support.messages import text_of


@pytest.fixture
def policy_overrides() -> dict:
    return {
        "rollout_verify_seconds": 1,
        "api_timeout_seconds": 2,
        "levers": {"jobset-suspend": {"roles": ["ops"], "needs_approval": True, "why": "a 512-GPU gang"}},
    }


def cards_of(app, channel: str, rid: str) -> list[dict]:
    return [m for m in app.slack.messages(channel) if str(m.get("text", "")).startswith(f"{rid} needs approval")]


async def approve(app, rid: str, channel: str) -> str:
    key = await app.press("lever.approve", rid, user="U_IC", channel=channel)
    return await app.reply(key, timeout=15)


async def test_the_card_shows_the_price_and_a_checkpoint_that_moved_back_runs_at_the_price_read_again(app, cells):
    cell = cells.east3
    js = cell.put(with_checkpoint(samples.jobset(), iso(T0 - 2400)))
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, PULL, OPS, inc.channel_id)
    assert "REQ-1" in out and "needs approval" in out and "341 GPU-hours" in out, out
    [card] = cards_of(app, inc.channel_id, "REQ-1")
    assert "*Price*" in text_of(card) and "341 GPU-hours (512 GPUs x 40 min" in text_of(card), text_of(card)

    # The trainer's checkpoint annotation moves back (the last save failed; an older one is the last):
    # 70 min of 512 GPUs is 597 GPU-hours. GPU-hours move by themselves; the gang and its 512 GPUs are
    # what was approved, so it runs on this approval at the price read now, and says what moved.
    js["metadata"]["annotations"][CHECKPOINT] = iso(T0 - 4200)
    cell.put(js)
    cell.requests.clear()
    said = await approve(app, "REQ-1", inc.channel_id)
    assert "applied and verified" in said and "597 GPU-hours (512 GPUs x 70 min" in said, said
    assert [r.path for r in patches(cell)] == [JOBSET_PATH]
    assert await lever_store(app.services).get("REQ-2") is None
    [announced] = [str(m["text"]) for m in app.slack.messages(inc.channel_id) if "applying now" in str(m["text"])]
    assert "moved by themselves since the approval" in announced, announced
    assert f"JobSet {NS}/{NAME}: 341 GPU-hours → 597 GPU-hours" in announced, announced
    [apply] = [e for e in await audit_entries(app, inc.id) if e["action"] == "lever.apply"]
    assert Price.from_record(apply["detail"]["price"]).total("GPU-hours") == pytest.approx(597.33, 0.01)
    assert Price.from_record(apply["detail"]["approved_price"]).total("GPU-hours") == pytest.approx(341.33, 0.01)
