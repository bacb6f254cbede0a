"""rollout-abort (issue 25): a fully promoted rollout has nothing to abort (Argo v1.9 clears
status.abort there, rollout/controller.go newRolloutContext), so the plan refuses instead of
reporting NOT verified; and the verify window follows the rollout (its progressDeadlineSeconds, or a
per-rollout policy value), since a model server takes minutes to load."""

from __future__ import annotations

import asyncio

import pytest

from fbworld.kube import samples
from tests.support.levers import MODEL, channel_texts, patches, say


@pytest.fixture
def policy_overrides() -> dict:
    return {"rollout_verify_seconds": 1, "api_timeout_seconds": 2}


def seed(cell, rollout: dict) -> str:
    stored = cell.put(rollout)
    for rs in samples.rollout_replica_sets(stored):
        cell.put(rs)
    return stored["metadata"]["name"]


def promoted(name: str = "llm-13b") -> dict:
    ro = samples.rollout_canary(name=name)
    st = ro["status"]
    st.update(stableRS=st["currentPodHash"], currentStepIndex=4, phase="Healthy", message="", updatedReplicas=4)
    st.pop("pauseConditions")
    return ro


async def test_the_emulated_argo_clears_abort_on_a_fully_promoted_rollout(cells):
    name = seed(cells.east3, promoted())
    ro = cells.east3.get("rollout", name, "serve-chat")
    ro["status"].update(abort=True, abortedAt="2025-01-01T00:00:00Z")
    cells.east3.put(ro)
    cells.east3.start_controller("argo", interval=0.05)
    for _ in range(100):
        st = cells.east3.get("rollout", name, "serve-chat")["status"]
        if not st.get("abort"):
            break
        await asyncio.sleep(0.05)
    assert st.get("abort") is False and "abortedAt" not in st, st
    assert st["phase"] == "Healthy"  # never marked aborted


async def test_a_fully_promoted_rollout_is_refused_nothing_to_abort(app, cells):
    name = seed(cells.east3, promoted())
    cells.east3.start_controller("argo", interval=0.1)
    inc = await app.declare(roles={"model": MODEL})
    before = len(patches(cells.east3))
    out = await say(app, f"lever rollout-abort serve-chat/{name} --cell us-east-3", MODEL, inc.channel_id)
    assert "not pulled, nothing changed: nothing to abort: serve-chat/llm-13b is fully promoted" in out, out
    assert "NOT verified" not in out
    assert len(patches(cells.east3)) == before


async def _late_controller(cells, delay: float) -> None:
    await asyncio.sleep(delay)  # the new model server takes a while: Argo settles the abort late
    cells.east3.start_controller("argo", interval=0.1)


async def test_the_verify_window_follows_progress_deadline_seconds(app, cells):
    """The pull waits rollout_verify_seconds; the rollout's own deadline is when the verdict is read again
    (issue 34: tests/levers/test_rollout_deadline.py)."""
    ro = samples.rollout_canary()
    ro["spec"]["progressDeadlineSeconds"] = 8
    name = seed(cells.east3, ro)
    inc = await app.declare(roles={"model": MODEL})
    late = asyncio.create_task(_late_controller(cells, 2.5))
    out = await say(app, f"lever rollout-abort serve-chat/{name} --cell us-east-3", MODEL, inc.channel_id, timeout=20)
    await late
    assert "(the rollout's progressDeadlineSeconds, 8s): Firebreak checks again then" in out, out
    for _ in range(100):  # Argo settles it (the emulated controller runs every 0.1s)
        if cells.east3.get("rollout", name, "serve-chat")["status"].get("phase") == "Degraded":
            break
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.5)
    app.clock.advance(8)
    await app.tick()
    [again] = [t for t in channel_texts(app, inc.channel_id) if "checked again" in t]
    assert "verified (aborted; RolloutAborted: " in again, again


@pytest.mark.parametrize(
    "policy_overrides",
    [{"rollout_verify_seconds": 1, "api_timeout_seconds": 2, "rollout_verify_by_rollout": {"serve-chat/llm-13b": 8}}],
)
async def test_the_verify_window_can_be_set_per_rollout_in_policy(app, cells):
    name = seed(cells.east3, samples.rollout_canary())
    inc = await app.declare(roles={"model": MODEL})
    late = asyncio.create_task(_late_controller(cells, 2.5))
    out = await say(app, f"lever rollout-abort serve-chat/{name} --cell us-east-3", MODEL, inc.channel_id, timeout=20)
    await late
    assert "applied and verified (aborted; RolloutAborted: " in out, out
