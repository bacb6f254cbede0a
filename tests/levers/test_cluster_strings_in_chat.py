"""Cluster strings reach chat inert (issue 35, item 10): whatever a ScaledObject's scaleTargetRef or an
Argo Rollout's status says, no `<!channel>`, `<!here>` or link in it is posted raw, and keda-pause refuses a
scaleTargetRef that names no scalable kind or no Kubernetes name."""

from __future__ import annotations

import pytest

from fbworld.kube import samples
from tests.support.levers import MODEL, OPS, channel_texts, patches, say

NS = "serve-chat"
PINGS = ("<!channel>", "<!here>", "<!everyone>", "<https://evil.example|")


def raw_ping(texts: list[str]) -> list[str]:
    return [t for t in texts if any(p in t for p in PINGS)]


@pytest.fixture
def policy_overrides() -> dict:
    return {"rollout_verify_seconds": 1, "api_timeout_seconds": 2}


def scaled_object(name: str, ref: dict) -> dict:
    so = samples.scaled_object(name=name)
    so["spec"]["scaleTargetRef"] = ref
    return so


@pytest.mark.parametrize(
    "ref, said",
    [
        # The attack in the issue: the name is posted in the effect line ("paused at ... (Deployment <!channel>").
        ({"name": "<!channel>"}, "is not a Kubernetes name"),
        (
            {"apiVersion": "apps/v1", "kind": "Deployment", "name": "llm-70b/../../secrets/x"},
            "is not a Kubernetes name",
        ),
        ({"apiVersion": "apps/v1", "kind": "<!here>", "name": "llm-70b"}, "not a kind KEDA can scale"),
        # A served kind with no /scale: nothing KEDA could scale.
        ({"apiVersion": "v1", "kind": "ConfigMap", "name": "llm-70b"}, "not a kind KEDA can scale"),
        ({"apiVersion": "<https://evil.example|apps/v1>", "kind": "Deployment", "name": "llm-70b"}, "apiVersion"),
    ],
)
async def test_keda_pause_refuses_a_scale_target_ref_that_is_not_a_scalable_kind_and_name(app, cells, ref, said):
    cells.east3.put(scaled_object("llm-odd", ref))
    original = cells.east3.get("scaledobject", "llm-odd", NS)
    inc = await app.declare(roles={"ops": OPS})
    cells.east3.requests.clear()

    out = await say(app, "lever keda-pause serve-chat/llm-odd --cell us-east-3", OPS, inc.channel_id)
    assert "not pulled, nothing changed" in out and said in out, out
    assert not patches(cells.east3)
    assert cells.east3.get("scaledobject", "llm-odd", NS) == original
    assert not raw_ping([out, *channel_texts(app, inc.channel_id)]), out


async def test_a_rollouts_status_message_is_posted_inert(app, cells):
    """Argo's status.message is quoted into the not-verified outcome posted in the incident channel."""
    ro = samples.rollout_canary(traffic_routing=False)
    ro["status"]["message"] = "<!channel> <https://evil.example|status page> CanaryPauseStep"
    stored = cells.east3.put(ro)
    for rs in samples.rollout_replica_sets(stored):
        cells.east3.put(rs)
    inc = await app.declare(roles={"model": MODEL})

    out = await say(
        app, f"lever rollout-abort {NS}/{stored['metadata']['name']} --cell us-east-3", MODEL, inc.channel_id
    )
    assert "but NOT verified" in out, out
    posted = channel_texts(app, inc.channel_id)
    assert any("&lt;!channel&gt;" in t for t in posted), posted  # shown, as text
    assert not raw_ping([out, *posted]), raw_ping([out, *posted])
