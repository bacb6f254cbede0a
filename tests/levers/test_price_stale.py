"""What makes an approval stale (docs/levers.md, "Price"): a change in what the lever hits (the
gangs, workloads, backends, nodes or replicas, or their GPUs) asks for a new approval; figures that move
by themselves (GPU-hours since a checkpoint growing with the clock, a live request rate within the
policy's band, `price.live_band`) are read again at execution, announced with their fresh values in the
channel and the audit, and the lever runs on the approval it has."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import ValidationError

from bot.clock import iso
from bot.policy.levers import PricePolicy
from fbworld.kube import samples
from levers.price import Price
from levers.store import lever_store
from tests.levers.test_price import JOBSET_PATH, NAME, NS, PULL, stored_price, with_checkpoint
from tests.support.harness import T0, audit_entries
from tests.support.levers import OPS, channel_texts, patches, say
from tests.support.prometheus import PrometheusServer, demand_series, ensure_services_installed, ttft_scenario

START, MINUTES, STEP = T0 - 7200, 240, 15
BURN = {"us-east-1": 0.001, "us-east-2": 0.001, "us-east-3": 0.001}  # every receiver has headroom
# vLLM's finished requests per second per cell, before and from a minute after the pull: us-east-1's
# rate rises by half (within the default 2-fold band), us-east-2's fourfold (beyond it).
CHANGE = T0 + 60
RATES = {"us-east-1": (30.0, 45.0), "us-east-2": (20.0, 80.0)}


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    """A real Prometheus backfilled with vLLM's own series (vllm:request_success_total, the TTFT
    histogram) for the route tests; the JobSet tests read their checkpoint from the annotation."""
    ensure_services_installed()
    sc = ttft_scenario(BURN, start_ts=START, minutes=MINUTES, step=STEP)
    sc.series += demand_series(RATES, CHANGE, START, MINUTES, step=STEP)
    prom = PrometheusServer(tmp_path_factory.mktemp("prom-stale"), sc)
    asyncio.run(prom.start())
    yield prom
    asyncio.run(prom.stop())


@pytest.fixture
def app_settings(prometheus) -> dict:
    return {"prometheus_url": prometheus.url}


@pytest.fixture
def policy_overrides() -> dict:
    ask = {"roles": ["ops"], "needs_approval": True, "why": "a 512-GPU gang"}
    return {
        "rollout_verify_seconds": 1,
        "api_timeout_seconds": 2,
        "levers": {"jobset-suspend": ask},
    }


async def approve(app, rid: str, channel: str) -> str:
    key = await app.press("lever.approve", rid, user="U_IC", channel=channel)
    return await app.reply(key, timeout=15)


def applying(app, channel: str) -> str:
    [said] = [t for t in channel_texts(app, channel) if "applying now" in t]
    return said


async def apply_entry(app, incident: str) -> dict:
    [entry] = [e for e in await audit_entries(app, incident) if e["action"] == "lever.apply"]
    return entry["detail"]


async def test_gpu_hours_that_grew_with_the_clock_run_on_the_approval_and_are_announced_fresh(app, cells):
    cell = cells.east3
    cell.put(with_checkpoint(samples.jobset(), iso(T0 - 1200)))  # 512 GPUs, 20 min since the checkpoint
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, PULL, OPS, inc.channel_id)
    assert "REQ-1" in out and "needs approval" in out and "171 GPU-hours" in out, out

    # Six minutes to approve: 26 min of 512 GPUs is 222 GPU-hours, 30% more. Nothing the lever hits
    # changed (the same gang, the same 512 GPUs): it runs on this approval.
    app.services.clock.advance(360)
    cell.requests.clear()
    said = await approve(app, "REQ-1", inc.channel_id)
    assert "applied and verified" in said, said
    assert [r.path for r in patches(cell)] == [JOBSET_PATH]
    assert await lever_store(app.services).get("REQ-2") is None  # nobody is asked again

    # The channel heard the figure read again before the write, and what moved since the approval.
    announced = applying(app, inc.channel_id)
    assert f"JobSet {NS}/{NAME}: 222 GPU-hours (512 GPUs x 26 min since the last checkpoint" in announced, announced
    assert f"JobSet {NS}/{NAME}: 171 GPU-hours → 222 GPU-hours" in announced, announced
    # The audit has the price it ran at and the one approved.
    detail = await apply_entry(app, inc.id)
    assert Price.from_record(detail["price"]).total("GPU-hours") == pytest.approx(512 * 26 / 60)
    assert Price.from_record(detail["approved_price"]).total("GPU-hours") == pytest.approx(512 * 20 / 60)
    assert detail["moved"] == [f"JobSet {NS}/{NAME}: 171 GPU-hours → 222 GPU-hours"]


async def test_a_gang_whose_gpus_changed_needs_a_new_approval_however_small_the_change(app, cells):
    cell = cells.east3
    js = cell.put(with_checkpoint(samples.jobset(), iso(T0 - 1200)))
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, PULL, OPS, inc.channel_id)
    assert "needs approval" in out and "512 GPUs" in out, out

    # 63 pods instead of 64 by the time it is approved: 504 GPUs, under 2% fewer, is another gang to stop.
    js["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] = 63
    cell.put(js)
    cell.requests.clear()
    said = await approve(app, "REQ-1", inc.channel_id)
    assert "not applied: what it hits changed since it was approved" in said, said
    assert f"JobSet {NS}/{NAME}: 512 GPUs → 504 GPUs" in said and "REQ-2 asks for approval" in said, said
    assert not patches(cell)
    store = lever_store(app.services)
    assert (await store.get("REQ-1")).state == "stale"
    again = await store.get("REQ-2")
    assert again.state == "pending_approval" and stored_price(again).total("GPUs") == 504
    # The new card shows the new price.
    [card] = [
        m for m in app.slack.messages(inc.channel_id) if str(m.get("text", "")).startswith("REQ-2 needs approval")
    ]
    assert "504 GPUs" in str(card["blocks"]), card


@pytest.mark.parametrize("change", ["added", "removed"])
async def test_a_workload_admitted_or_gone_before_a_drain_runs_needs_a_new_approval(app, cells, change):
    cell = cells.east3
    # Ten admitted gangs of 512 GPUs (eleven under "removed").
    count = 10 if change == "added" else 11
    wls = [cell.put(samples.workload_for(cell.put(samples.kueue_jobset(name=f"sweep-{i}")))) for i in range(count)]
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, "lever kueue-hold-drain research-h100 --cell us-east-3", OPS, inc.channel_id)
    assert "REQ-1" in out and "needs approval" in out and f"{count} workloads" in out, out

    evicted = "ClusterQueue research-h100: admitted workloads evicted"
    if change == "added":  # Kueue admits one more before the IC approves: 11 gangs, 5,632 GPUs
        cell.put(samples.workload_for(cell.put(samples.kueue_jobset(name="sweep-10"))))
        moved = [f"{evicted}: 10 workloads → 11 workloads", f"{evicted}: 5120 GPUs → 5632 GPUs"]
    else:  # one finished and its Workload is gone: 10 gangs
        cell.delete("workloads", wls[-1]["metadata"]["name"], NS)
        moved = [f"{evicted}: 11 workloads → 10 workloads", f"{evicted}: 5632 GPUs → 5120 GPUs"]
    cell.requests.clear()
    said = await approve(app, "REQ-1", inc.channel_id)
    # Under a tenth either way, which a 10% tolerance let run: a drain nobody approved for that gang.
    assert "not applied: what it hits changed since it was approved" in said, said
    assert all(m in said for m in moved), said
    assert not patches(cell)
    again = await lever_store(app.services).get("REQ-2")
    assert again.state == "pending_approval" and stored_price(again).total("GPUs") == 512 * (21 - count)


ROUTE = "lever route-weight edge/chat-global backend={}"


async def test_a_route_rate_that_moved_within_the_band_runs_and_is_announced_fresh(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, ROUTE.format("cell-us-east-1"), OPS, inc.channel_id)
    # Weights 50/100 → 25/75: a third of us-east-1's 30 req/s moves.
    assert "needs approval" in out and "traffic moved off cell-us-east-1: 10 req/s" in out, out

    # Eight minutes later us-east-1 serves 45 req/s: 1.5-fold, within the policy's 2-fold band.
    app.services.clock.advance(480)
    said = await approve(app, "REQ-1", inc.channel_id)
    assert "applied and verified" in said, said
    assert len(patches(cells.fleet)) == 1
    announced = applying(app, inc.channel_id)
    assert "traffic moved off cell-us-east-1: 10 req/s → 15 req/s" in announced, announced
    assert "• traffic moved off cell-us-east-1: 15 req/s" in announced, announced
    detail = await apply_entry(app, inc.id)
    assert Price.from_record(detail["price"]).total("req/s") == pytest.approx(15, 0.05)


async def test_a_route_rate_that_moved_beyond_the_band_needs_a_new_approval(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, ROUTE.format("cell-us-east-2"), OPS, inc.channel_id)
    assert "needs approval" in out and "traffic moved off cell-us-east-2: 6.67 req/s" in out, out

    # us-east-2 now serves 80 req/s, four times what the approver saw: beyond the 2-fold band.
    app.services.clock.advance(480)
    said = await approve(app, "REQ-1", inc.channel_id)
    assert "not applied: a live figure moved more than 2-fold since it was approved" in said, said
    assert "traffic moved off cell-us-east-2: 6.67 req/s → 26.7 req/s" in said, said
    assert "REQ-2 asks for approval" in said, said
    assert not patches(cells.fleet)


def test_a_policy_that_still_sets_the_old_tolerance_is_refused_saying_what_replaced_it():
    with pytest.raises(ValidationError, match=r"price\.tolerance is gone.*set price\.live_band"):
        PricePolicy.model_validate({"tolerance": 0.1})
    assert PricePolicy().live_band == 2
