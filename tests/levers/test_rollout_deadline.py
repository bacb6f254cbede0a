"""rollout-abort's verify window (issue 34): Argo gives a rollout its spec.progressDeadlineSeconds, 600 s
when unset (argo-rollouts utils/defaults/defaults.go GetProgressDeadlineSecondsOrDefault, v1.10.1), so
the verdict is not settled by the pull's short wait: when Argo has not settled the abort by then,
Firebreak reads it again when that deadline ends, once, and posts the verdict."""

from __future__ import annotations

import asyncio

import pytest

from fbworld.kube import samples
from levers import recheck
from levers.store import lever_store
from tests.support.harness import audit_entries
from tests.support.levers import MODEL, channel_texts, say


@pytest.fixture
def policy_overrides() -> dict:
    return {"rollout_verify_seconds": 1, "api_timeout_seconds": 2}


def seed(cell, rollout: dict) -> str:
    stored = cell.put(rollout)
    for rs in samples.rollout_replica_sets(stored):
        cell.put(rs)
    return stored["metadata"]["name"]


async def settled_by_argo(cell, name: str) -> None:
    """The (emulated) Argo controller marks the abort and scales stable back."""
    cell.start_controller("argo", interval=0.05)
    for _ in range(200):
        ro = cell.get("rollout", name, "serve-chat")
        if str(ro["status"].get("message", "")).startswith("RolloutAborted") and not ro["status"].get(
            "updatedReplicas"
        ):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"Argo never settled the abort: {ro['status']}")


async def test_an_unset_progress_deadline_is_argos_600_seconds(app, cells):
    name = seed(cells.east3, samples.rollout_canary())  # no spec.progressDeadlineSeconds, as usual
    inc = await app.declare(roles={"model": MODEL})
    out = await say(app, f"lever rollout-abort serve-chat/{name} --cell us-east-3 --dry-run", MODEL, inc.channel_id)
    assert (
        "verify waits up to 1s for Argo to settle the abort (policy rollout_verify_seconds); if Argo has not "
        "settled it by then, Firebreak checks again when its progress deadline ends, 600s after applying "
        "(Argo's default progress deadline, 600s)"
    ) in out, out


async def test_the_verdict_is_read_again_once_when_the_deadline_ends(app, cells):
    name = seed(cells.east3, samples.rollout_canary())
    inc = await app.declare(roles={"model": MODEL})
    out = await say(app, f"lever rollout-abort serve-chat/{name} --cell us-east-3", MODEL, inc.channel_id)
    assert "but NOT verified: abort set, but Argo has not marked it aborted" in out, out
    assert "Argo may still settle it until 03:20 UTC (Argo's default progress deadline, 600s): Firebreak checks" in out
    await settled_by_argo(cells.east3, name)  # the model server took minutes: Argo settles it late

    app.clock.advance(599)
    await app.tick()
    assert not [t for t in channel_texts(app, inc.channel_id) if "checked again" in t]  # not before the deadline
    app.clock.advance(2)
    await app.tick()
    [posted] = [t for t in channel_texts(app, inc.channel_id) if "checked again" in t]
    assert posted.startswith(
        "REQ-1 rollout-abort serve-chat/llm-13b (us-east-3): checked again when the progress deadline "
        "(Argo's default progress deadline, 600s) ended: verified (aborted; RolloutAborted: "
    ), posted
    rec = await lever_store(app.services).get("REQ-1")
    assert rec.result["verified"] is True and rec.result["rechecked"] is True
    [entry] = [e for e in await audit_entries(app, inc.id) if e["action"] == recheck.ACTION]
    assert entry["detail"]["verified"] is True

    # A second delivery of the same job (a claimer presumed dead) posts nothing again.
    await app.services.scheduler.schedule(
        recheck.JOB, "REQ-1", app.clock.now(), {"incident": inc.id, "what": "rollout"}
    )
    await app.tick()
    assert len([t for t in channel_texts(app, inc.channel_id) if "checked again" in t]) == 1


async def test_the_deadline_follows_the_rollouts_progress_deadline_seconds(app, cells):
    ro = samples.rollout_canary()
    ro["spec"]["progressDeadlineSeconds"] = 8
    name = seed(cells.east3, ro)
    inc = await app.declare(roles={"model": MODEL})
    out = await say(app, f"lever rollout-abort serve-chat/{name} --cell us-east-3", MODEL, inc.channel_id)
    assert "(the rollout's progressDeadlineSeconds, 8s): Firebreak checks again then" in out, out
    app.clock.advance(9)
    await app.tick()  # Argo never settled it: said so, with what is missing
    [posted] = [t for t in channel_texts(app, inc.channel_id) if "checked again" in t]
    assert "ended: still NOT verified: Argo has not marked it aborted" in posted, posted
    rec = await lever_store(app.services).get("REQ-1")
    assert rec.result["verified"] is False and rec.state == "done"
