"""Evidence keeps no secret (issue 35, item 9): a container's env values, a ConfigMap's data and kubectl's
last-applied-configuration are dropped (only their SHA-256 kept), and every other string is scrubbed as the
audit's entries are. What is stored, what `firebreak evidence` prints and the digest in lever.apply agree."""

from __future__ import annotations

import hashlib
import json

import pytest

from fbworld.kube import samples
from levers import evidence
from tests.support.core import cli, jsonl
from tests.support.harness import audit_entries
from tests.support.levers import MODEL, SEC, say

PASSWORD = "hunter2-db-password"  # no pattern names it: only dropping it keeps it out
SLACK = "xoxb-2417-1234567890-AbCdEfGhIjKlMnOp"
AWS = "AKIAQWERTYUIOPASDFGH"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture
def policy_overrides() -> dict:
    return {"rollout_verify_seconds": 1, "api_timeout_seconds": 2}


async def stored_anywhere(app, *secrets: str) -> list[str]:
    """The secrets found in any Redis value."""
    r = app.services.redis
    found = []
    async for k in r.scan_iter("*"):
        kind = await r.type(k)
        kind = kind.decode() if isinstance(kind, bytes) else kind
        if kind == "hash":
            blob = json.dumps({str(f): str(v) for f, v in (await r.hgetall(k)).items()})
        elif kind == "string":
            blob = str(await r.get(k))
        else:
            continue
        found += [f"{k}: {s}" for s in secrets if s in blob and "evidence" in str(k)]
    return found


async def test_a_rollouts_env_values_and_last_applied_are_dropped_and_the_rest_scrubbed(app, cells, redis_url):
    ro = samples.rollout_canary(traffic_routing=False)
    pod = ro["spec"]["template"]["spec"]
    pod["containers"][0]["env"] = [
        {"name": "DB_PASSWORD", "value": PASSWORD},
        {"name": "API_KEY", "valueFrom": {"secretKeyRef": {"name": "llm-keys", "key": "api"}}},
    ]
    pod["containers"][0]["args"] = [f"--slack-token={SLACK}"]
    ro["metadata"].setdefault("annotations", {})[LAST_APPLIED] = json.dumps(
        {"spec": {"template": {"spec": {"containers": [{"env": [{"name": "DB_PASSWORD", "value": PASSWORD}]}]}}}}
    )
    ro["metadata"]["annotations"]["ops.corp/aws"] = f"rotated {AWS}"
    stored = cells.east3.put(ro)
    for rs in samples.rollout_replica_sets(stored):
        cells.east3.put(rs)
    inc = await app.declare(roles={"model": MODEL})

    out = await say(
        app, f"lever rollout-abort serve-chat/{stored['metadata']['name']} --cell us-east-3", MODEL, inc.channel_id
    )
    assert "applied" in out, out
    [kept] = await evidence.read(app.services.redis, inc.id, "REQ-1")
    obj = kept["object"]
    [env, ref] = obj["spec"]["template"]["spec"]["containers"][0]["env"]
    pointer = "/spec/template/spec/containers/0/env/0/value"
    assert env == {"name": "DB_PASSWORD", "value": f"[dropped, sha256 {sha(PASSWORD)}]"}
    assert ref == {"name": "API_KEY", "valueFrom": {"secretKeyRef": {"name": "llm-keys", "key": "api"}}}
    last = ro["metadata"]["annotations"][LAST_APPLIED]
    assert kept["dropped"] == {
        pointer: sha(PASSWORD),
        "/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration": sha(last),
    }
    assert obj["spec"]["template"]["spec"]["containers"][0]["args"] == ["--slack-token=[redacted Slack token]"]
    assert obj["metadata"]["annotations"]["ops.corp/aws"] == "rotated [redacted AWS access key]"
    assert not await stored_anywhere(app, PASSWORD, SLACK, AWS)

    [applied] = [e for e in await audit_entries(app, inc.id) if e["action"] == "lever.apply"]
    code, stdout, stderr = await cli(redis_url, "evidence", inc.id, "REQ-1")
    assert code == 0, stderr
    [printed] = jsonl(stdout)
    assert printed["digest"] == applied["detail"]["evidence"]["sha256"] == kept["digest"]
    assert PASSWORD not in stdout and SLACK not in stdout


async def test_a_configmaps_data_is_kept_as_digests(app, cells):
    cells.east3.put(samples.configmap_toolgw(data={"default.max_side_effect": "read", "vendor.api_key": PASSWORD}))
    inc = await app.declare(roles={"security": SEC})
    out = await say(
        app, "lever killswitch toolgw/toolgw-flags --cell us-east-3 tenant=newco level=none", SEC, inc.channel_id
    )
    assert "applied and verified" in out, out
    [kept] = await evidence.read(app.services.redis, inc.id, "REQ-1")
    assert kept["object"]["data"] == {
        "default.max_side_effect": f"[dropped, sha256 {sha('read')}]",
        "vendor.api_key": f"[dropped, sha256 {sha(PASSWORD)}]",
    }
    assert kept["dropped"] == {"/data/default.max_side_effect": sha("read"), "/data/vendor.api_key": sha(PASSWORD)}
    assert not await stored_anywhere(app, PASSWORD)
