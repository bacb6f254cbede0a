"""`--dry-run` sends the plan's real request(s) with dryRun=All: the API server's RBAC, admission and
schema checks answer in the reply, nothing is stored, and no budget is taken."""

from __future__ import annotations

import pytest

from fbworld.kube.auth import Rule
from levers.store import lever_store
from tests.support.harness import audit_entries
from tests.support.levers import MODEL, OPS, say


@pytest.fixture
def policy_overrides() -> dict:
    return {"rollout_verify_seconds": 1, "api_timeout_seconds": 2, "node_quarantine": {"per_cell_per_hour": 1}}


def writes(cell) -> list:
    return [r for r in cell.requests if r.method != "GET"]


async def test_dry_run_sends_the_planned_request_and_stores_nothing(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    original = cells.east3.get("clusterqueue", "research-h100")
    cells.east3.requests.clear()
    out = await say(app, "lever kueue-hold research-h100 --cell us-east-3 --dry-run", OPS, inc.channel_id)
    assert "(dry run)" in out and "Nothing was changed." in out, out
    assert "The API server accepted it (dryRun=All: RBAC, admission and schema checked; nothing stored)." in out
    rec = await lever_store(app.services).get("REQ-1")
    assert rec.state == "planned"
    [sent] = writes(cells.east3)
    [call] = rec.plan["calls"]
    assert (sent.method, sent.path, sent.content_type, sent.body) == (
        call["method"],
        call["path"],
        call["content_type"],
        call["body"],
    )
    assert sent.query == {"dryRun": "All", "fieldManager": "firebreak"} and sent.status == 200
    assert cells.east3.get("clusterqueue", "research-h100") == original  # resourceVersion and managedFields too


async def test_dry_run_shows_the_api_servers_refusal(app, cells):
    """A Role that may patch Rollouts but not rollouts/status: the abort's second call is refused."""
    cells.east3.allow_only(Rule(["get", "list", "watch", "patch"], ["argoproj.io"], ["rollouts"]))
    inc = await app.declare(roles={"model": MODEL})
    original = cells.east3.get("rollout", "llm-70b", "serve-chat")
    out = await say(app, "lever rollout-abort serve-chat/llm-70b --cell us-east-3 --dry-run", MODEL, inc.channel_id)
    assert (
        "The API server REFUSED it (dryRun=All), so a real pull would fail: "
        "PATCH /apis/argoproj.io/v1alpha1/namespaces/serve-chat/rollouts/llm-70b/status: 403 Forbidden: "
        'rollouts.argoproj.io "llm-70b" is forbidden: User "fake-user" cannot patch resource "rollouts/status" '
        'in API group "argoproj.io"'
    ) in out, out
    assert out.endswith("Nothing was changed."), out
    assert [(r.path.rsplit("/", 1)[-1], r.query.get("dryRun"), r.status) for r in writes(cells.east3)] == [
        ("llm-70b", "All", 200),
        ("status", "All", 403),
    ]
    assert cells.east3.get("rollout", "llm-70b", "serve-chat") == original
    [entry] = [e for e in await audit_entries(app, inc.id) if e["action"] == "command.lever"]
    assert entry["detail"]["result"] == "error" and entry["detail"]["state"] == "planned"
    assert [a["accepted"] for a in entry["detail"]["dry_run"]] == [True, False]
    assert entry["detail"]["dry_run"][1]["code"] == 403


async def test_dry_runs_take_no_budget(app, cells):
    """per_cell_per_hour is 1 here: two dry runs, then the one real quarantine the budget allows."""
    inc = await app.declare(roles={"ops": OPS})
    for node in ("gpu-a3-0001", "gpu-a3-0002"):
        out = await say(app, f"lever node-quarantine {node} reason=xid79 --dry-run", OPS, inc.channel_id)
        assert "The API server accepted it" in out, out
    assert not [r for r in writes(cells.east3) if r.query.get("dryRun") != "All"]
    out = await say(app, "lever node-quarantine gpu-a3-0001 reason=xid79", OPS, inc.channel_id)
    assert "applied and verified" in out, out
    out = await say(app, "lever node-quarantine gpu-a3-0002 reason=xid79", OPS, inc.channel_id)
    assert "Quarantine budget" in out, out
