"""The console's demo fleet: every lever, approval, break-glass, undo and triage works against it,
through the real app (signed Slack requests to Bolt, kubernetes_asyncio to the emulators, the
product's Prometheus client to the simulated Prometheus), and kubectl reads what the levers did."""

from __future__ import annotations

import asyncio
import re

import pytest

from bot.console.main import open_console
from fbworld.fleet import CELLS, NODES_PER_CELL, node_name
from tests.support.core import run_cli
from tests.support.deploy import kubectl


@pytest.fixture
def no_clusters(monkeypatch):
    for var in ("KUBECONFIG", "PROMETHEUS_URL", "REDIS_URL"):
        monkeypatch.delenv(var, raising=False)


def _button(out: list[str], label: str) -> str:
    """The number of the last button shown with this label ("[3] Approve")."""
    found = re.findall(rf"\[(\d+)\] {label}\b", "\n".join(out))
    assert found, f"no [{label}] button in:\n" + "\n".join(out[-20:])
    return found[-1]


async def _run(c, out: list[str], line: str, ok: bool = True) -> str:
    start = len(out)
    assert await c.line(line) is ok, "\n".join(out[start:])
    return "\n".join(out[start:])


def _taints(node: dict) -> dict[str, str]:
    return {t["key"]: t.get("value", "") for t in node["spec"].get("taints") or []}


async def test_the_demo_fleet_serves_every_lever_with_approval_breakglass_undo_and_triage(no_clusters):
    out: list[str] = []
    async with open_console("alice", out.append) as c:
        fleet = c.fleet
        assert fleet is not None and fleet.prometheus is not None
        assert c.svc.settings.kubeconfig == fleet.kubeconfig
        cell = fleet.clusters["us-east-3"]
        assert sorted(fleet.clusters) == sorted([*CELLS, "global"])
        assert len(cell.list("nodes")) == NODES_PER_CELL

        await _run(c, out, "/incident declare TTFT burn in us-east-3 --sev 2 --cell us-east-3")
        await _run(c, out, "/incident role ops @bob")
        await _run(c, out, "/incident role model @carol")
        await _run(c, out, "as @bob")

        # Cell levers: each changes the emulator's object as the real controller would see it.
        node = node_name(17)
        said = await _run(c, out, f"/incident lever node-quarantine {node} reason=xid79 ticket=INC-1")
        assert "applied and verified" in said
        assert _taints(cell.get("nodes", node))["gpu.corp/quarantine"] == "xid79"
        assert "nvidia.com/gpu" in _taints(cell.get("nodes", node))  # the pool's own taint stays

        said = await _run(c, out, "/incident lever kueue-hold research-h100")
        assert "applied and verified" in said
        assert cell.get("clusterqueues", "research-h100")["spec"]["stopPolicy"] == "Hold"

        said = await _run(c, out, "/incident lever keda-pause serve-chat/llm-70b")
        assert "paused at its current replicas (Rollout llm-70b, autoscaling.keda.sh/paused=true)" in said
        so = cell.get("scaledobjects", "llm-70b", "serve-chat")
        assert so["metadata"]["annotations"]["autoscaling.keda.sh/paused"] == "true"
        assert "autoscaling.keda.sh/paused-replicas" not in so["metadata"]["annotations"]

        said = await _run(c, out, "/incident lever jobset-suspend train-llm/pretrain-405b")
        assert "applied and verified" in said
        (workload,) = cell.list("workloads")
        assert workload["spec"]["active"] is False

        # The fleet context needs a second person: the IC approves on the card.
        said = await _run(c, out, "/incident lever route-weight edge/chat-global backend=cell-us-east-3")
        assert "needs approval" in said.lower() or "approve" in said.lower()
        await _run(c, out, "as @alice")
        said = await _run(c, out, f"press {_button(out, 'Approve')}")
        assert "applied and verified" in said
        route = fleet.clusters["global"].get("httproutes", "chat-global", "edge")
        weights = {b["name"]: b["weight"] for b in route["spec"]["rules"][0]["backendRefs"]}
        assert weights == {"cell-us-east-1": 100, "cell-us-east-2": 100, "cell-us-east-3": 50}

        # Undo restores only what the lever changed. The node's return gate reads dcgm-exporter's series,
        # which the demo Prometheus does not simulate: it says so, and the IC approves the return.
        await _run(c, out, "as @bob")
        said = await _run(c, out, "/incident undo REQ-1")
        assert "not returned yet" in said and "XIDs could not be read" in said, said
        await _run(c, out, "as @alice")
        said = await _run(c, out, f"press {_button(out, 'Approve')}")
        assert "undone" in said.lower() and "over a failing check" in said, said
        await _run(c, out, "as @bob")
        assert "gpu.corp/quarantine" not in _taints(cell.get("nodes", node))
        assert "nvidia.com/gpu" in _taints(cell.get("nodes", node))

        # The model seat aborts the canary; Argo's controller (in the emulator) rolls back.
        await _run(c, out, "as @carol")
        said = await _run(c, out, "/incident lever rollout-abort serve-chat/llm-70b")
        assert "applied and verified" in said
        assert cell.get("rollouts", "llm-70b", "serve-chat")["status"]["abort"] is True

        # Security levers: bob holds no security seat, so he asks for break-glass and the IC grants it.
        await _run(c, out, "as @bob")
        said = await _run(c, out, "/incident lever sandbox-quarantine sbx-tenant-acme/sess-7f3a9c-0", ok=False)
        assert "Only the Security lead can pull" in said
        await _run(c, out, "/incident breakglass sandbox-quarantine,killswitch 30 sandbox probed metadata")
        await _run(c, out, "as @alice")
        await _run(c, out, f"press {_button(out, 'Approve')}")
        await _run(c, out, "as @bob")
        said = await _run(c, out, "/incident lever sandbox-quarantine sbx-tenant-acme/sess-7f3a9c-0")
        assert "applied and verified" in said
        pod = cell.get("pods", "sess-7f3a9c-0", "sbx-tenant-acme")
        assert pod["metadata"]["labels"]["ir.corp/quarantine"] == "true"
        said = await _run(c, out, "/incident lever killswitch toolgw/toolgw-flags tenant=acme level=read")
        assert "applied and verified" in said
        assert cell.get("configmaps", "toolgw-flags", "toolgw")["data"]["acme.max_side_effect"] == "read"

        # Triage reads the simulated Prometheus: a healthy cell, with no quarantined node left.
        said = await _run(c, out, "/incident triage")
        assert re.search(r"TTFT p99\s+850 ms", said) and re.search(r"Quarantined GPU nodes\s+0%", said)
        assert "failed" not in said and "no data" not in said

        # Every step is in the audit chain.
        said = await _run(c, out, "audit")
        assert "audit chain OK" in said
        for action in ("lever.apply", "lever.done", "lever.undo", "command.breakglass", "approval"):
            assert action in said, action


async def test_the_quarantined_row_follows_the_emulators_taints(no_clusters):
    out: list[str] = []
    async with open_console("alice", out.append) as c:
        await _run(c, out, "/incident declare XIDs in us-east-2 --sev 3 --cell us-east-2")
        await _run(c, out, "/incident role ops @alice")
        for n in (1, 2):
            await _run(c, out, f"/incident lever node-quarantine {node_name(n)} reason=xid79")
        said = await _run(c, out, "/incident triage")
        assert re.search(r"Quarantined GPU nodes\s+5\.00%", said), said


async def test_kubectl_reads_the_demo_fleet_with_the_kubeconfig_the_banner_names(no_clusters):
    out: list[str] = []
    async with open_console("alice", out.append) as c:
        assert c.fleet is not None
        await _run(c, out, "/incident declare Queue stuck --sev 3 --cell us-east-1")
        await _run(c, out, "/incident role ops @alice")
        await _run(c, out, "/incident lever kueue-hold research-h100")
        proc = await asyncio.create_subprocess_exec(
            kubectl(), "--kubeconfig", str(c.fleet.kubeconfig), "--context", "us-east-1",
            "--cache-dir", str(c.fleet.kubeconfig.parent / ".kube-cache"),
            "get", "clusterqueue", "research-h100", "-o", "jsonpath={.spec.stopPolicy}",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        stdout, stderr = await proc.communicate()
        assert proc.returncode == 0, stderr.decode()
        assert stdout.decode() == "Hold"


def test_the_banner_says_demo_fleet_and_a_kubeconfig_turns_it_off(tmp_path):
    script = tmp_path / "s.txt"
    script.write_text(
        "/incident declare Queue stuck --sev 3 --cell us-east-3\n/incident role ops @alice\n"
        "/incident lever kueue-hold research-h100\n"
    )
    out = run_cli("console", "--script", str(script), "--user", "alice", env={"KUBECONFIG": "", "PROMETHEUS_URL": ""})
    assert out.returncode == 0, out.stdout + out.stderr
    assert "DEMO FLEET: cells us-east-1, us-east-2, us-east-3" in out.stdout
    assert "with a simulated Prometheus" in out.stdout
    assert "REQ-1 kueue-hold research-h100 (us-east-3): applied and verified" in out.stdout

    # Your own kubeconfig, by flag (an exported KUBECONFIG is not read): no demo fleet, and the
    # lever goes to the cluster its context names (nothing listens there).
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "contexts: [{name: us-east-3, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {token: x}}]\n"
    )
    flags = ("--kubeconfig", str(kubeconfig), "--real-clusters")
    out = run_cli("console", "--script", str(script), "--user", "alice", *flags)
    assert "DEMO FLEET" not in out.stdout and "REAL CLUSTERS" in out.stdout
    assert "us-east-3: Unreachable" in out.stdout and "127.0.0.1:1" in out.stdout


async def test_without_openssl_the_console_says_so_and_runs_without_a_fleet(no_clusters, monkeypatch):
    import fbworld.fleet as fleet_module

    monkeypatch.setattr(fleet_module.shutil, "which", lambda name: None if name == "openssl" else "/usr/bin/" + name)
    out: list[str] = []
    async with open_console("alice", out.append) as c:
        assert c.fleet is None
        assert any("No demo fleet: the openssl CLI is not installed" in line for line in out)
        await _run(c, out, "/incident declare Queue stuck --sev 3 --cell us-east-3")
        await _run(c, out, "/incident role ops @alice")
        said = await _run(c, out, "/incident lever kueue-hold research-h100", ok=False)
        assert "no kube" in said.lower()
