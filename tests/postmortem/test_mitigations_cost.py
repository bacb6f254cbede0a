"""The postmortem's "What the mitigations cost": each lever pulled with the price it was pulled at, and
the GPU-hours they cost in all (unknown when one is, never 0), apart from what the incident cost. The
levers are pulled through the real app against the Kubernetes emulator (tests/support/lever_fixtures.py)."""

from __future__ import annotations

from bot.clock import iso
from bot.postmortem.document import build
from fbworld.kube import samples
from tests.support import lever_fixtures
from tests.support.harness import T0
from tests.support.levers import OPS, say

# The lever tests' fake cells and app (this directory's conftest has its own app, without cells).
app, app_settings, cells, policy_overrides = (
    lever_fixtures.app,
    lever_fixtures.app_settings,
    lever_fixtures.cells,
    lever_fixtures.policy_overrides,
)

NS = "train-llm"
CHECKPOINT = "training.corp/last-checkpoint"


def section(text: str) -> list[str]:
    body = text.split("## What the mitigations cost\n\n", 1)[1].split("\n## ", 1)[0]
    return [line for line in body.splitlines() if line]


async def test_the_mitigations_cost_section_lists_each_lever_and_sums_the_gpu_hours(app, cells):
    cell = cells.east3
    js = samples.jobset()
    js["metadata"]["annotations"] = {CHECKPOINT: iso(T0 - 2400)}  # 512 GPUs, 40 min: 341.3 GPU-hours
    cell.put(js)
    other = samples.jobset(name="finetune-70b")
    other["metadata"]["annotations"] = {CHECKPOINT: iso(T0 - 600)}  # 512 GPUs, 10 min: not lost to a taint
    cell.put(other)
    pod = samples.pod(NS, "finetune-70b-workers-0-0")
    pod["metadata"]["labels"] = {"jobset.sigs.k8s.io/jobset-name": "finetune-70b"}
    pod["spec"]["nodeName"] = "gpu-a3-0003"
    cell.put(pod)
    inc = await app.declare(roles={"ops": OPS})
    await app.run("assess --gpus 1024", channel=inc.channel_id)
    for pull in (
        f"lever jobset-suspend {NS}/pretrain-405b --cell us-east-3",
        "lever node-quarantine gpu-a3-0003 --cell us-east-3 reason=xid79",
        "lever kueue-hold research-h100 --cell us-east-3",
    ):
        out = await say(app, pull, OPS, inc.channel_id)
        assert "applied and verified" in out, out
    await say(app, f"lever jobset-suspend {NS}/finetune-70b --cell us-east-3 --dry-run", OPS, inc.channel_id)
    app.services.clock.advance(1800)  # half an hour on: the prices stay what they were when pulled

    lines = section(await build(app.services, inc.id))
    assert lines[0].startswith(
        "- REQ-1 `jobset-suspend` train-llm/pretrain-405b (us-east-3): JobSet train-llm/pretrain-405b: 341 GPU-hours"
    ), lines
    assert "341 GPU-hours (512 GPUs x 40 min since the last checkpoint" in lines[0], lines
    assert lines[1].startswith("- REQ-2 `node-quarantine` gpu-a3-0003 (us-east-3): "), lines
    # A NoSchedule taint evicts nothing: the gang on the node keeps running, 0 GPU-hours lost.
    assert "training progress lost: 0 GPU-hours" in lines[1], lines
    assert "JobSet train-llm/finetune-70b (0 of its 512 GPUs there, 1 pod) keeps running on gpu-a3-0003" in lines[1]
    assert lines[2].startswith("- REQ-3 `kueue-hold` research-h100 (us-east-3): ClusterQueue research-h100"), lines
    assert len(lines) == 5, lines  # the dry run (REQ-4) wrote nothing: not a mitigation
    assert lines[3] == "- GPU-hours the mitigations cost in all: 341 GPU-hours", lines  # 341.3 + 0
    # 1,024 GPUs assessed x 30 min, not mitigated yet: the incident's own cost, apart.
    assert (
        lines[4] == "- Apart from what the incident cost (Summary): GPU-hours lost 512 · requests failed not recorded"
    )


async def test_an_unknown_price_makes_the_sum_unknown_never_zero(app, cells):
    cell = cells.east3
    js = samples.jobset()
    js["metadata"]["annotations"] = {CHECKPOINT: iso(T0 - 2400)}
    cell.put(js)
    cell.put(samples.jobset(name="finetune-70b"))  # no checkpoint annotation: its progress is unknown
    inc = await app.declare(roles={"ops": OPS})
    for name in ("pretrain-405b", "finetune-70b"):
        out = await say(app, f"lever jobset-suspend {NS}/{name} --cell us-east-3", OPS, inc.channel_id)
        assert "applied and verified" in out, out
    lines = section(await build(app.services, inc.id))
    assert "unknown (last checkpoint unknown: no training.corp/last-checkpoint annotation)" in lines[1]
    assert lines[2] == (
        "- GPU-hours the mitigations cost in all: unknown (1 of 2 priced in GPU-hours could not be read; "
        "the others add up to 341 GPU-hours)"
    ), lines
