"""keda-pause only=scale-in (issue 34): KEDA's `paused-scale-in` annotation, which stops scale-in and keeps
scale-out. What is checked here on the emulated cell: the option's refusals, the plan and its price, and
that the lever verifies by KEDA's HPA, not by its own write: the emulated KEDA does not model
paused-scale-in, so there the pull is applied and NOT verified, naming the HPA it read. KEDA's own answer
(the HPA's scale-down Disabled) is proven on the real operator in tests/realkube/test_keda_real.py."""

from __future__ import annotations

from tests.support.levers import OPS, patches, say

NS = "serve-chat"
PAUSED_SCALE_IN = "autoscaling.keda.sh/paused-scale-in"


def annotate(cell, name: str, annotations: dict[str, str]) -> None:
    so = cell.get("scaledobject", name, NS)
    so["metadata"]["annotations"] = annotations
    cell.put(so)


async def test_only_scale_in_plans_kedas_paused_scale_in_and_names_its_price(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, "lever keda-pause serve-chat/llm-70b only=scale-in --dry-run", OPS, inc.channel_id)
    assert (
        "plan: scale-in paused (Deployment llm-70b keeps at least its replicas, scale-out goes on; "
        "autoscaling.keda.sh/paused-scale-in=true)" in out
    ), out
    assert (
        "• Deployment serve-chat/llm-70b kept from scaling in below: 6 replicas "
        "(its /scale now; scale-out goes on, up to maxReplicaCount 32)" in out
    ), out


async def test_only_scale_in_with_a_count_is_refused(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    writes = len(patches(cells.east3))
    out = await say(app, "lever keda-pause serve-chat/llm-70b only=scale-in replicas=3", OPS, inc.channel_id)
    assert "only=scale-in keeps the autoscaler scaling out; replicas= pins one count. Give one of them" in out, out
    assert len(patches(cells.east3)) == writes


async def test_only_takes_scale_in_alone(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, "lever keda-pause serve-chat/llm-70b only=scale-out", OPS, inc.channel_id)
    assert "`only`: Input should be 'scale-in'." in out, out


async def test_a_scale_in_pause_already_there_is_refused_and_false_is_not_one(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    annotate(cells.east3, "llm-70b", {PAUSED_SCALE_IN: "yes"})  # not a Go bool: KEDA takes it as true
    out = await say(app, "lever keda-pause serve-chat/llm-70b only=scale-in", OPS, inc.channel_id)
    assert "already carries autoscaling.keda.sh/paused-scale-in='yes', which KEDA reads as paused" in out, out
    annotate(cells.east3, "llm-70b", {PAUSED_SCALE_IN: "false"})
    out = await say(app, "lever keda-pause serve-chat/llm-70b only=scale-in --dry-run", OPS, inc.channel_id)
    assert "plan: scale-in paused" in out, out


async def test_a_full_pause_already_there_refuses_a_scale_in_pause(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    annotate(cells.east3, "llm-70b", {"autoscaling.keda.sh/paused": "true"})
    out = await say(app, "lever keda-pause serve-chat/llm-70b only=scale-in", OPS, inc.channel_id)
    assert "already carries autoscaling.keda.sh/paused='true', which KEDA reads as paused" in out, out


async def test_verify_reads_kedas_hpa_not_the_annotation_written(app, cells):
    """The emulated cell's KEDA keeps its HPA but does not model paused-scale-in (it sets no behavior):
    the annotation landed, scale-in is not stopped, and the outcome says so."""
    cell = cells.east3
    cell.start_controller("keda", interval=0.05)
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, "lever keda-pause serve-chat/llm-70b only=scale-in", OPS, inc.channel_id, timeout=30)
    assert "applied, rv " in out and " but NOT verified: " in out, out
    assert "autoscaling.keda.sh/paused-scale-in set, but KEDA's HPA serve-chat/keda-hpa-llm-70b" in out, out
    assert "is KEDA 2.18 or later running?" in out, out
    assert cell.get("scaledobject", "llm-70b", NS)["metadata"]["annotations"][PAUSED_SCALE_IN] == "true"
