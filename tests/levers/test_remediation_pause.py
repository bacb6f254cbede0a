"""remediation-pause on a Medik8s NodeHealthCheck: it adds only `firebreak:<INC-n>` to spec.pauseRequests
and its undo removes only that entry, so other parties' entries (before, and added since) stay; a
NodeHealthCheck without a spec is paused with a note saying what could not be read, nothing guessed."""

from __future__ import annotations

import json

from fbworld.kube import samples
from tests.support.levers import OPS, kubectl, patches, say

NHC = "nhc-gpu"


def pauses(cells, name: str = NHC) -> list[str] | None:
    return (cells.east3.get("nodehealthcheck", name).get("spec") or {}).get("pauseRequests")


async def append(cells, entry: str, name: str = NHC) -> None:
    """Another party pausing it too, the way kubectl would (a JSON patch append)."""
    body = json.dumps([{"op": "add", "path": "/spec/pauseRequests/-", "value": entry}])
    await kubectl(cells.kubeconfig, "us-east-3", "patch", "nodehealthcheck", name, "--type=json", "-p", body)


async def test_pause_and_undo_leave_every_other_entry_alone(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    ch = inc.channel_id
    assert pauses(cells) == ["cluster-upgrade-operator"]
    out = await say(app, f"lever remediation-pause {NHC} --cell us-east-3", OPS, ch)
    assert "applied and verified" in out, out
    assert pauses(cells) == ["cluster-upgrade-operator", f"firebreak:{inc.id}"]
    # The write was one guarded JSON patch: the list as read is tested, then appended to.
    (sent,) = patches(cells.east3)
    assert sent.content_type == "application/json-patch+json"
    assert sent.body[:2] == [
        {"op": "test", "path": "/spec/pauseRequests", "value": ["cluster-upgrade-operator"]},
        {"op": "add", "path": "/spec/pauseRequests/-", "value": f"firebreak:{inc.id}"},
    ]

    # Pulled again in the same incident: already paused by it, nothing sent.
    again = await say(app, f"lever remediation-pause {NHC} --cell us-east-3", OPS, ch)
    assert f"already paused by {inc.id}" in again and len(patches(cells.east3)) == 1, again

    # Since then someone else paused it too (after ours), and the first entry was dropped by its owner.
    await append(cells, "sre-oncall:node-drain")
    await kubectl(
        cells.kubeconfig,
        "us-east-3",
        "patch",
        "nodehealthcheck",
        NHC,
        "--type=json",
        "-p",
        json.dumps([{"op": "remove", "path": "/spec/pauseRequests/0"}]),
    )
    assert pauses(cells) == [f"firebreak:{inc.id}", "sre-oncall:node-drain"]

    out = await say(app, "undo REQ-1", OPS, ch)
    assert "undone" in out and "verified" in out, out
    assert pauses(cells) == ["sre-oncall:node-drain"]
    annotations = cells.east3.get("nodehealthcheck", NHC)["metadata"].get("annotations") or {}
    assert "firebreak.io/request" not in annotations


async def test_undo_of_the_only_entry_removes_the_list_it_created(app, cells):
    cells.east3.put(samples.node_health_check("nhc-fresh"))
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, "lever remediation-pause nodehealthcheck/nhc-fresh --cell us-east-3", OPS, inc.channel_id)
    assert "applied and verified" in out, out
    assert pauses(cells, "nhc-fresh") == [f"firebreak:{inc.id}"]
    # No list before: the add is guarded by the resourceVersion (an add would replace a list made meanwhile).
    (sent,) = patches(cells.east3)
    assert sent.body[0]["path"] == "/metadata/resourceVersion"
    out = await say(app, "undo REQ-1", OPS, inc.channel_id)
    assert "undone" in out, out
    assert "pauseRequests" not in cells.east3.get("nodehealthcheck", "nhc-fresh")["spec"]


async def test_a_nodehealthcheck_without_spec_is_paused_with_a_note_nothing_guessed(app, cells):
    cells.east3.put(
        {"apiVersion": "remediation.medik8s.io/v1alpha1", "kind": "NodeHealthCheck", "metadata": {"name": "nhc-bare"}}
    )
    inc = await app.declare(roles={"ops": OPS})
    dry = await say(app, "lever remediation-pause nhc-bare --cell us-east-3 --dry-run", OPS, inc.channel_id)
    assert (
        "NodeHealthCheck nhc-bare has no spec: which nodes it watches (spec.selector) and how it remediates "
        "could not be read; the pause adds spec.pauseRequests only." in dry
    ), dry
    assert "(dry run)" in dry and not patches(cells.east3)
    out = await say(app, "lever remediation-pause nhc-bare --cell us-east-3", OPS, inc.channel_id)
    assert "applied and verified" in out, out
    # (The API server defaults the rest of a new spec from the CRD: minHealthy, unhealthyConditions.)
    assert pauses(cells, "nhc-bare") == [f"firebreak:{inc.id}"]
    out = await say(app, "undo REQ-2", OPS, inc.channel_id)
    assert "undone" in out and "verified" in out, out
    assert "pauseRequests" not in (cells.east3.get("nodehealthcheck", "nhc-bare").get("spec") or {})


# ------------------------------------------------------------------ what the pause does, said before and after

SNR = {"apiVersion": "self-node-remediation.medik8s.io/v1alpha1", "kind": "SelfNodeRemediation", "namespace": "medik8s"}


def under_remediation(name: str = "nhc-live", pauses_: list[str] | None = None) -> dict:
    """A NodeHealthCheck its operator has reported on (lastUpdateTime), remediating two nodes, one of
    them healthy again (conditionsHealthyTimestamp), and one unhealthy node held back by minHealthy."""
    nhc = samples.node_health_check(name, pause_requests=pauses_)
    started = "2026-12-07T10:00:00Z"
    nhc["status"] = {
        "phase": "Paused" if pauses_ else "Remediating",
        "reason": f"NHC is paused: {','.join(pauses_)}" if pauses_ else "NHC is remediating 3 nodes",
        # Upstream zeroes the counts on every Reconcile and a paused one returns before counting again.
        "observedNodes": 0 if pauses_ else 10,
        "healthyNodes": 0 if pauses_ else 7,
        "lastUpdateTime": started,
        "unhealthyNodes": [
            {
                "name": "gpu-a3-0001",
                "remediations": [{"resource": {**SNR, "name": "gpu-a3-0001-x7k2p"}, "started": started}],
            },
            {
                "name": "gpu-a3-0002",
                "remediations": [{"resource": {**SNR, "name": "gpu-a3-0002-q9d4m"}, "started": started}],
                "conditionsHealthyTimestamp": "2026-12-07T10:20:00Z",
            },
            {"name": "gpu-a3-0003"},
        ],
    }
    return nhc


async def test_the_plan_names_the_nodes_under_remediation_and_what_the_pause_does_to_them(app, cells):
    cells.east3.put(under_remediation())
    inc = await app.declare(roles={"ops": OPS})
    dry = await say(app, "lever remediation-pause nhc-live --cell us-east-3 --dry-run", OPS, inc.channel_id)
    assert (
        "Under remediation now (2): gpu-a3-0001 (SelfNodeRemediation medik8s/gpu-a3-0001-x7k2p), gpu-a3-0002 "
        "(SelfNodeRemediation medik8s/gpu-a3-0002-q9d4m); the pause does not stop them (their remediator carries "
        "on), and while paused NodeHealthCheck does not delete the remediation object of a node that heals, so its "
        "remediator keeps that node out of service (its NoSchedule taint) until the pause ends." in dry
    ), dry
    assert "Healthy again, remediation object already being deleted (1): gpu-a3-0002: the pause does not" in dry
    assert "Unhealthy with no remediation started (1): gpu-a3-0003: none starts while paused." in dry, dry
    assert "they finish" not in dry and "running ones finish" not in dry, dry
    assert "• nodes NodeHealthCheck nhc-live watches, none remediated automatically while paused: 10 nodes" in dry


async def test_an_nhc_already_paused_never_prices_its_zero_counts_as_fact(app, cells):
    cells.east3.put(under_remediation("nhc-held", ["cluster-upgrade-operator"]))
    inc = await app.declare(roles={"ops": OPS})
    dry = await say(app, "lever remediation-pause nhc-held --cell us-east-3 --dry-run", OPS, inc.channel_id)
    assert "while paused: 0 nodes" not in dry and "watches 0 node" not in dry, dry
    assert (
        "• nodes NodeHealthCheck nhc-held watches, none remediated automatically while paused: unknown (already "
        "paused by cluster-upgrade-operator: NodeHealthCheck reports 0 nodes while paused, so how many it watches "
        "is not known)" in dry
    ), dry
    assert "NodeHealthCheck is already paused by cluster-upgrade-operator" in dry, dry
    assert "2 nodes (gpu-a3-0001, gpu-a3-0002 (as of the earlier pause))" in dry, dry


async def test_verify_waits_for_nodehealthchecks_paused_phase_and_says_when_it_never_comes(app, cells):
    """An operator reports on this NodeHealthCheck (lastUpdateTime) but never writes Paused: our own
    entry read back is not enough."""
    cells.east3.put(under_remediation())
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, "lever remediation-pause nhc-live --cell us-east-3", OPS, inc.channel_id, timeout=30)
    assert "NOT verified" in out, out
    assert (
        f"spec.pauseRequests is firebreak:{inc.id}, but after 2s NodeHealthCheck reports phase Remediating "
        "(NHC is remediating 3 nodes), not Paused by firebreak:" in out
    ), out
    assert "is its operator running?" in out, out
