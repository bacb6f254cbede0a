"""The price of the mitigation (docs/levers.md, "Price"): jobset-suspend, node-quarantine and kueue-hold(-drain)
state what they cost, read at plan time from the cluster and Prometheus; the plan and its price reach the
incident channel before the API server sees the write; the approval card shows the price, and a change in
what the lever hits before execution asks for a new approval (tests/levers/test_price_stale.py)."""

from __future__ import annotations

import asyncio

import pytest

from bot.clock import iso
from fbworld.kube import samples
from levers.price import Cost, Price
from levers.store import lever_store
from tests.support.harness import T0, audit_entries
from tests.support.levers import OPS, patches, say
from tests.support.prometheus import PrometheusServer, Series, ensure_services_installed

NS, NAME = "train-llm", "pretrain-405b"
JOBSET_PATH = f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{NS}/jobsets/{NAME}"
PULL = f"lever jobset-suspend {NS}/{NAME} --cell us-east-3"
CHECKPOINT = "training.corp/last-checkpoint"
# The site's own trainer gauge (no upstream exporter publishes a checkpoint time: the policy names
# whichever series the trainer pushes). One series per rank, as a trainer that exports from every rank.
GAUGE = "trainer_last_checkpoint_timestamp_seconds"


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """A real Prometheus with the trainer's checkpoint gauge: one rank for pretrain-405b (checkpoint
    25 min before T0), two ranks for finetune-70b (several series for one job)."""
    ensure_services_installed()
    ts = [T0 - 3600 + 60 * i for i in range(61)]
    series = [
        Series(GAUGE, "gauge", {"namespace": NS, "jobset": NAME, "rank": "0"}, [(t, T0 - 1500) for t in ts]),
        Series(GAUGE, "gauge", {"namespace": NS, "jobset": "finetune-70b", "rank": "0"}, [(t, T0 - 600) for t in ts]),
        Series(GAUGE, "gauge", {"namespace": NS, "jobset": "finetune-70b", "rank": "1"}, [(t, T0 - 660) for t in ts]),
    ]
    prom = PrometheusServer(tmp_path_factory.mktemp("prom-ckpt"), series)
    asyncio.run(prom.start())
    yield prom
    asyncio.run(prom.stop())


@pytest.fixture
def app_settings(checkpoints) -> dict:
    return {"prometheus_url": checkpoints.url}


def with_checkpoint(js: dict, at: str | None) -> dict:
    if at is not None:
        js["metadata"].setdefault("annotations", {})[CHECKPOINT] = at
    return js


def seen_at_writes(app, cell, channel: str) -> list[tuple[str, list[str]]]:
    """For every write the API server receives: the incident channel's messages at that moment."""
    seen: list[tuple[str, list[str]]] = []

    class Log(list):
        def append(self, rec) -> None:  # the emulator records each request as it arrives
            if rec.method != "GET" and rec.query.get("dryRun") != "All":
                seen.append((rec.path, [str(m.get("text", "")) for m in app.slack.messages(channel)]))
            super().append(rec)

    cell.requests = Log()
    return seen


def stored_price(rec) -> Price:
    price = Price.from_record(rec.plan.get("price"))
    assert price is not None, rec.plan
    return price


async def test_a_512_gpu_jobset_40_minutes_from_its_checkpoint_costs_341_gpu_hours_said_before_the_write(app, cells):
    cell = cells.east3
    cell.put(with_checkpoint(samples.jobset(), iso(T0 - 2400)))  # 64 pods x 8 GPUs, checkpoint 40 min ago
    inc = await app.declare(roles={"ops": OPS})
    seen = seen_at_writes(app, cell, inc.channel_id)

    out = await say(app, PULL, OPS, inc.channel_id)
    assert "applied and verified" in out, out
    rec = await lever_store(app.services).get("REQ-1")
    price = stored_price(rec)
    assert price.total("GPU-hours") == pytest.approx(512 * 40 / 60)
    assert price.total("GPUs") == 512
    # The write went out once, and by then the channel had the plan with its price.
    [(path, channel)] = seen
    assert path == JOBSET_PATH
    [announced] = [t for t in channel if "applying now" in t]
    assert announced.startswith(f"REQ-1 jobset-suspend {NS}/{NAME} (us-east-3): applying now"), announced
    assert f"JobSet {NS}/{NAME}: 341 GPU-hours (512 GPUs x 40 min since the last checkpoint" in announced
    assert f"annotation {CHECKPOINT}" in announced and "suspend=true" in announced
    # The audit carries the price: the pull's entry and lever.apply.
    entries = await audit_entries(app, inc.id)
    [apply] = [e for e in entries if e["action"] == "lever.apply"]
    assert Price.from_record(apply["detail"]["price"]) == price
    [pulled] = [e for e in entries if e["detail"].get("request") == "REQ-1" and e["detail"].get("digest")]
    assert Price.from_record(pulled["detail"]["price"]) == price


QUERY = f'{GAUGE}{{namespace="$namespace",jobset="$jobset"}}'


def overrides(**price) -> list[dict]:
    return [{"rollout_verify_seconds": 1, "api_timeout_seconds": 2, "price": price}]


@pytest.mark.parametrize("policy_overrides", overrides(checkpoint_query=QUERY))
async def test_a_kueue_jobset_is_priced_from_its_workload_and_the_checkpoint_query_answers_first(app, cells):
    cell = cells.east3
    js = cell.put(with_checkpoint(samples.kueue_jobset(), iso(T0 - 2400)))
    for job in samples.jobset_jobs(js, iso(T0 - 7200)):  # started before the checkpoint: it wins
        cell.put(job)
    wl = samples.workload_for(js)
    wl["spec"]["podSets"][0]["count"] = 32  # Kueue admitted it at 32 pods (partial admission): 256 GPUs
    cell.put(wl)
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, PULL + " --dry-run", OPS, inc.channel_id)
    # The query's checkpoint (25 min ago) wins over the annotation's (40 min): 256 x 25/60.
    assert (
        f"JobSet {NS}/{NAME}: 107 GPU-hours (256 GPUs x 25 min since the last checkpoint (the checkpoint query))"
        in (out)
    ), out
    assert f": 256 GPUs (Workload {wl['metadata']['name']} podSets)" in out, out


async def test_a_jobset_without_the_checkpoint_annotation_is_unknown(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, PULL + " --dry-run", OPS, inc.channel_id)  # the seeded JobSet: no annotation
    assert f"JobSet {NS}/{NAME}: unknown (last checkpoint unknown: no {CHECKPOINT} annotation)" in out
    assert ": 512 GPUs (replicas x parallelism x GPUs/pod)" in out, out


@pytest.mark.parametrize("policy_overrides", overrides(checkpoint_annotation=None))
async def test_with_no_checkpoint_source_the_price_is_unknown_and_the_lever_still_runs(app, cells):
    cell = cells.east3
    cell.put(with_checkpoint(samples.jobset(), iso(T0 - 2400)))  # not the policy's source: not read
    inc = await app.declare(roles={"ops": OPS})
    cell.requests.clear()
    out = await say(app, PULL, OPS, inc.channel_id)
    assert "applied and verified" in out, out
    [announced] = [m["text"] for m in app.slack.messages(inc.channel_id) if "applying now" in m["text"]]
    assert f"JobSet {NS}/{NAME}: unknown (" in announced, announced
    price = stored_price(await lever_store(app.services).get("REQ-1"))
    [hours] = [c for c in price.costs if c.unit == "GPU-hours"]
    assert hours.value is None and "the policy names no checkpoint source" in hours.how
    assert price.total("GPU-hours") is None  # unknown, never 0
    assert [r.path for r in patches(cell)] == [JOBSET_PATH]


async def test_a_checkpoint_annotation_that_is_not_a_time_is_said_and_not_guessed(app, cells):
    cell = cells.east3
    cell.put(with_checkpoint(samples.jobset(), "yesterday, around lunch"))
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, PULL, OPS, inc.channel_id)
    assert "applied and verified" in out, out  # the lever still plans and runs
    price = stored_price(await lever_store(app.services).get("REQ-1"))
    [hours] = [c for c in price.costs if c.unit == "GPU-hours"]
    assert hours.value is None
    assert f"annotation {CHECKPOINT}='yesterday, around lunch' is not an RFC 3339 time" in hours.how


async def test_an_annotation_that_would_ping_the_channel_is_shown_inert(app, cells):
    cell = cells.east3
    cell.put(with_checkpoint(samples.jobset(), "<!channel> <https://evil.example|checkpoint>"))
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, PULL, OPS, inc.channel_id)
    assert "applied and verified" in out, out
    [announced] = [m["text"] for m in app.slack.messages(inc.channel_id) if "applying now" in m["text"]]
    assert "'&lt;!channel&gt; &lt;https://evil.example|checkp…' is not an RFC 3339 time" in announced, announced
    assert "<!channel>" not in announced and "<https://" not in announced, announced


@pytest.mark.parametrize("policy_overrides", overrides(checkpoint_query=QUERY))
async def test_a_checkpoint_query_with_several_series_for_one_job_is_said_and_not_guessed(app, cells):
    cell = cells.east3
    # One series per rank (two): not one checkpoint, so no figure, whatever the annotation says after it.
    cell.put(with_checkpoint(samples.jobset(name="finetune-70b"), "not-a-time"))
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, f"lever jobset-suspend {NS}/finetune-70b --cell us-east-3", OPS, inc.channel_id)
    assert "applied and verified" in out, out
    price = stored_price(await lever_store(app.services).get("REQ-1"))
    [hours] = [c for c in price.costs if c.unit == "GPU-hours"]
    assert hours.value is None
    assert "the checkpoint query returns 2 series for this one job (it must return one)" in hours.how
    assert "is not an RFC 3339 time" in hours.how


def gang_pod(i: int, node: str, jobset: str = NAME) -> dict:
    pod = samples.pod(NS, f"{jobset}-workers-0-{i}")
    pod["metadata"]["labels"] = {
        "jobset.sigs.k8s.io/jobset-name": jobset,
        "jobset.sigs.k8s.io/replicatedjob-name": "workers",
    }
    pod["spec"]["nodeName"] = node
    return pod


async def test_node_quarantine_names_the_gangs_with_pods_on_the_node(app, cells):
    cell = cells.east3
    js = cell.put(with_checkpoint(samples.kueue_jobset(), iso(T0 - 2400)))
    cell.put(samples.workload_for(js))
    other = cell.put(with_checkpoint(samples.jobset(name="finetune-70b"), iso(T0 - 600)))
    node = "gpu-a3-0003"
    cell.put(gang_pod(0, node))
    cell.put(gang_pod(1, node))  # one gang, however many of its pods are there
    cell.put(gang_pod(0, "gpu-a3-0004", jobset=other["metadata"]["name"]))  # another node: not hit
    lone = samples.pod(NS, "notebook-0")
    lone["spec"]["nodeName"] = node  # not a training gang: no JobSet to price
    cell.put(lone)
    inc = await app.declare(roles={"ops": OPS})
    # A node with no gang on it costs no training progress, and says so (nothing guessed).
    out = await say(
        app, "lever node-quarantine gpu-a3-0005 --cell us-east-3 reason=xid79 --dry-run", OPS, inc.channel_id
    )
    assert "no training gang has pods on gpu-a3-0005 (namespaces read: train-llm)" in out, out
    out = await say(app, f"lever node-quarantine {node} --cell us-east-3 reason=xid79", OPS, inc.channel_id)
    assert "applied and verified" in out, out
    # A NoSchedule taint evicts nothing: the node's GPUs close to new pods, the gang keeps running
    # (tests/levers/test_node_quarantine_price.py).
    price = stored_price(await lever_store(app.services).get("REQ-2"))
    assert {c.what for c in price.costs} == {
        f"Node {node}: GPUs closed to new pods",
        f"Node {node}: training progress lost",
    }
    assert price.total("GPUs") == 8 and price.total("GPU-hours") == 0
    [announced] = [m["text"] for m in app.slack.messages(inc.channel_id) if "applying now" in m["text"]]
    assert f"JobSet {NS}/{NAME} (0 of its 512 GPUs there, 2 pods) keeps running on {node}" in announced, announced


async def test_kueue_hold_drain_prices_the_workloads_it_evicts_and_holds(app, cells):
    cell = cells.east3
    js = cell.put(samples.kueue_jobset())
    cell.put(samples.workload_for(js))  # admitted to research-h100: 512 GPUs
    elsewhere = cell.put(samples.kueue_jobset(name="finetune-70b"))
    cell.put(samples.workload_for(elsewhere, cluster_queue="prod-h100"))  # another queue: not evicted
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, "lever kueue-hold-drain research-h100 --cell us-east-3", OPS, inc.channel_id)
    assert "needs approval" in out, out
    for said in (
        "ClusterQueue research-h100: workloads pending, not admitted while it holds: 3 workloads "
        "(status.pendingWorkloads)",
        "ClusterQueue research-h100: admitted workloads evicted: 1 workload (status.admission.clusterQueue of "
        "the Workloads in train-llm)",
        "ClusterQueue research-h100: admitted workloads evicted: 512 GPUs (their podSets)",
    ):
        assert said in out, out
    [card] = [
        m for m in app.slack.messages(inc.channel_id) if str(m.get("text", "")).startswith("REQ-1 needs approval")
    ]
    assert "512 GPUs" in str(card["blocks"]), card

    out = await say(app, "lever kueue-hold research-h100 --cell us-east-3 --dry-run", OPS, inc.channel_id)
    assert "1 admitted workload keeps running (512 GPUs)" in out, out
    assert "evicted" not in out, out


def test_what_the_lever_hits_is_compared_exactly_and_figures_that_move_by_themselves_are_not():
    restored = "revision restored (the stable ReplicaSet)"
    at = Price(costs=(Cost(what=restored, unit="revision", value=10.0, how="ReplicaSet a"),))
    later = Price(costs=(Cost(what=restored, unit="revision", value=11.0, how="ReplicaSet b"),))
    assert at.moved(later, band=2).stale == [f"{restored}: revision 10 → revision 11"]
    assert at.moved(at, band=2).stale == []
    # A count of what it hits: 10 → 11 replicas is one more replica frozen, however small a share.
    count = Price(costs=(Cost(what="frozen", unit="replicas", value=10.0, how=""),))
    more = Price(costs=(Cost(what="frozen", unit="replicas", value=11.0, how=""),))
    assert count.moved(more, band=2).hits == ["frozen: 10 replicas → 11 replicas"]
    # GPU-hours grow with the clock: never stale, however far; said when the figure reads differently.
    hours = Price(costs=(Cost(what="gang", unit="GPU-hours", value=10.0),))
    assert hours.moved(Price(costs=(Cost(what="gang", unit="GPU-hours", value=100.0),)), band=2).stale == []
    assert hours.moved(Price(costs=(Cost(what="gang", unit="GPU-hours", value=100.0),)), band=2).live == [
        "gang: 10 GPU-hours → 100 GPU-hours"
    ]
    assert hours.moved(Price(costs=(Cost(what="gang", unit="GPU-hours", value=10.0004),)), band=2).live == []
    # A live rate: within the band said, beyond it (either way, or from 0) stale; unknown is only said.
    rate = Price(costs=(Cost(what="route", unit="req/s", value=10.0),))

    def to(v: float | None):
        return rate.moved(Price(costs=(Cost(what="route", unit="req/s", value=v),)), band=2)

    assert to(20.0).stale == [] and to(20.0).live == ["route: 10 req/s → 20 req/s"]
    assert to(5.0).stale == []
    assert to(21.0).beyond == ["route: 10 req/s → 21 req/s, more than 2-fold"]
    assert to(4.0).beyond == ["route: 10 req/s → 4 req/s, more than 2-fold"]
    assert to(0.0).beyond == ["route: 10 req/s → 0 req/s, more than 2-fold"]
    assert to(None).stale == [] and to(None).live == ["route: 10 req/s → unknown req/s"]
    # A figure of what it hits that is gone or new is a change in what it hits; a live one only said.
    gpus = Price(costs=(Cost(what="gang a", unit="GPUs", value=8.0), Cost(what="gang a", unit="GPU-hours", value=1.0)))
    two = Price(costs=(*gpus.costs, Cost(what="gang b", unit="GPUs", value=8.0)))
    assert gpus.moved(two, band=2).hits == ["gang b: 8 GPUs is a new cost"]
    assert two.moved(gpus, band=2).hits == ["gang b: 8 GPUs is no longer a cost"]
    assert gpus.moved(Price(costs=(Cost(what="gang a", unit="GPUs", value=None),)), band=2).hits == [
        "gang a: 8 GPUs → unknown GPUs"
    ]
