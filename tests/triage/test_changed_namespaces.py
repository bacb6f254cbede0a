"""`changed` reads pod templates only where the policy says (issue 35, item 14): Rollouts and their
ReplicaSets (whose pod templates carry env values) are listed in rollout-abort's namespaces
(policies/levers.yaml), never cluster-wide, so a Rollout elsewhere, and its env, is never read;
deploy/rbac grants those lists in a Role there only."""

from __future__ import annotations

import json

from fbworld.kube import samples
from tests.support.harness import T0
from tests.support.triage import DEGRADED, posted, rfc3339, say

SECRET = "hunter2-other-team"


def canary(cell, ns: str, name: str) -> None:
    ro = samples.rollout(ns=ns, name=name)
    ro["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": "DB_PASSWORD", "value": SECRET}]
    ro = cell.put(ro)
    stable, new = samples.rollout_replica_sets(ro)
    stable["metadata"]["creationTimestamp"] = rfc3339(T0 - 3 * 86400)
    new["metadata"]["creationTimestamp"] = rfc3339(T0 - 7200)
    cell.put(stable)
    cell.put(new)


async def test_changed_lists_rollouts_only_in_the_policys_namespaces(app, cells):
    c = cells.degraded
    canary(c, "serve-chat", "llm-70b")
    canary(c, "other-team", "their-model")
    inc = await app.declare(cells=(DEGRADED,))
    c.requests.clear()

    await say(app, "changed", "U_ANYONE", inc.channel_id)
    msg = posted(app, inc.channel_id, f"What changed in the last 6h for {inc.id}")
    shown = json.dumps(msg)
    assert "serve-chat/llm-70b" in shown, shown
    assert "their-model" not in shown and SECRET not in shown

    paths = [r.path for r in c.requests if r.method == "GET"]
    listed = [p for p in paths if p.endswith(("/rollouts", "/replicasets"))]
    assert listed and all("/namespaces/serve-chat/" in p for p in listed), listed
