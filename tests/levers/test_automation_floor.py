"""The quarantine floor counts every GPU node that can't take work, whoever made it so: nodes that a
NodeHealthCheck's Self Node Remediation tainted, or someone cordoned with kubectl, count against it
as Firebreak's own quarantines do, and the refusal names them by who did it."""

from __future__ import annotations

from levers import outofservice
from tests.support.levers import OPS, kubectl, patches, say

SNR_TAINT = "remediation.medik8s.io/self-node-remediation:NoSchedule"


async def test_nodes_tainted_by_nodehealthcheck_count_against_the_floor(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    # Self Node Remediation (started by a NodeHealthCheck) taints 5 of the 10 GPU nodes; its
    # controller-runtime client writes as the binary's name, `manager`. Someone cordons a sixth
    # (kubectl 1.32 sends no fieldManager for a cordon: the API server records its User-Agent, `kubectl`).
    for i in range(5):
        await kubectl(
            cells.kubeconfig, "us-east-3", "taint", "nodes", f"gpu-a3-000{i}", SNR_TAINT, "--field-manager=manager"
        )
    await kubectl(cells.kubeconfig, "us-east-3", "cordon", "gpu-a3-0005")
    writes = len(patches(cells.east3))
    out = await say(app, "lever node-quarantine gpu-a3-0007 reason=xid79", OPS, inc.channel_id)
    assert (
        "Quarantine floor: us-east-3 has 6 of 10 GPU nodes quarantined; gpu-a3-0007 would make it 7 of 10 (70%), "
        "above the policy maximum of 10%." in out
    ), out
    assert (
        "Out now, by who: NodeHealthCheck (medik8s) 5 (gpu-a3-0000, gpu-a3-0001, gpu-a3-0002, gpu-a3-0003, "
        "gpu-a3-0004); kubectl 1 (gpu-a3-0005)." in out
    ), out
    assert len(patches(cells.east3)) == writes  # refused before anything was written


async def test_the_gpu_pools_own_taint_does_not_count(app, cells):
    """Every sample GPU node carries nvidia.com/gpu=present:NoSchedule (it dedicates, it doesn't fence)."""
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, "lever node-quarantine gpu-a3-0007 reason=xid79", OPS, inc.channel_id)
    assert "applied and verified" in out, out  # counted, all 10 would be out and this refused


def test_who_from_taint_keys_and_managed_fields():
    def node(name, spec, annotations=None, managed=None):
        meta = {"name": name, "annotations": annotations or {}, "managedFields": managed or []}
        return {"metadata": meta, "spec": spec}

    nodes = [
        node("a", {"taints": [{"key": "gpu.corp/quarantine", "value": "xid79", "effect": "NoSchedule"}]}),
        node(
            "b",
            {"taints": [{"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"}]},
        ),
        node("c", {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]}),
        node("d", {"taints": [{"key": "node.cloudprovider.kubernetes.io/shutdown", "effect": "NoSchedule"}]}),
        node(
            "e",
            {"unschedulable": True, "taints": [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]},
            {"quarantineHealthEvent": "{}"},
        ),
        node(
            "f",
            {"unschedulable": True},
            managed=[
                {"manager": "kubelet", "time": "2026-12-03T10:00:00Z", "fieldsV1": {"f:status": {}}},
                {
                    "manager": "kubectl-cordon",
                    "time": "2026-12-03T10:05:00Z",
                    "fieldsV1": {"f:spec": {"f:unschedulable": {}}},
                },
            ],
        ),
        node(
            "g",
            {"taints": [{"key": "example.com/maintenance", "effect": "NoSchedule"}]},
            managed=[
                {"manager": "ops-bot", "time": "2026-12-03T10:00:00Z", "fieldsV1": {"f:spec": {"f:taints": {}}}},
            ],
        ),
        node(
            "h",
            {
                "taints": [
                    {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
                    {"key": "example.com/soft", "effect": "PreferNoSchedule"},
                ]
            },
        ),
    ]
    out = {o.name: o for o in outofservice.out_of_service(nodes, "gpu.corp/quarantine", ["nvidia.com/gpu"])}
    assert sorted(out) == ["a", "b", "c", "d", "e", "f", "g"]
    assert {n: o.who for n, o in out.items()} == {
        "a": "Firebreak",
        "b": "NodeHealthCheck (medik8s)",
        "c": "node lifecycle (kube-controller-manager)",
        "d": "cloud (cloud-controller-manager)",
        "e": "NVSentinel",
        "f": "kubectl (cordon)",
        "g": "ops-bot (last wrote the taints)",
    }
    assert out["e"].causes == (outofservice.Cause("NVSentinel", "cordoned"),)  # the mirror taint is the cordon
    assert out["f"].causes[0].since is not None
