"""The price of the mitigation, for route-weight, keda-pause, killswitch, rollout-abort,
sandbox-quarantine and remediation-pause: each dry-run's reply names the figures read at plan time
from the emulated cluster and a real, backfilled Prometheus (vLLM's own series); a query with no
data says `unknown` and why; an expression answering several series for one target says what it
could not read, and the lever still plans."""

from __future__ import annotations

import asyncio

import pytest

from fbworld.kube import samples
from tests.support.harness import T0
from tests.support.levers import MODEL, OPS, SEC, say
from tests.support.prometheus import (
    PrometheusServer,
    Series,
    demand_series,
    ensure_services_installed,
    ttft_scenario,
)

START, MINUTES, STEP = T0 - 7200, 240, 15
BURN = {"us-east-1": 0.2, "us-east-2": 0.001, "us-east-3": 0.001}  # the lever tests' receivers' TTFT burn
RATES = {"us-east-1": (30.0, 30.0), "us-east-2": (20.0, 20.0)}  # req/s; us-east-3 serves nothing we see
PODS = ("vllm-0", "vllm-1")


def waiting(t: float) -> float:
    """vllm:num_requests_waiting per pod of llm-70b: 10 until 15 min before T0, rising to 30 at T0."""
    if t <= T0 - 900:
        return 10.0
    return 30.0 if t >= T0 else 10.0 + 20.0 * (t - (T0 - 900)) / 900


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    ensure_services_installed()
    sc = ttft_scenario(BURN, start_ts=START, minutes=MINUTES, step=STEP)
    sc.series += demand_series(RATES, T0, START, MINUTES, step=STEP)
    stamps = [START + i * STEP for i in range(MINUTES * 60 // STEP + 1)]
    for pod in PODS:
        labels = {"cell": "us-east-3", "pod": pod, "model_name": "llm-70b", "engine": "0"}
        sc.series.append(Series("vllm:num_requests_waiting", "gauge", labels, [(t, waiting(t)) for t in stamps]))
    prom = PrometheusServer(tmp_path_factory.mktemp("prom-price"), sc)
    asyncio.run(prom.start())
    yield prom
    asyncio.run(prom.stop())


@pytest.fixture
def app_settings(prometheus) -> dict:
    return {"prometheus_url": prometheus.url}


def price_of(out: str) -> list[str]:
    """The reply's price lines (after `Price (read now):`, up to the next line that is not a bullet)."""
    lines = out.splitlines()
    assert "Price (read now):" in lines, out
    rest = lines[lines.index("Price (read now):") + 1 :]
    return [ln for ln in rest[: next((k for k, ln in enumerate(rest) if not ln.startswith("• ")), len(rest))]]


# --------------------------------------------------------------------------- route-weight


async def test_route_weight_names_the_rate_moved_and_each_receivers_load_after_the_step(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, "lever route-weight edge/chat-global backend=cell-us-east-1 --dry-run", OPS, inc.channel_id)
    assert "(dry run)" in out and "cell-us-east-1 weight 50→25" in out, out
    price = price_of(out)
    # Weights 50/100 → 25/75: its share goes from 50% to 33.3%, so a third of its 30 req/s moves.
    assert any(
        ln.startswith("• cell-us-east-1's share of route edge/chat-global rule 0: 16.7 % of route traffic")
        and "50.0% → 33.3%" in ln
        for ln in price
    ), price
    assert any(ln.startswith("• traffic moved off cell-us-east-1: 10 req/s") for ln in price), price
    assert (
        "• receiver cell-us-east-2 (us-east-2): 20 → 30 req/s after the step "
        "(its cell's vLLM finished requests, all routes); TTFT burn 1h 0.10x" in price
    ), price
    assert "Nothing was changed." in out
    # Pulled for real, the fleet route waits for approval: the reply names the same price first.
    asked = await say(app, "lever route-weight edge/chat-global backend=cell-us-east-1", OPS, inc.channel_id)
    assert "needs approval" in asked and "nothing has changed yet" in asked, asked
    assert any(ln.startswith("• traffic moved off cell-us-east-1: 10 req/s") for ln in price_of(asked)), asked


async def test_route_weight_with_no_request_series_for_the_drained_cell_says_unknown(app, cells):
    cells.east3.put(samples.http_route("edge", "chat-local", {"cell-us-east-2": 50, "cell-us-east-3": 50}))
    inc = await app.declare(roles={"ops": OPS})
    cmd = "lever route-weight edge/chat-local --cell us-east-3 backend=cell-us-east-3 --dry-run"
    out = await say(app, cmd, OPS, inc.channel_id)
    assert "(dry run)" in out, out
    price = price_of(out)
    assert any("50.0% → 33.3%" in ln for ln in price), price  # the weights are still read
    assert "• traffic moved off cell-us-east-3: unknown (no data (the query matches no series))" in price, price
    assert any(
        ln.startswith(
            "• receiver cell-us-east-2 (us-east-2): 20 req/s now (its cell's vLLM finished requests, all routes), "
            "after the step unknown"
        )
        for ln in price
    ), price


async def test_route_weight_stepping_back_up_names_the_rate_moved_onto_the_backend(app, cells, clock):
    cells.east3.put(samples.http_route("edge", "chat-local", {"cell-us-east-2": 50, "cell-us-east-3": 50}))
    inc = await app.declare(roles={"ops": OPS})
    down = await say(
        app, "lever route-weight edge/chat-local --cell us-east-3 backend=cell-us-east-3", OPS, inc.channel_id
    )
    assert "applied and verified" in down, down
    clock.advance(301)  # past the dwell
    cmd = "lever route-weight edge/chat-local --cell us-east-3 backend=cell-us-east-3 weight=50 --dry-run"
    out = await say(app, cmd, OPS, inc.channel_id)
    assert "cell-us-east-3 weight 25→50" in out, out
    price = price_of(out)
    # Weights 50+25 → 50+50: cell-us-east-2 keeps 75/100 of its share, so a quarter of its 20 req/s comes back.
    assert any(ln.startswith("• traffic moved onto cell-us-east-3: 5 req/s") for ln in price), price
    assert any(ln.startswith("• receiver cell-us-east-3 (us-east-3): request rate unknown (no data") for ln in price), (
        price
    )


@pytest.mark.parametrize(
    "policy_overrides",
    [{"price": {"route-weight": {"rate_query": 'rate(vllm:request_success_total{cell="$cell"}[5m])'}}}],
)
async def test_route_weight_rate_query_answering_several_series_is_not_summed_for_you(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, "lever route-weight edge/chat-global backend=cell-us-east-1 --dry-run", OPS, inc.channel_id)
    assert "(dry run)" in out and "cell-us-east-1 weight 50→25" in out, out  # the lever still plans
    price = price_of(out)
    # Two pods x three finished reasons: six series for one cell.
    assert (
        "• traffic moved off cell-us-east-1: unknown (the query answers 6 series, not one figure: "
        "can't tell which is meant)" in price
    ), price


# --------------------------------------------------------------------------- keda-pause


async def test_keda_pause_names_the_replicas_frozen_and_the_demand_trend(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, "lever keda-pause serve-chat/llm-70b --dry-run", OPS, inc.channel_id)
    price = price_of(out)
    assert "• Deployment serve-chat/llm-70b frozen at: 6 replicas (its /scale now)" in price, price
    # The ScaledObject's own trigger, sum(vllm:num_requests_waiting{model_name="llm-70b"}): 20 → 60 in 15 min.
    assert any(
        ln.startswith('• demand (trigger 0: sum(vllm:num_requests_waiting{model_name="llm-70b"})): 60 now')
        and "15 min ago 20: rising" in ln
        for ln in price
    ), price
    pinned = await say(app, "lever keda-pause serve-chat/llm-70b replicas=4 --dry-run", OPS, inc.channel_id)
    assert "• Deployment serve-chat/llm-70b pinned at: 4 replicas (6 now (/scale))" in price_of(pinned), pinned


async def test_keda_pause_with_no_demand_series_and_no_scale_target_says_unknown(app, cells):
    so = samples.scaled_object(name="llm-8b", target="llm-8b")  # a Rollout llm-8b that is not there
    cells.east3.put(so)
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, "lever keda-pause serve-chat/llm-8b --dry-run", OPS, inc.channel_id)
    assert "(dry run)" in out, out
    price = price_of(out)
    assert any(
        ln.startswith("• Rollout serve-chat/llm-8b frozen at: unknown (its /scale could not be read:") for ln in price
    ), price
    # The trigger's serverAddress (the sample's in-cluster name) can't be reached from here: Firebreak's answers.
    assert any(
        ln.startswith(
            '• demand (trigger 0: sum(vllm:num_requests_waiting{model_name="llm-8b"})): unknown '
            "(no data (the query matches no series); Firebreak's Prometheus; the trigger's "
            "http://prometheus.monitoring:9090 did not answer"
        )
        for ln in price
    ), price


async def test_keda_pause_trigger_answering_one_series_per_pod_says_it_cannot_tell(app, cells):
    so = samples.scaled_object(name="llm-70b-raw", target="llm-70b")
    so["spec"]["scaleTargetRef"] = {"name": "llm-70b"}
    so["spec"]["triggers"][0]["metadata"]["query"] = 'vllm:num_requests_waiting{model_name="llm-70b"}'
    cells.east3.put(so)
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, "lever keda-pause serve-chat/llm-70b-raw --dry-run", OPS, inc.channel_id)
    assert "(dry run): plan: paused at its current replicas" in out, out
    price = price_of(out)
    assert any("unknown (the query answers 2 series, not one figure" in ln for ln in price), price
    assert "• Deployment serve-chat/llm-70b frozen at: 6 replicas (its /scale now)" in price, price


# --------------------------------------------------------------------------- killswitch and sandbox-quarantine
# No standard exporter publishes a tool gateway's calls or a sandbox's sessions, so the shipped
# policy has no expression and the price says `unknown`. The operator's expression is exercised with
# PromQL constants (no series is invented): what is tested is the substitution, the one-figure rule and
# the reply, not a data source.

KILL = "lever killswitch toolgw/toolgw-flags tenant=acme level=read --dry-run"
SBX = "lever sandbox-quarantine sbx-tenant-acme/sess-7f3a9c-0 --dry-run"


async def test_killswitch_and_sandbox_prices_are_unknown_until_policy_names_a_series(app, cells):
    inc = await app.declare(roles={"security": SEC})
    out = await say(app, KILL, SEC, inc.channel_id)
    assert "(dry run)" in out, out
    price = price_of(out)
    assert any(
        ln.startswith("• acme's tool calls now refused (write): unknown (policy price.killswitch.calls_query")
        for ln in price
    ), price
    out = await say(app, SBX, SEC, inc.channel_id)
    assert any(
        ln.startswith(
            "• open sessions of sandbox sbx-tenant-acme/sess-7f3a9c-0, cut off: unknown "
            "(policy price.sandbox-quarantine.sessions_query is not set"
        )
        for ln in price_of(out)
    ), out


@pytest.mark.parametrize(
    "policy_overrides",
    [
        {
            "price": {
                # One series, labelled with what was substituted; it answers only when $tenant and $refused
                # arrived as acme and write (acme is at `write`: only write is newly refused).
                "killswitch": {
                    "calls_query": 'label_replace(vector(12), "t", "$tenant/$refused", "", "") '
                    'and on(t) label_replace(vector(1), "t", "acme/write", "", "")'
                },
                "sandbox-quarantine": {
                    "sessions_query": 'label_replace(vector(3), "p", "$namespace/$pod", "", "") '
                    'or label_replace(vector(4), "p", "other", "", "")'
                },
            }
        }
    ],
)
async def test_policy_expressions_give_the_figure_or_say_what_could_not_be_read(app, cells):
    inc = await app.declare(roles={"security": SEC})
    out = await say(app, KILL, SEC, inc.channel_id)
    price = price_of(out)
    assert any(
        ln.startswith("• acme's tool calls now refused (write): 12 calls/min (policy price.killswitch") for ln in price
    ), price
    out = await say(app, SBX, SEC, inc.channel_id)
    assert "(dry run)" in out, out  # still plans
    assert any("cut off: unknown (the query answers 2 series, not one figure" in ln for ln in price_of(out)), out


# --------------------------------------------------------------------------- rollout-abort


async def test_rollout_abort_names_the_canarys_share_and_the_revision_restored(app, cells):
    ro = cells.east3.get("rollout", "llm-70b", "serve-chat")
    for rs in samples.rollout_replica_sets(ro):
        cells.east3.put(rs)
    inc = await app.declare(roles={"model": MODEL})
    out = await say(app, "lever rollout-abort serve-chat/llm-70b --dry-run", MODEL, inc.channel_id)
    price = price_of(out)
    assert "• traffic on the new revision (7b8c9d6f4), back to stable: 20 % (Argo's status.canary.weights)" in price
    assert (
        "• revision restored (the stable ReplicaSet): revision 1 (ReplicaSet llm-70b-6d9f7c8b5, "
        "pod-template-hash 6d9f7c8b5)" in price
    ), price


async def test_rollout_abort_basic_canary_reads_its_setweight_and_no_replicaset_is_unknown(app, cells):
    cells.east3.put(samples.rollout_canary())  # basic canary at step 1 (setWeight 25), no ReplicaSets seeded
    inc = await app.declare(roles={"model": MODEL})
    out = await say(app, "lever rollout-abort serve-chat/llm-13b --dry-run", MODEL, inc.channel_id)
    assert "(dry run)" in out, out
    price = price_of(out)
    assert any(ln.endswith("back to stable: 25 % (setWeight of step 1 or before (desired weight))") for ln in price)
    assert any("revision restored (the stable ReplicaSet): unknown (pod-template-hash" in ln for ln in price), price
    assert any("no ReplicaSets of it labelled rollouts-pod-template-hash=" in ln for ln in price), price


async def test_rollout_abort_with_two_stable_replicasets_says_it_cannot_tell(app, cells):
    ro = cells.east3.get("rollout", "llm-70b", "serve-chat")
    stable = samples.rollout_replica_sets(ro)[0]
    cells.east3.put(stable)
    twin = samples.rollout_replica_sets(ro)[0]
    twin["metadata"]["name"] += "-twin"
    cells.east3.put(twin)
    inc = await app.declare(roles={"model": MODEL})
    out = await say(app, "lever rollout-abort serve-chat/llm-70b --dry-run", MODEL, inc.channel_id)
    assert "(dry run): plan: abort=true" in out, out
    assert any("unknown (pod-template-hash 6d9f7c8b5; 2 ReplicaSets of it" in ln for ln in price_of(out)), out


# --------------------------------------------------------------------------- remediation-pause


async def test_remediation_pause_names_what_it_holds_back(app, cells):
    nhc = samples.node_health_check()
    started = "2026-12-01T10:00:00Z"
    ref = {"apiVersion": "self-node-remediation.medik8s.io/v1alpha1", "kind": "SelfNodeRemediation", "name": "x"}
    nhc["status"].update(
        healthyNodes=7,
        unhealthyNodes=[
            {"name": "gpu-a3-0001", "remediations": [{"resource": {**ref, "name": "gpu-a3-0001"}, "started": started}]},
            {"name": "gpu-a3-0002", "remediations": [{"resource": {**ref, "name": "gpu-a3-0002"}, "started": started}]},
            {"name": "gpu-a3-0003"},
        ],
    )
    cells.east3.put(nhc)
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, "lever remediation-pause nhc-gpu --dry-run", OPS, inc.channel_id)
    price = price_of(out)
    assert (
        "• nodes NodeHealthCheck nhc-gpu watches, none remediated automatically while paused: 10 nodes (7 healthy now)"
        in price
    ), price
    going = "• nodes under remediation (not stopped; one that heals stays fenced until the pause ends): "
    assert going + "2 nodes (gpu-a3-0001, gpu-a3-0002)" in price, price
    assert "• unhealthy nodes with no remediation started yet, held back: 1 node (gpu-a3-0003)" in price, price


async def test_remediation_pause_of_an_nhc_with_no_spec_or_status_says_unknown(app, cells):
    bare = {"apiVersion": "remediation.medik8s.io/v1alpha1", "kind": "NodeHealthCheck", "metadata": {"name": "bare"}}
    cells.east3.put(bare, validate=False)
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, "lever remediation-pause bare --dry-run", OPS, inc.channel_id)
    assert "(dry run)" in out, out  # still plans
    price = price_of(out)
    assert any(
        ln.startswith("• nodes under remediation (not stopped; one that heals stays fenced until the pause ends): ")
        and "unknown (the NodeHealthCheck has no status" in ln
        for ln in price
    )


async def test_remediation_pause_with_unhealthy_nodes_not_a_list_says_what_it_could_not_read(app, cells):
    nhc = samples.node_health_check(name="odd")
    nhc["status"]["unhealthyNodes"] = "gpu-a3-0001"
    cells.east3.put(nhc, validate=False)
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, "lever remediation-pause odd --dry-run", OPS, inc.channel_id)
    assert "(dry run)" in out, out
    price = price_of(out)
    assert (
        "• nodes NodeHealthCheck odd watches, none remediated automatically while paused: 10 nodes (10 healthy now)"
        in price
    )
    assert any("pause ends): unknown (status.unhealthyNodes is not a list of nodes" in ln for ln in price)
