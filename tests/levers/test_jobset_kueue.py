"""jobset-suspend on a JobSet queued through Kueue: stopped through its Workload (spec.active=false),
which Kueue honours, where a bare spec.suspend is undone by Kueue's re-admission; undo reactivates it.
The Workload is found by its owner reference (the JobSet's uid), never by its name."""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Callable
from typing import Any

import pytest

from fbworld.kube import samples
from levers.store import lever_store
from tests.support.harness import audit_entries
from tests.support.levers import OPS, PROVENANCE, comparable, kubectl, patches, say

NS, NAME = "train-llm", "pretrain-405b"
PULL = f"lever jobset-suspend {NS}/{NAME} --cell us-east-3"
WORKLOADS = f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NS}/workloads"


@pytest.fixture
def policy_overrides() -> dict:
    # The read-back wait for Kueue to suspend the JobSet (the same policy knob as rollout-abort's).
    return {"rollout_verify_seconds": 1, "api_timeout_seconds": 2}


async def eventually(check: Callable[[], Any], seconds: float = 3.0) -> Any:
    """The first truthy value of check() within `seconds` (polled), else the last falsy one."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while True:
        got = check()
        if got or loop.time() >= deadline:
            return got
        await asyncio.sleep(0.05)


def suspend_of(cell) -> Any:
    return cell.get("jobset", NAME, NS)["spec"].get("suspend")


def condition(obj: dict, ctype: str) -> dict:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == ctype), {})


async def test_kueue_jobset_stays_stopped_through_its_workload_and_undo_resumes(app, cells):
    cell = cells.east3
    cell.put(samples.kueue_jobset())
    cell.start_controller("kueue", interval=0.1)
    [wl] = await eventually(lambda: [w for w in cell.list("workloads", NS) if condition(w, "Admitted")])
    name = wl["metadata"]["name"]
    assert suspend_of(cell) is False

    # The point: a bare spec.suspend (what this lever sent before; `kubectl patch jobset`) does not hold,
    # because Kueue restarts an admitted job that is suspended.
    bare = ["patch", "jobset", NAME, "-n", NS, "--type=merge", "-p", '{"spec":{"suspend":true}}']
    await kubectl(cells.kubeconfig, "us-east-3", *bare)
    assert await eventually(lambda: suspend_of(cell) is False), "Kueue should have unsuspended the admitted JobSet"

    inc = await app.declare(roles={"ops": OPS})
    cell.requests.clear()
    out = await say(app, PULL, OPS, inc.channel_id)
    assert out.startswith(f"REQ-1 jobset-suspend {NS}/{NAME} (us-east-3): applied and verified"), out
    assert f"stopped through Workload {NS}/{name} (spec.active=false)" in out, out
    # One write, to the Workload; the JobSet itself is left to Kueue.
    assert [r.path for r in patches(cell)] == [f"{WORKLOADS}/{name}"]

    # Proves nothing undid the stop over a window: five more Kueue passes (it would restart it in one).
    kueue, seen = cell.controllers["kueue"], cell.controllers["kueue"].passes
    assert await eventually(lambda: kueue.passes >= seen + 5, seconds=30)
    assert suspend_of(cell) is True, "the JobSet must still be stopped after Kueue's next passes"
    stopped = cell.get("workload", name, NS)
    assert stopped["spec"]["active"] is False
    assert condition(stopped, "Evicted").get("status") == "True"
    assert condition(stopped, "Evicted").get("reason") == "Deactivated"
    assert stopped["metadata"]["annotations"][PROVENANCE[0]] == "REQ-1"
    assert stopped["metadata"]["annotations"][PROVENANCE[1]] == inc.id

    undo = await app.run("undo REQ-1", user=OPS, channel=inc.channel_id)
    assert "REQ-1 jobset-suspend" in undo and "undone" in undo and "verified" in undo, undo
    restored = cell.get("workload", name, NS)
    assert wl["spec"]["active"] is True  # the CRD defaults it
    assert restored["spec"] == wl["spec"]  # active: true again, exactly as it was
    assert restored["metadata"].get("annotations") == wl["metadata"].get("annotations")
    assert await eventually(lambda: suspend_of(cell) is False), "Kueue should re-admit and resume the JobSet"
    assert (await lever_store(app.services).get("REQ-1")).state == "undone"


async def test_printed_kubectl_line_gives_the_same_workload_and_unverified_says_what_it_saw(app, cells):
    cell = cells.east3
    js = cell.put(samples.kueue_jobset())
    wl = cell.put(samples.workload_for(js))
    name = wl["metadata"]["name"]
    original = cell.get("workload", name, NS)
    inc = await app.declare(roles={"ops": OPS})

    dry = await say(app, PULL + " --dry-run", OPS, inc.channel_id)
    assert "(dry run)" in dry and f"stopped through Workload {NS}/{name} (spec.active=false)" in dry, dry
    assert f"PATCH {WORKLOADS}/{name}" in dry, dry
    assert f"kubectl --context us-east-3 patch workloads.kueue.x-k8s.io {name} -n {NS} --type=merge" in dry, dry
    assert f"# stops JobSet {NS}/{NAME} through its Kueue Workload" in dry, dry
    planned = await lever_store(app.services).get("REQ-1")
    argv = shlex.split(planned.plan["kubectl"], comments=True)
    assert argv[:3] == ["kubectl", "--context", "us-east-3"], argv
    await kubectl(cells.kubeconfig, "us-east-3", *argv[3:])
    reference = comparable(cell.get("workload", name, NS))
    assert reference["spec"]["active"] is False
    cell.put(original)
    original = cell.get("workload", name, NS)
    jobset_before = cell.get("jobset", NAME, NS)
    cell.requests.clear()

    out = await say(app, PULL, OPS, inc.channel_id)
    # No Kueue controller runs in this cell, so nothing suspends the JobSet: applied, not verified.
    assert out.startswith(f"REQ-2 jobset-suspend {NS}/{NAME} (us-east-3): applied, rv "), out
    assert "NOT verified" in out, out
    assert f"Workload {NS}/{name} has spec.active=false (no Evicted condition)" in out, out
    assert "but JobSet spec.suspend=false after 1s" in out, out
    rec = await lever_store(app.services).get("REQ-2")
    assert rec.state == "done" and rec.result["verified"] is False
    assert [(r.method, r.path, r.content_type, r.body) for r in patches(cell)] == [
        (c["method"], c["path"], c["content_type"], c["body"]) for c in rec.plan["calls"]
    ]
    assert comparable(cell.get("workload", name, NS)) == reference
    assert cell.get("jobset", NAME, NS) == jobset_before  # nothing written to the JobSet

    undo = await app.run("undo REQ-2", user=OPS, channel=inc.channel_id)
    assert "undone" in undo, undo
    assert comparable(cell.get("workload", name, NS), False) == comparable(original, False)
    actions = [e["action"] for e in await audit_entries(app, inc.id)]
    for a in ("lever.apply", "lever.done", "lever.undo"):
        assert a in actions, (a, actions)


async def test_no_workload_yet_is_refused_and_a_jobset_without_the_queue_label_is_suspended_directly(app, cells):
    cell = cells.east3
    js = cell.put(samples.kueue_jobset())
    before = cell.get("jobset", NAME, NS)
    inc = await app.declare(roles={"ops": OPS})
    cell.requests.clear()

    out = await say(app, PULL, OPS, inc.channel_id)
    assert "not pulled, nothing changed" in out, out
    assert "queued through Kueue (kueue.x-k8s.io/queue-name=research) but has no Workload yet" in out, out
    assert not patches(cell)
    assert cell.get("jobset", NAME, NS) == before

    # Not queued through Kueue: nothing would undo a suspend, so spec.suspend it is (as before).
    js["metadata"].pop("labels")
    cell.put(js)
    cell.requests.clear()
    out = await say(app, PULL, OPS, inc.channel_id)
    assert "applied and verified (suspend=true" in out, out
    assert [r.path for r in patches(cell)] == [f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{NS}/jobsets/{NAME}"]
    assert not cell.find_requests("GET", r"/workloads")
    assert suspend_of(cell) is True


async def test_two_workloads_for_one_jobset_are_refused(app, cells):
    cell = cells.east3
    js = cell.put(samples.kueue_jobset())
    first = cell.put(samples.workload_for(js))
    second = samples.workload_for(js, admitted=False)
    second["metadata"]["name"] = first["metadata"]["name"][:-5] + "0a1b2"  # a stale one Kueue has yet to delete
    cell.put(second)
    # A Workload of another JobSet in the namespace is not counted (owner uid differs).
    other = cell.put(samples.kueue_jobset(name="finetune-70b"))
    cell.put(samples.workload_for(other))
    inc = await app.declare(roles={"ops": OPS})
    cell.requests.clear()

    out = await say(app, PULL, OPS, inc.channel_id)
    assert "not pulled, nothing changed" in out, out
    names = sorted([first["metadata"]["name"], second["metadata"]["name"]])
    assert f"has 2 Kueue Workloads ({', '.join(names)}); Firebreak won't pick one" in out, out
    assert not patches(cell)
