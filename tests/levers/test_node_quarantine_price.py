"""node-quarantine's price is what its NoSchedule taint does: it closes the node's GPUs to new pods and
evicts nothing (the scheduler honours NoSchedule for new pods only; the taint manager evicts for NoExecute
alone), so the training gangs with pods on the node are named as running on, with no GPU-hours lost. A
gang's Kueue Workload is listed by the job-uid label Kueue puts on it (sigs.k8s.io/kueue v0.17.0
pkg/controller/constants/constants.go JobUIDLabel), never the whole namespace."""

from __future__ import annotations

from bot.clock import iso
from fbworld.kube import samples
from levers.price import Price
from levers.store import lever_store
from tests.support.harness import T0
from tests.support.levers import OPS, say

NS, NAME = "train-llm", "pretrain-405b"
NODE = "gpu-a3-0003"
PULL = f"lever node-quarantine {NODE} --cell us-east-3 reason=xid79"
CHECKPOINT = "training.corp/last-checkpoint"


def gang_pod(i: int, node: str = NODE, jobset: str = NAME, gpus: int = 4) -> dict:
    pod = samples.pod(NS, f"{jobset}-workers-0-{i}")
    pod["metadata"]["labels"] = {"jobset.sigs.k8s.io/jobset-name": jobset}
    pod["spec"]["nodeName"] = node
    pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    return pod


async def price_of(app, req: str) -> Price:
    rec = await lever_store(app.services).get(req)
    assert rec is not None
    price = Price.from_record(rec.plan.get("price"))
    assert price is not None, rec.plan
    return price


async def test_the_price_is_the_gpus_closed_to_new_pods_and_the_gangs_on_the_node_keep_running(app, cells):
    cell = cells.east3
    js = samples.kueue_jobset()
    js["metadata"]["annotations"] = {CHECKPOINT: iso(T0 - 2400)}  # 40 min of progress: not lost by a taint
    js = cell.put(js)
    cell.put(samples.workload_for(js))  # 512 GPUs in its podSets
    cell.put(gang_pod(0))
    cell.put(gang_pod(1))
    cell.put(gang_pod(2, node="gpu-a3-0004"))  # another node
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, PULL, OPS, inc.channel_id)
    assert "applied and verified" in out, out
    price = await price_of(app, "REQ-1")
    assert {(c.what, c.unit): c.value for c in price.costs} == {
        (f"Node {NODE}: GPUs closed to new pods", "GPUs"): 8,  # samples.gpu_node: allocatable nvidia.com/gpu 8
        (f"Node {NODE}: training progress lost", "GPU-hours"): 0,
    }
    assert f"JobSet {NS}/{NAME} (8 of its 512 GPUs there, 2 pods) keeps running on {NODE}" in price.notes
    [announced] = [m["text"] for m in app.slack.messages(inc.channel_id) if "applying now" in m["text"]]
    assert f"Node {NODE}: GPUs closed to new pods: 8 GPUs (status.allocatable nvidia.com/gpu)" in announced
    assert "0 GPU-hours (a NoSchedule taint evicts nothing" in announced, announced
    assert "keeps running on" in announced and "341" not in announced, announced


async def test_the_gangs_workload_is_listed_by_its_job_uid_label(app, cells):
    cell = cells.east3
    js = cell.put(samples.kueue_jobset())
    cell.put(samples.workload_for(js))
    cell.put(gang_pod(0))
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, f"{PULL} --dry-run", OPS, inc.channel_id)
    lists = cell.find_requests("GET", r"/workloads$")
    selector = f"kueue.x-k8s.io/job-uid={js['metadata']['uid']}"
    assert lists and [r.query.get("labelSelector") for r in lists] == [selector] * len(lists), lists
    assert f"JobSet {NS}/{NAME} (4 of its 512 GPUs there, 1 pod) keeps running on {NODE}" in out, out


async def test_a_finished_workload_of_the_gang_is_left_out(app, cells):
    cell = cells.east3
    js = cell.put(samples.kueue_jobset())
    wl = samples.workload_for(js)
    wl["spec"]["podSets"][0]["count"] = 2  # 16 GPUs: the Workload's podSets, not the JobSet's 512
    cell.put(wl)
    # An older Workload of the same JobSet that finished: Kueue keeps it, podSets, admission and all.
    done = samples.workload_for(js)
    done["metadata"]["name"] = "jobset-pretrain-405b-0ld00"
    done["status"]["conditions"].append(
        {"type": "Finished", "status": "True", "reason": "Succeeded", "message": "done", "lastTransitionTime": iso(T0)}
    )
    cell.put(done)
    cell.put(gang_pod(0))
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, f"{PULL} --dry-run", OPS, inc.channel_id)
    assert f"JobSet {NS}/{NAME} (4 of its 16 GPUs there, 1 pod) keeps running on {NODE}" in out, out


async def test_gpus_it_cannot_read_are_unknown_and_a_cordoned_node_says_so(app, cells):
    cell = cells.east3
    node = cell.get("node", NODE)
    alloc = node["status"]["allocatable"]
    del alloc["nvidia.com/gpu"]
    alloc["nvidia.com/mig-3g.40gb"] = "16"  # MIG mixed strategy: no nvidia.com/gpu
    node["spec"]["unschedulable"] = True
    cell.put(node)
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, f"{PULL} --dry-run", OPS, inc.channel_id)
    price = await price_of(app, "REQ-1")
    [gpus] = [c for c in price.costs if c.unit == "GPUs"]
    assert gpus.value is None and gpus.how == "status.allocatable has nvidia.com/mig-3g.40gb, not nvidia.com/gpu"
    assert f"{NODE} is already cordoned (spec.unschedulable): new pods are kept off it either way" in price.notes
    assert f"no training gang has pods on {NODE} (namespaces read: {NS})" in price.notes, out
