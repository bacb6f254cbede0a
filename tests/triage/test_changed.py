"""`/incident changed [--hours H]` against fake cells (world/fbworld/kube) and a real Prometheus: a
canary rollout in flight, a driver-skewed node, Warning events (paginated), Firebreak's own lever,
and a demand shift (us-east-1 drained, us-east-3 took its traffic) called out as a capacity shift."""

from __future__ import annotations

import json

import pytest

from fbworld.kube import samples
from tests.support.harness import T0
from tests.support.prometheus import PrometheusServer, demand_series, ensure_services_installed
from tests.support.signals import policy_dir
from tests.support.triage import (
    DEGRADED,
    DRAINED,
    HEALTHY,
    SHIPPED,
    block_texts,
    event,
    gpu_nodes,
    posted,
    rfc3339,
    say,
    serve,
)

OPS = "U0OPS"
OLD_IMAGE, NEW_IMAGE = samples.GPU_IMAGE, "registry.corp/ml/vllm-serve:0.10.1"
# Requests per second (before, after): us-east-1 drained an hour before T0 and us-east-3 took it.
DEMAND = {DEGRADED: (10.0, 16.0), HEALTHY: (6.0, 0.0), DRAINED: (5.0, 5.0)}


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    ensure_services_installed()
    series = demand_series(DEMAND, change_ts=T0 - 3600, start_ts=T0 - 8 * 3600, minutes=9 * 60)
    yield from serve(PrometheusServer(tmp_path_factory.mktemp("prom"), series))


@pytest.fixture
def app_settings(prometheus, tmp_path) -> dict:
    # us-east-2 has no kube context: oncall.yaml naming it makes it a cell `declare --cell` takes.
    return {"prometheus_url": prometheus.url, "firebreak_policy_dir": str(policy_dir(tmp_path, {DRAINED: None}))}


@pytest.fixture(autouse=True)
def history(cells) -> None:
    """us-east-3: llm-70b's canary (revision 2, a new image, created two hours before T0) paused at
    step 2 of 4, a settled rollout beside it, ten GPU nodes with one on another driver, Warning
    events in and out of the window. us-east-1: ten GPU nodes, nothing else."""
    c = cells.degraded
    ro = samples.rollout()
    ro["spec"]["template"]["spec"]["containers"][0]["image"] = NEW_IMAGE
    ro = c.put(ro)
    stable, canary = samples.rollout_replica_sets(ro)
    stable["metadata"]["creationTimestamp"] = rfc3339(T0 - 3 * 86400)
    stable["spec"]["template"]["spec"]["containers"][0]["image"] = OLD_IMAGE
    canary["metadata"]["creationTimestamp"] = rfc3339(T0 - 7200)
    c.put(stable)
    c.put(canary)

    settled = samples.rollout(name="llm-8b")
    settled["status"].update(phase="Healthy", currentPodHash="5f5f5f5f5", stableRS="5f5f5f5f5", currentStepIndex=4)
    settled = c.put(settled)
    (rs, _) = samples.rollout_replica_sets(settled)
    rs["metadata"]["creationTimestamp"] = rfc3339(T0 - 5 * 86400)
    c.put(rs)

    # Rolled back twenty minutes before T0: Argo scaled an old ReplicaSet back up (revision 3 now).
    back = samples.rollout(name="llm-13b")
    moved = rfc3339(T0 - 1200)
    back["status"].update(
        phase="Healthy",
        currentPodHash="5e5e5e5e5",
        stableRS="5e5e5e5e5",
        currentStepIndex=4,
        conditions=[
            {
                "type": "Progressing",
                "status": "True",
                "reason": "NewReplicaSetAvailable",
                "message": "Rollout has completed updating all pods",
                "lastUpdateTime": moved,
                "lastTransitionTime": moved,
            }
        ],
    )
    back = c.put(back)
    rs = samples.replica_set(back, "5e5e5e5e5", replicas=8, revision="3")
    rs["metadata"]["creationTimestamp"] = rfc3339(T0 - 6 * 86400)
    c.put(rs)

    gpu_nodes(c, DEGRADED, drivers={3: "560.35.03"})
    gpu_nodes(cells.healthy, HEALTHY)

    c.put(event("vllm-0.backoff", "BackOff", T0 - 600, count=12, message="Back-off restarting failed container vllm"))
    c.put(
        event("vllm-1.sched", "FailedScheduling", T0 - 2400, obj="vllm-9", count=3, message="0/10 nodes are available")
    )
    c.put(event("old.news", "OldNews", T0 - 10 * 3600))
    c.put(event("vllm-0.pulled", "Pulled", T0 - 300, type_="Normal"))
    # More than a page (500) of one reason: list_all must follow `continue`.
    for i in range(520):
        c.put(event(f"probe-{i:03d}", "Unhealthy", T0 - 900, obj=f"vllm-{i % 4}", message="Readiness probe failed"))


def sections(msg: dict) -> list[str]:
    return block_texts(msg)


async def changed(app, text: str = "changed", cells=(DEGRADED, DRAINED), roles=None):
    inc = await app.declare(cells=cells, roles=roles)
    out = await say(app, text, "U_ANYONE", inc.channel_id)
    return inc, out


async def test_what_changed_names_each_stream_and_the_capacity_shift(app, cells):
    inc = await app.declare(cells=(DEGRADED, DRAINED), roles={"ops": OPS})
    pulled = await say(app, "lever kueue-hold research-h100 --cell us-east-3", OPS, inc.channel_id)
    assert "REQ-1 kueue-hold research-h100 (us-east-3)" in pulled, pulled
    dry = await say(app, "lever kueue-hold research-h100 --cell us-east-3 --dry-run", OPS, inc.channel_id)
    assert "REQ-2" in dry, dry

    out = await say(app, "changed", "U_ANYONE", inc.channel_id)
    assert out == (
        f"What changed in the last 6h for {inc.id} posted in the channel "
        "(1 capacity shift called out; 3 streams couldn't be read)."
    ), out
    msg = posted(app, inc.channel_id, f"What changed in the last 6h for {inc.id}")
    head, shift, *rest = sections(msg)
    assert head == f"*What changed in the last 6h* for {inc.id}, as of 03:10 UTC"
    assert shift == (
        ":warning: *Capacity shift, not a regression*: us-east-3's demand rose (+60%: 10.0 req/s → 16.0 req/s) "
        "while us-east-1 drained (-100%: 6.00 req/s → 0 req/s) in the last 6h. Check the receiving cells' "
        "headroom and add capacity or shift traffic back in steps; a rollback would not fix this."
    )
    east3, east2 = "\n".join(rest[:-1]), rest[-1]
    lines = east3.split("\n")
    assert lines[0] == "*us-east-3*"
    assert lines[1] == "• *Rollouts (weights, images)*:"
    assert lines[3] == (
        "    ◦ serve-chat/llm-70b revision 2 created 01:10 UTC, image "
        f"{NEW_IMAGE} (revision 1: {OLD_IMAGE}), step 2/4 (pause), canary weight 20%, Paused"
    )
    assert lines[2] == (
        f"    ◦ serve-chat/llm-13b revision 3, image {OLD_IMAGE}, all 4 steps done, Healthy, "
        "NewReplicaSetAvailable at 02:50 UTC"
    )
    assert "llm-8b" not in east3  # settled long ago
    assert "• *Node layer*:" in lines
    assert "    ◦ *driver skew*: 550.127.05 on 9 nodes; 560.35.03 on 1 node (gpu-us-east-3-0003)" in lines
    assert "    ◦ node image gpu-2026-11-02 on all 10 GPU nodes" in lines
    # One line per object and reason (tests/triage/test_changed_events.py), at most changed.max_items (5).
    events = lines[lines.index("• *Warning events*:") + 1 :]
    assert [e.split(",")[0] for e in events[:4]] == [
        f"    ◦ Unhealthy ×130 on Pod serve-chat/vllm-{i}" for i in range(4)
    ]
    assert events[0].endswith("first 02:54, last 02:55 UTC: Readiness probe failed"), events[0]
    assert events[4] == (
        "    ◦ BackOff ×12 on Pod serve-chat/vllm-0, first 02:59, last 03:00 UTC: "
        "Back-off restarting failed container vllm"
    )
    assert events[5] == "    ◦ … and 1 more: FailedScheduling ×3 on 1 object"
    assert "OldNews" not in east3 and "Pulled" not in east3
    assert f"• *Firebreak levers*: REQ-1 kueue-hold research-h100 ({inc.id}): done 03:10 UTC" in lines
    assert "REQ-2" not in east3  # a dry run changed nothing
    assert "• *Demand*: 16.0 req/s now vs 10.0 req/s 6h ago (+60%)" in lines

    assert east2.split("\n") == [
        "*us-east-2*",
        "• *Rollouts (weights, images)*: can't be read: no kube context `us-east-2` in KUBECONFIG "
        "(contexts: us-east-3, us-east-1)",
        "• *Node layer*: can't be read: no kube context `us-east-2` in KUBECONFIG (contexts: us-east-3, us-east-1)",
        "• *Warning events*: can't be read: no kube context `us-east-2` in KUBECONFIG (contexts: us-east-3, us-east-1)",
        "• *Firebreak levers*: no lever pulled or undone in the last 6h",
        "• *Demand*: 5.00 req/s now vs 5.00 req/s 6h ago (+0%)",
    ]


async def test_levers_count_by_their_latest_move_in_every_open_incident_and_no_resolved_one(app, cells, clock):
    """Read from the levers' index by latest move: a request pulled before the window but undone in
    it counts (its undo moved it), another open incident's counts, a resolved incident's does not."""
    cells.degraded.put(samples.cluster_queue(name="batch-a100"))
    other = await app.declare(cells=(DEGRADED,), roles={"ops": OPS})
    pulled = await say(app, "lever kueue-hold research-h100 --cell us-east-3", OPS, other.channel_id)
    assert "REQ-1" in pulled, pulled
    gone = await app.declare(cells=(DEGRADED,), roles={"ops": OPS})
    assert "REQ-2" in await say(app, "lever kueue-hold batch-a100 --cell us-east-3", OPS, gone.channel_id)
    clock.advance(7 * 3600)  # both pulls are older than the 6h window now
    assert "REQ-1" in await say(app, "undo REQ-1", OPS, other.channel_id)
    out = await say(app, "resolved", "U_IC", gone.channel_id)
    assert "resolved" in out.lower(), out

    inc, _ = await changed(app, cells=(DEGRADED,))
    text = "\n".join(sections(posted(app, inc.channel_id, "What changed")))
    assert f"• *Firebreak levers*: REQ-1 kueue-hold research-h100 ({other.id}): undone 10:10 UTC" in text, text
    assert "REQ-2" not in text


async def test_a_shorter_window_drops_what_is_older(app, cells):
    inc, out = await changed(app, "changed --hours 0.5", cells=(DEGRADED,))
    assert out == f"What changed in the last 0.5h for {inc.id} posted in the channel.", out
    text = "\n".join(sections(posted(app, inc.channel_id, "What changed in the last 0.5h")))
    # The canary started two hours ago but is still in flight: it stays, without "created".
    assert "serve-chat/llm-70b revision 2, image" in text
    assert "FailedScheduling" not in text and "BackOff ×12" in text
    # Half an hour ago demand had already shifted: no rise, no callout.
    assert "Capacity shift" not in text
    assert "• *Demand*: 16.0 req/s now vs 16.0 req/s 0.5h ago (+0%)" in text


async def test_a_stream_that_cannot_be_read_says_so_and_the_others_still_show(app, cells):
    cells.degraded.fail_next("GET", r"^/api/v1/events$", 403, times=5, message="events is forbidden")
    inc, out = await changed(app, cells=(DEGRADED,))
    assert "(1 capacity shift called out; 1 stream couldn't be read)" in out, out
    text = "\n".join(sections(posted(app, inc.channel_id, "What changed")))
    assert "• *Warning events*: can't be read: 403 Forbidden: events is forbidden" in text, text
    assert "serve-chat/llm-70b revision 2" in text and "*driver skew*" in text


@pytest.mark.parametrize("app_settings", [{"firebreak_policy_dir": str(SHIPPED)}], ids=["no-prometheus"])
async def test_without_prometheus_demand_says_so(app, cells):
    inc, out = await changed(app, cells=(DEGRADED,))
    assert "(1 stream couldn't be read)" in out, out
    text = "\n".join(sections(posted(app, inc.channel_id, "What changed")))
    assert "• *Demand*: can't be read: PROMETHEUS_URL is not set" in text
    assert "Capacity shift" not in text


@pytest.mark.parametrize(
    ("hours", "why"),
    [
        ("0", "`--hours 0` is out of range: look back more than 0 and at most 72 hours (default 6)."),
        ("100", "`--hours 100` is out of range: look back more than 0 and at most 72 hours (default 6)."),
        ("nan", "`--hours nan` is out of range: look back more than 0 and at most 72 hours (default 6)."),
        ("six", "`--hours six` is not a number of hours: give one, e.g. `--hours 2` (at most 72; default 6)."),
    ],
)
async def test_a_bad_window_gets_a_usage_line(app, hours, why):
    inc = await app.declare(cells=(DEGRADED,))
    await app.command(f"changed --hours {hours}", user="U_ANYONE", channel=inc.channel_id)
    ack = json.loads(app.last_ack)  # refused in the acknowledgement itself, before any work
    assert ack == {"text": f"{why}\nUsage: `/incident changed [--hours H]`", "response_type": "ephemeral"}, ack


async def test_a_quiet_cell_reads_as_quiet_not_as_failed(app, cells):
    """us-east-1: no rollouts, no events, one driver; its demand drained (it is the cell that did)."""
    inc, _ = await changed(app, cells=(HEALTHY,))
    text = "\n".join(sections(posted(app, inc.channel_id, "What changed")))
    assert "• *Rollouts (weights, images)*: no new revision, none in flight (0 rollouts)" in text
    assert "• *Warning events*: no Warning events in the last 6h (the API server keeps events for its " in text
    assert "• *Node layer*: driver 550.127.05 on all 10 GPU nodes" not in text  # two lines, so a list
    assert "    ◦ driver 550.127.05 on all 10 GPU nodes" in text
    assert "• *Demand*: 0 req/s now vs 6.00 req/s 6h ago (-100%)" in text


async def test_the_node_layer_says_who_took_gpu_nodes_out(app, cells):
    """A NodeHealthCheck's Self Node Remediation tainted two nodes, the node lifecycle controller marked
    one not-ready: the node layer counts them all and names who (levers/outofservice.py)."""
    inc = await app.declare(cells=(DEGRADED,), roles={"ops": OPS})
    for i in (1, 2):
        node = cells.degraded.get("node", f"gpu-{DEGRADED}-000{i}")
        node["spec"]["taints"].append({"key": "remediation.medik8s.io/self-node-remediation", "effect": "NoSchedule"})
        cells.degraded.put(node)
    node = cells.degraded.get("node", f"gpu-{DEGRADED}-0005")
    node["spec"]["taints"].append({"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"})
    cells.degraded.put(node)
    await say(app, "changed", "U_ANYONE", inc.channel_id)
    text = "\n".join(sections(posted(app, inc.channel_id, f"What changed in the last 6h for {inc.id}")))
    assert (
        f"    ◦ 3 of 10 GPU nodes can't take work: NodeHealthCheck (medik8s) 2 (gpu-{DEGRADED}-0001, "
        f"gpu-{DEGRADED}-0002); node lifecycle (kube-controller-manager) 1 (gpu-{DEGRADED}-0005)" in text
    ), text
