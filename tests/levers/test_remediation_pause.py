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
