"""Firebreak taints GPU nodes only (issue 35, item 14), on a REAL kube-apiserver with deploy/ applied:
RBAC grants `patch nodes` on every node (a Role cannot name a label), so the admission policy
firebreak-nodes-gpu, bound with an objectSelector on the GPU label, refuses the bot's write to any node
without it: a control-plane node, and one the write would label as a GPU node. A GPU node's
quarantine still passes, and the admin is not restricted."""

from __future__ import annotations

import json

import pytest

from tests.support.kube_apiserver import KubeAPIServer
from tests.support.levers import OPS, say

CELL = "us-east-3"
CONTROL_PLANE = "cp-0"
TAINT = {"key": "gpu.corp/quarantine", "value": "xid79", "effect": "NoSchedule"}
REFUSED = (
    "is forbidden: ValidatingAdmissionPolicy 'firebreak-nodes-gpu' with binding 'firebreak-nodes-gpu' denied "
    "request: firebreak-nodes-gpu: Firebreak may change only GPU nodes (label nvidia.com/gpu.present=true), and "
    "never that label; this node is not one."
)


def control_plane_node() -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": CONTROL_PLANE,
            "labels": {"node-role.kubernetes.io/control-plane": "", "kubernetes.io/hostname": CONTROL_PLANE},
        },
        "spec": {"taints": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]},
        "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]},
    }


@pytest.fixture
def control_plane(deployed: KubeAPIServer):
    deployed.put_node(control_plane_node())
    yield deployed
    deployed.delete("node", CONTROL_PLANE)


def as_bot(server: KubeAPIServer, *args: str):
    return server.kubectl_result("--context", CELL, *args, kubeconfig=server.bot_kubeconfig)


@pytest.mark.parametrize("dry_run", [False, True], ids=["real", "dry-run"])
@pytest.mark.parametrize(
    "kind, body",
    [
        ("json", [{"op": "add", "path": "/spec/taints/-", "value": TAINT}]),
        # Labelling it a GPU node in the same write: the selector matches the old object, the rule reads both.
        ("merge", {"metadata": {"labels": {"nvidia.com/gpu.present": "true"}}}),
    ],
    ids=["taint", "gpu-label"],
)
def test_the_bot_cannot_change_a_control_plane_node(control_plane, kind, body, dry_run):
    before = control_plane.get("node", CONTROL_PLANE)
    done = as_bot(
        control_plane,
        "patch",
        "node",
        CONTROL_PLANE,
        f"--type={kind}",
        "-p",
        json.dumps(body),
        *(["--dry-run=server"] if dry_run else []),
    )
    # The label change is also firebreak-nodes' to refuse (only its own labels): either policy may answer first.
    said = REFUSED if kind == "json" else "is forbidden: ValidatingAdmissionPolicy 'firebreak-nodes"
    assert done.returncode != 0 and said in done.stderr, done.stderr
    after = control_plane.get("node", CONTROL_PLANE)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]

    # The admin is not restricted (the bindings match only Firebreak's identity).
    ok = control_plane.kubectl_result(
        "patch", "node", CONTROL_PLANE, f"--type={kind}", "-p", json.dumps(body), "--dry-run=server"
    )
    assert ok.returncode == 0, ok.stderr


async def test_node_quarantine_of_a_control_plane_node_is_refused_through_the_app(app, control_plane):
    before = control_plane.get("node", CONTROL_PLANE)
    inc = await app.declare(roles={"ops": OPS})
    # This server is also the fleet context's, so a real pull waits for approval: the dry run sends the
    # lever's exact patch with dryRun=All, and the API server answers it as it would the write.
    out = await say(
        app, f"lever node-quarantine {CONTROL_PLANE} --cell {CELL} reason=xid79 --dry-run", OPS, inc.channel_id
    )
    assert "The API server REFUSED it (dryRun=All)" in out and "firebreak-nodes-gpu" in out, out
    after = control_plane.get("node", CONTROL_PLANE)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert not any(t["key"] == TAINT["key"] for t in after["spec"].get("taints") or [])
