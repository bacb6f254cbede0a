"""rollout-abort unverified without Argo's controller (verified: test_rollout_verify.py), keda-pause on
a Rollout target, the policy file."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.policy.loader import PolicyError, load_policy
from fbworld.kube import samples
from levers.catalogue import LEVERS
from levers.kube import Kube
from levers.store import lever_store
from tests.support.harness import audit_entries, start_app
from tests.support.lever_fixtures import write_policy
from tests.support.levers import MODEL, OPS, channel_texts, say


async def test_rollout_abort_unverified_says_what_it_read(app, cells):
    inc = await app.declare(roles={"model": MODEL})
    out = await say(app, "lever rollout-abort serve-chat/llm-70b", MODEL, inc.channel_id)
    assert "NOT verified: abort set, but Argo has not marked it aborted (phase Paused: CanaryPauseStep)" in out, out
    assert out.startswith("REQ-1 rollout-abort serve-chat/llm-70b (us-east-3): applied, rv "), out
    assert out in channel_texts(app, inc.channel_id)
    rec = await lever_store(app.services).get("REQ-1")
    assert rec.state == "done" and rec.result["ok"] is False and rec.result["verified"] is False
    entries = await audit_entries(app, inc.id)
    [done] = [e for e in entries if e["action"] == "lever.done"]
    assert done["detail"]["verified"] is False and "but NOT verified" in done["detail"]["message"]
    [cmd] = [e for e in entries if e["action"] == "command.lever"]
    assert cmd["detail"]["result"] == "error"  # applied but unverified is not reported as a success


async def test_keda_pause_reads_a_rollout_target_scale(app, cells):
    cells.east3.put(samples.scaled_object(name="llm-8b", target="llm-70b"))  # targets the Rollout (8 replicas)
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, "lever keda-pause serve-chat/llm-8b replicas=current", OPS, inc.channel_id)
    assert "paused at 8 replicas (Rollout llm-70b)" in out, out
    assert cells.east3.find_requests("GET", r"/apis/argoproj.io/v1alpha1/namespaces/serve-chat/rollouts/llm-70b/scale$")
    so = cells.east3.get("scaledobject", "llm-8b", "serve-chat")
    assert so["metadata"]["annotations"]["autoscaling.keda.sh/paused-replicas"] == "8"


def test_shipped_policy_has_the_documented_defaults():
    # docs/security-model.md, "Who may do what" (roles, approval); docs/levers.md (route-weight steps).
    pol = load_policy(Path(__file__).resolve().parents[2] / "policies").levers
    assert pol.fleet_context == "global"
    assert pol.levers["rollout-abort"].roles == ["model"]
    assert pol.levers["killswitch"].roles == ["security"] and pol.levers["sandbox-quarantine"].roles == ["security"]
    assert all(
        pol.levers[n].roles == ["ops"]
        for n in ("kueue-hold", "kueue-hold-drain", "keda-pause", "route-weight", "node-quarantine", "jobset-suspend")
    )
    assert all("ic" not in r.roles for r in pol.levers.values())
    assert pol.levers["kueue-hold-drain"].needs_approval
    assert pol.route_weight.steps_percent == [100, 50, 0] and pol.route_weight.min_dwell_minutes == 5


@pytest.mark.parametrize(
    "override,expect",
    [
        ({"levers": {"kueue-hold": {"roles": ["wizard"]}}}, "unknown role"),
        ({"route_weight": {"steps_percent": [100, 0, 50]}}, "steps must start at 100"),
        ({"headroom": {"query": "up"}}, "must contain $cell"),
        ({"levers": {"kueue-yolo": {"roles": ["ops"]}}}, "unknown lever"),
    ],
)
def test_bad_policy_is_refused_with_file_and_line(tmp_path, override, expect):
    d = write_policy(tmp_path, **override)
    with pytest.raises(PolicyError) as err:
        load_policy(d, levers=LEVERS)
    msg = str(err.value)
    assert msg.startswith(f"{d / 'levers.yaml'}:") and expect in msg, msg


async def test_app_cleanup_closes_the_kube_clients(slack, redis_url, clock, cells, tmp_path):
    # Its own app, not the `app` fixture: the test is about what stopping it does.
    app = await start_app(
        slack, redis_url, clock, kubeconfig=str(cells.kubeconfig), firebreak_policy_dir=str(write_policy(tmp_path))
    )
    inc = await app.declare(roles={"ops": OPS})
    assert "applied and verified" in await say(app, "lever kueue-hold research-h100", OPS, inc.channel_id)
    kube = app.services.clusters
    assert isinstance(kube, Kube)  # the implementation's sessions: what cleanup must close
    sessions = [c.api.rest_client.pool_manager for c in kube._clients.values()]
    assert sessions and not any(s.closed for s in sessions)
    await app.stop()
    assert all(s.closed for s in sessions)
