"""Evidence (issue 26, item 3): before a lever writes, the target as it found it (no managedFields),
its status and its events are kept with the incident, and their SHA-256 is in the lever.apply audit
entry; `firebreak evidence INC-n [REQ-n]` prints them; the postmortem links them."""

from __future__ import annotations

import copy

from bot.postmortem import document
from fbworld.kube import FakeKubeCluster
from levers import evidence
from tests.support.core import cli, jsonl
from tests.support.harness import audit_entries
from tests.support.levers import OPS, say

NODE = "gpu-a3-0001"


def node_event(cell: FakeKubeCluster, uid: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{NODE}.xid79", "namespace": "default"},
        "involvedObject": {"kind": "Node", "name": NODE, "uid": uid},
        "reason": "GPUXid",
        "message": "XID 79 on GPU 3: GPU has fallen off the bus",
        "type": "Warning",
        "count": 4,
        "firstTimestamp": "2026-11-30T03:01:00Z",
        "lastTimestamp": "2026-11-30T03:09:00Z",
        "source": {"component": "dcgm-exporter"},
    }


async def test_a_node_quarantines_evidence_is_the_node_before_the_taint(app, cells, redis_url):
    before = copy.deepcopy(cells.east3.get("node", NODE))
    cells.east3.put(node_event(cells.east3, before["metadata"]["uid"]))
    before = cells.east3.get("node", NODE)  # as stored (resourceVersion and all)
    inc = await app.declare(roles={"ops": OPS})

    out = await say(app, f"lever node-quarantine {NODE} --cell us-east-3 reason=xid79", OPS, inc.channel_id)
    assert "applied and verified" in out, out
    assert any(t["key"] == "gpu.corp/quarantine" for t in cells.east3.get("node", NODE)["spec"]["taints"])

    [kept] = await evidence.read(app.services.redis, inc.id, "REQ-1")
    want = copy.deepcopy(before)
    want["metadata"].pop("managedFields", None)
    assert kept["object"] == want  # the node as it was: no quarantine taint, no managedFields
    assert not any(t["key"] == "gpu.corp/quarantine" for t in kept["object"]["spec"].get("taints", []))
    assert kept["status"] == before["status"]
    assert [(e["reason"], e["count"]) for e in kept["events"]] == [("GPUXid", 4)] and kept["events_note"] == ""
    assert (kept["request"], kept["lever"], kept["target"], kept["cell"]) == (
        "REQ-1",
        "node-quarantine",
        NODE,
        "us-east-3",
    )

    [applied] = [e for e in await audit_entries(app, inc.id) if e["action"] == "lever.apply"]
    assert applied["detail"]["evidence"] == {"sha256": kept["digest"], "events": 1}

    # The operator's command prints the same record, and the digest recomputed from it matches the audit's.
    code, stdout, stderr = await cli(redis_url, "evidence", inc.id, "REQ-1")
    assert code == 0, stderr
    [printed] = jsonl(stdout)
    assert printed["digest"] == applied["detail"]["evidence"]["sha256"]
    assert printed["object"]["metadata"]["name"] == NODE and "managedFields" not in printed["object"]["metadata"]
    code, stdout, _ = await cli(redis_url, "evidence", inc.id)
    assert code == 0 and [r["request"] for r in jsonl(stdout)] == ["REQ-1"]

    # The postmortem's timeline links it.
    doc = await document.build(app.services, inc.id)
    assert f"sha256 `{kept['digest']}`" in doc and "`firebreak evidence` prints it" in doc


async def test_unreadable_events_do_not_stop_the_lever(app, cells):
    cells.east3.fail_next("GET", r"/api/v1/events", status=500, times=10)
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, f"lever node-quarantine {NODE} --cell us-east-3 reason=xid79", OPS, inc.channel_id)
    assert "applied and verified" in out, out
    [kept] = await evidence.read(app.services.redis, inc.id, "REQ-1")
    assert kept["events"] == [] and kept["events_note"].startswith("events not read: "), kept["events_note"]
    assert kept["object"]["metadata"]["name"] == NODE


async def test_bad_input_is_one_line_and_exit_2(redis_url):
    for args, said in (
        (("evidence", "INC-x"), "is not an incident id: use INC-<n>"),
        (("evidence", "INC-1", "REQ-zero"), "is not a request id: use REQ-<n>"),
        (("evidence", "INC-99"), "no evidence for INC-99"),
    ):
        code, stdout, stderr = await cli(redis_url, *args)
        assert code == 2 and stdout == "" and said in stderr and len(stderr.strip().splitlines()) == 1, (args, stderr)
