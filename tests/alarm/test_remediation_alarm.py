"""The remediation alarm (docs/operating.md, "The remediation alarm"): GPU nodes in a cell
taken out of service for remediation or as unhealthy faster than the policy's rate (a count an hour,
or a share of the cell's GPU nodes), or one node twice within 90 minutes, are posted once per burst in
the cell's open incident (or a SEV3 incident opens, IC the on-call), with `remediation-pause` and its
plan. Upgrades' cordons, the autoscalers' taints, pressure taints and not-ready nodes are no
remediation. Driven through the real app: the Kubernetes emulator (kubectl against it), Redis, the
Slack emulator, the scheduler's job."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bot.signals.remediation import timeline, watch
from fbworld.kube import samples
from tests.support.harness import audit_entries, start_app
from tests.support.levers import channel_texts, kubectl, start_hooks

POLL = 30.0
CELL = "us-east-3"
ONCALL = "U0ONCALL3"
SNR_TAINT = "remediation.medik8s.io/self-node-remediation:NoSchedule"


def node(i: int) -> str:
    return f"gpu-a3-{i:04d}"


@pytest.fixture
def app_settings(tmp_path: Path) -> dict:
    """The packaged policies, with an on-call for us-east-3 (policies/oncall.yaml)."""
    d = tmp_path / "policies"
    d.mkdir(exist_ok=True)
    (d / "oncall.yaml").write_text(f"default: null\ncells:\n  {CELL}: {ONCALL}\n")
    return {}


@pytest.fixture
async def fleet(cells):
    """50 GPU nodes in us-east-3 (the seeded cell has 10)."""
    for i in range(50):
        cells.east3.put(samples.gpu_node(node(i), CELL))
    return cells


@pytest.fixture
def policy_overrides() -> dict:
    """The lever tests' policy, with the share rule at half a cell: these tests' 50-node cell alarms
    by the count (more than 20), as before the share rule; the share tests set their own."""
    return {"rollout_verify_seconds": 2, "api_timeout_seconds": 2, "remediation_alarm": {"per_hour_fraction": 0.5}}


async def remediate(cells, *names: str, cell: str = CELL) -> None:
    """Self Node Remediation (started by a NodeHealthCheck) fences each node; it writes as its binary's
    name, `manager`."""
    for name in names:
        await kubectl(cells.kubeconfig, cell, "taint", "nodes", name, SNR_TAINT, "--field-manager=manager")


async def heal(cells, *names: str, cell: str = CELL) -> None:
    for name in names:
        await kubectl(cells.kubeconfig, cell, "taint", "nodes", name, SNR_TAINT + "-", "--field-manager=manager")


async def poll(app) -> None:
    """The next watch: the clock moves a poll on and the scheduler runs what is due."""
    app.clock.advance(POLL)
    await app.tick()


def alarms(app, channel: str) -> list[str]:
    return [t for t in channel_texts(app, channel) if "*Remediation alarm, " in t]


async def alarm_entries(app) -> list[dict]:
    return [e for e in await audit_entries(app) if e["action"] == "command.remediation_alarm"]


async def test_21_remediations_in_an_hour_alarm_once_in_the_open_incident_20_dont(app, fleet):
    inc = await app.declare(cells=(CELL,))
    await start_hooks(app)  # the first listing: nothing out
    await remediate(fleet, *[node(i) for i in range(20)])
    await poll(app)
    assert alarms(app, inc.channel_id) == []  # 20 in an hour: not more than the policy's 20
    await remediate(fleet, node(20))
    await poll(app)
    (text,) = alarms(app, inc.channel_id)
    assert (
        "21 of 50 (42%) GPU nodes were taken out of service for remediation or as unhealthy in the last hour "
        "(policy: more than 20 an hour, or more than 50% of the cell's GPU nodes, alarms)" in text
    ), text
    assert "Out now, by who: NodeHealthCheck (medik8s) 21 (gpu-a3-0000" in text, text
    # remediation-pause offered with the exact line and the lever's own plan (the seeded NHC has another pause).
    assert "`/incident lever remediation-pause nhc-gpu --cell us-east-3`" in text, text
    assert f"Plan: spec.pauseRequests +firebreak:{inc.id} (with cluster-upgrade-operator)" in text, text
    # One alarm per burst: further cordons in the same hour are counted, not posted.
    await remediate(fleet, node(21), node(22))
    await poll(app)
    await poll(app)
    assert len(alarms(app, inc.channel_id)) == 1
    (entry,) = await alarm_entries(app)
    assert entry["incident"] == inc.id and entry["detail"]["result"] == "ok", entry
    assert entry["detail"]["count"] == 21 and entry["detail"]["reason"] == "rate", entry
    assert entry["detail"]["offered"] == ["nhc-gpu"], entry
    # Nothing was written to the NodeHealthCheck: the plan is offered, not pulled.
    assert fleet.east3.get("nodehealthcheck", "nhc-gpu")["spec"]["pauseRequests"] == ["cluster-upgrade-operator"]

    # A quiet hour, then a new burst of 21 other nodes: it alarms again.
    app.clock.advance(3700)
    await app.tick()
    await remediate(fleet, *[node(i) for i in range(23, 44)])
    await poll(app)
    assert len(alarms(app, inc.channel_id)) == 2
    assert len(await alarm_entries(app)) == 2


async def test_the_same_node_out_twice_within_90_minutes_alarms(app, fleet):
    inc = await app.declare(cells=(CELL,))
    await start_hooks(app)
    await remediate(fleet, node(3))
    await poll(app)
    await heal(fleet, node(3))
    await poll(app)
    app.clock.advance(100 * 60)  # back in service for 100 minutes: a second cordon now is no repeat
    await remediate(fleet, node(3))
    await poll(app)
    assert alarms(app, inc.channel_id) == []
    await heal(fleet, node(3))
    await poll(app)
    app.clock.advance(40 * 60)  # 40 minutes later, out again: within 90
    await remediate(fleet, node(3))
    await poll(app)
    (text,) = alarms(app, inc.channel_id)
    assert "gpu-a3-0003 went out of service again within 90 minutes" in text, text
    (entry,) = await alarm_entries(app)
    assert entry["detail"]["reason"] == "repeat" and entry["detail"]["repeats"] == ["gpu-a3-0003"], entry


async def test_with_no_open_incident_a_sev3_incident_opens_with_the_oncall_as_ic(app, fleet):
    await start_hooks(app)
    await remediate(fleet, *[node(i) for i in range(21)])
    await poll(app)
    (entry,) = await alarm_entries(app)
    assert entry["detail"]["opened"] is True, entry
    inc = await app.incident(entry["incident"])
    assert inc.sev == 3 and inc.holder("ic") == ONCALL and inc.cells == [CELL], inc
    (text,) = alarms(app, inc.channel_id)
    assert f"Opened by Firebreak for the remediation alarm (SEV3, IC <@{ONCALL}>)" in text, text
    # The next burst in the same cell goes to that incident, not a new one.
    app.clock.advance(3700)
    await app.tick()
    await remediate(fleet, *[node(i) for i in range(21, 42)])
    await poll(app)
    assert [e["incident"] for e in await alarm_entries(app)] == [inc.id, inc.id]


async def test_a_cell_with_no_nodehealthcheck_says_so(app, cells):
    cells.east1.delete("nodehealthcheck", "nhc-gpu")
    for i in range(30):
        cells.east1.put(samples.gpu_node(f"gpu-e1-{i:04d}", "us-east-1"))
    inc = await app.declare(cells=("us-east-1",))
    await start_hooks(app)
    await remediate(cells, *[f"gpu-e1-{i:04d}" for i in range(21)], cell="us-east-1")
    await poll(app)
    (text,) = alarms(app, inc.channel_id)
    assert "us-east-1 has no NodeHealthCheck: nothing for `remediation-pause` to pause." in text, text
    assert "/incident lever remediation-pause" not in text, text


@pytest.mark.parametrize("policy_overrides", [{"remediation_alarm": {"per_hour": 4}}])
async def test_five_nodes_tainted_by_nodehealthcheck_count_by_anyone(app, cells):
    inc = await app.declare(cells=(CELL,))
    await start_hooks(app)
    await remediate(cells, *[node(i) for i in range(5)])
    await poll(app)
    (text,) = alarms(app, inc.channel_id)
    assert "5 of 10 (50%) GPU nodes were taken out of service for remediation or as unhealthy" in text, text
    assert "(policy: more than 4 an hour, or more than 25% of the cell's GPU nodes, alarms)" in text, text
    assert "Out now, by who: NodeHealthCheck (medik8s) 5 (gpu-a3-0000" in text, text


async def test_two_replicas_seeing_the_same_remediations_post_one_alarm(app, fleet, slack, redis_url, clock, tmp_path):
    other = await start_app(
        slack,
        redis_url,
        clock,
        kubeconfig=str(fleet.kubeconfig),
        firebreak_policy_dir=str(tmp_path / "policies"),
    )
    try:
        inc = await app.declare(cells=(CELL,))
        await asyncio.gather(start_hooks(app), start_hooks(other))
        await remediate(fleet, *[node(i) for i in range(25)])
        clock.advance(POLL)
        # Both replicas' schedulers tick, and both run the watch itself at once besides.
        await asyncio.gather(
            app.tick(),
            other.tick(),
            watch.watch_all(app.services),
            watch.watch_all(other.services),
        )
        await poll(app)
        await poll(other)
        assert len(alarms(app, inc.channel_id)) == 1
        assert len(await alarm_entries(app)) == 1
    finally:
        await other.stop()


async def test_a_post_slack_refused_is_posted_at_the_next_poll_once(app, fleet):
    inc = await app.declare(cells=(CELL,))
    await start_hooks(app)
    await remediate(fleet, *[node(i) for i in range(21)])
    app.slack.fail_next("chat.postMessage", "ratelimited_for_good")
    await poll(app)
    assert alarms(app, inc.channel_id) == []
    (failed,) = await alarm_entries(app)
    assert failed["detail"]["result"] == "error" and failed["detail"]["slack_error"] == "ratelimited_for_good", failed
    await poll(app)  # nothing new went out, but the alarm is still owed: at once, not after a lease
    assert len(alarms(app, inc.channel_id)) == 1
    await poll(app)  # posted already: not again
    assert len(alarms(app, inc.channel_id)) == 1
    assert [e["detail"]["result"] for e in await alarm_entries(app)] == ["error", "ok"]


async def test_one_cell_unreadable_leaves_the_others_watched(app, cells):
    """us-east-3 (listed first in the kubeconfig) answers 503 for its nodes; us-east-1 still alarms."""
    for i in range(30):
        cells.east1.put(samples.gpu_node(f"gpu-e1-{i:04d}", "us-east-1"))
    inc = await app.declare(cells=("us-east-1",))
    await start_hooks(app)
    await remediate(cells, *[f"gpu-e1-{i:04d}" for i in range(21)], cell="us-east-1")
    cells.east3.fail_next("GET", r"^/api/v1/nodes$", 503, times=10)
    await poll(app)
    assert len(alarms(app, inc.channel_id)) == 1
    assert any(r.status == 503 for r in cells.east3.requests)  # it was asked, and failed


# ------------------------------------------------------------------ what counts, and the rate relative to the cell

NOT_REMEDIATION = (
    "ToBeDeletedByClusterAutoscaler=1765100000:NoSchedule",  # cluster-autoscaler scaling the node down
    "karpenter.sh/disrupted:NoSchedule",  # Karpenter consolidating or expiring it
    "node.kubernetes.io/memory-pressure:NoSchedule",  # the node lifecycle controller's pressure taint
    "node.kubernetes.io/not-ready:NoExecute",  # a new node whose kubelet is not Ready yet
)


async def test_upgrades_autoscalers_pressure_and_not_ready_nodes_are_not_remediation(app, fleet):
    inc = await app.declare(cells=(CELL,))
    await start_hooks(app)
    await kubectl(fleet.kubeconfig, CELL, "cordon", *[node(i) for i in range(5)])  # an upgrade drains them
    for k, taint in enumerate(NOT_REMEDIATION):
        for i in range(5 + 5 * k, 10 + 5 * k):
            await kubectl(fleet.kubeconfig, CELL, "taint", "nodes", node(i), taint)
    await poll(app)
    assert alarms(app, inc.channel_id) == []  # 25 nodes out, none of them for remediation
    await remediate(fleet, *[node(i) for i in range(25, 46)])
    await poll(app)
    (text,) = alarms(app, inc.channel_id)
    assert "21 of 50 (42%) GPU nodes were taken out of service for remediation or as unhealthy" in text, text
    assert "Out now, by who: NodeHealthCheck (medik8s) 21 (gpu-a3-0025" in text, text
    assert "kubectl" not in text and "Karpenter" not in text and "autoscaler" not in text, text
    (entry,) = await alarm_entries(app)
    assert entry["detail"]["count"] == 21 and entry["detail"]["gpu_nodes"] == 50, entry


@pytest.mark.parametrize("policy_overrides", [{"remediation_alarm": {"per_hour_fraction": 0.25}}])
async def test_a_37_percent_storm_in_a_40_node_cell_alarms_under_the_hourly_count(app, cells):
    for i in range(10, 40):  # the seeded cell's 10 GPU nodes and 30 more
        cells.east3.put(samples.gpu_node(node(i), CELL))
    inc = await app.declare(cells=(CELL,))
    await start_hooks(app)
    await remediate(cells, *[node(i) for i in range(10)])
    await poll(app)
    assert alarms(app, inc.channel_id) == []  # 10 of 40: 25%, not more
    await remediate(cells, *[node(i) for i in range(10, 15)])
    await poll(app)
    (text,) = alarms(app, inc.channel_id)
    assert "15 of 40 (38%) GPU nodes were taken out of service for remediation or as unhealthy" in text, text
    assert "(policy: more than 20 an hour, or more than 25% of the cell's GPU nodes, alarms)" in text, text
    # Its line on the postmortem's timeline, from the audit entry.
    (entry,) = await alarm_entries(app)
    line = timeline.alarm_seen(timeline.AlarmSeen.model_validate(entry["detail"]), "Firebreak")
    assert line == (
        "Remediation alarm: 15 of 40 GPU nodes out for remediation in us-east-3 within an hour; offered "
        "remediation-pause on nhc-gpu"
    ), line


@pytest.mark.parametrize("policy_overrides", [{"remediation_alarm": {"unhealthy_taints": ["gpu.example.com/"]}}])
async def test_a_health_checkers_taint_named_in_the_policy_counts(app, cells):
    inc = await app.declare(cells=(CELL,))
    await start_hooks(app)
    for i in range(3):  # 3 of 10: more than 25% of the cell
        await kubectl(cells.kubeconfig, CELL, "taint", "nodes", node(i), "gpu.example.com/unhealthy=xid79:NoSchedule")
    await poll(app)
    (text,) = alarms(app, inc.channel_id)
    assert "3 of 10 (30%) GPU nodes were taken out of service for remediation or as unhealthy" in text, text


@pytest.mark.parametrize("policy_overrides", [{"remediation_alarm": {"per_hour_fraction": 0.25}}])
async def test_20_nodes_of_a_2000_node_cell_do_not_alarm(app, cells):
    for i in range(10, 2000):
        cells.east3.put(samples.gpu_node(node(i), CELL), validate=False)
    inc = await app.declare(cells=(CELL,))
    await start_hooks(app)
    await remediate(cells, *[node(i) for i in range(20)])
    await poll(app)
    assert alarms(app, inc.channel_id) == []  # 1% of the cell, and not more than 20 an hour
