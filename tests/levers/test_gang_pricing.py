"""A gang's GPUs that do not come as nvidia.com/gpu (DRA ResourceClaims, MIG slices, another vendor's
resource) are not counted: jobset-suspend's price says `unknown` and why, never a confident 0 GPUs or
0 GPU-hours. (Restarts and gangs that are not JobSets: tests/realkube/test_gang_pricing_real.py.)"""

from __future__ import annotations

import pytest

from bot.clock import iso
from fbworld.kube import samples
from levers.price import Price
from levers.store import lever_store
from tests.support.harness import T0
from tests.support.levers import OPS, say

NS, NAME = "train-llm", "pretrain-405b"
CHECKPOINT = "training.corp/last-checkpoint"


def trainer(js: dict) -> dict:
    return js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]


def dra(js: dict) -> None:
    # resource.k8s.io: the pod names a claim made from a template; the container uses it.
    trainer(js)["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": "eight-h100"}]
    container = trainer(js)["containers"][0]
    container["resources"] = {"claims": [{"name": "gpus"}]}


def mig(js: dict) -> None:
    # The NVIDIA device plugin's mixed MIG strategy: one resource per profile.
    trainer(js)["containers"][0]["resources"] = {"limits": {"nvidia.com/mig-3g.40gb": 2}}


def amd(js: dict) -> None:
    trainer(js)["containers"][0]["resources"] = {"limits": {"amd.com/gpu": 8}}


@pytest.mark.parametrize(
    ("shape", "why"),
    [
        (dra, "gets devices through DRA ResourceClaims (spec.resourceClaims: gpus), whose GPUs are not counted"),
        (mig, "asks for MIG slices (nvidia.com/mig-3g.40gb: 2), which are not whole GPUs and are not counted"),
        (amd, "asks for amd.com/gpu: 8, which is not counted as nvidia.com/gpu"),
    ],
    ids=["dra", "mig", "amd"],
)
async def test_gpus_that_are_not_nvidia_gpu_price_as_unknown_never_zero(app, cells, shape, why):
    js = samples.jobset()
    js["metadata"]["annotations"] = {CHECKPOINT: iso(T0 - 2400)}
    shape(js)
    cells.east3.put(js)
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, f"lever jobset-suspend {NS}/{NAME} --cell us-east-3 --dry-run", OPS, inc.channel_id)
    assert f"JobSet {NS}/{NAME}: unknown (workers {why})" in out, out
    rec = await lever_store(app.services).get("REQ-1")
    assert rec is not None
    price = Price.from_record(rec.plan.get("price"))
    assert price is not None
    assert price.total("GPUs") is None and price.total("GPU-hours") is None, price
    assert "0 GPU" not in out, out


async def test_a_kueue_workload_whose_podsets_ask_for_mig_slices_is_unknown(app, cells):
    """Kueue copies the pod template into the Workload's podSets: the same rule holds there."""
    js = samples.kueue_jobset()
    mig(js)
    js = cells.east3.put(js)
    cells.east3.put(samples.workload_for(js))
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, f"lever jobset-suspend {NS}/{NAME} --cell us-east-3 --dry-run", OPS, inc.channel_id)
    assert f"JobSet {NS}/{NAME}: unknown (podSet workers asks for MIG slices (nvidia.com/mig-3g.40gb: 2)" in out, out
