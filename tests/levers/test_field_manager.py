"""Every write of every lever (and of its undo) names the field manager `firebreak`, so GitOps
controllers (Argo CD, Flux) and `kubectl get --show-managed-fields` see who changed what."""

from __future__ import annotations

import asyncio
import json

import pytest

from levers import hooks
from levers.catalogue import LEVERS
from levers.executor import execute_approved
from levers.store import lever_store
from tests.support.levers import MODEL, OPS, SEC, kubectl, replace_hook, say

# lever -> (command, user, cell attribute, kube context)
CASES = {
    "kueue-hold": ("lever kueue-hold research-h100 --cell us-east-3", OPS, "east3", "us-east-3"),
    "kueue-hold-drain": ("lever kueue-hold-drain research-h100 --cell us-east-3", OPS, "east3", "us-east-3"),
    "keda-pause": ("lever keda-pause serve-chat/llm-70b --cell us-east-3", OPS, "east3", "us-east-3"),
    "node-quarantine": ("lever node-quarantine gpu-a3-0001 --cell us-east-3 reason=xid79", OPS, "east3", "us-east-3"),
    "jobset-suspend": ("lever jobset-suspend train-llm/pretrain-405b --cell us-east-3", OPS, "east3", "us-east-3"),
    "killswitch": (
        "lever killswitch toolgw/toolgw-flags --cell us-east-3 tenant=acme level=read",
        SEC,
        "east3",
        "us-east-3",
    ),
    "sandbox-quarantine": (
        "lever sandbox-quarantine sbx-tenant-acme/sess-7f3a9c-0 --cell us-east-3",
        SEC,
        "east3",
        "us-east-3",
    ),
    "rollout-abort": ("lever rollout-abort serve-chat/llm-70b --cell us-east-3", MODEL, "east3", "us-east-3"),
    "route-weight": ("lever route-weight edge/chat-global backend=cell-us-east-1", OPS, "fleet", "global"),
}


@pytest.fixture
def policy_overrides() -> dict:
    return {"rollout_verify_seconds": 1, "api_timeout_seconds": 2}


@pytest.fixture
def app_settings(request) -> dict:
    """route-weight checks the receivers' headroom: give it the real Prometheus."""
    if request.node.callspec.params.get("lever") == "route-weight":
        return {"prometheus_url": request.getfixturevalue("prometheus").url}
    return {}


def writes(cell) -> list:
    return [r for r in cell.requests if r.method != "GET"]


async def managers(cells, context: str, path: str) -> list[tuple[str, str, str | None]]:
    """(manager, operation, subresource) of each managedFields entry, as the API server serves them."""
    obj = json.loads(await kubectl(cells.kubeconfig, context, "get", "--raw", path))
    return [(m["manager"], m["operation"], m.get("subresource")) for m in obj["metadata"].get("managedFields") or []]


@pytest.mark.parametrize("lever", sorted(CASES))
async def test_every_write_names_the_field_manager(lever, app, cells):
    command, user, where, context = CASES[lever]
    cell = getattr(cells, where)
    asked = []

    async def ask(svc, inc_, rec):
        asked.append(rec)

    replace_hook(app, hooks.APPROVAL_REQUESTED, ask)
    if lever == "jobset-suspend":  # a Kueue-managed JobSet is stopped through its Workload
        cell.start_controller("kueue", interval=0.1)
        for _ in range(100):
            if cell.list("workloads", "train-llm"):
                break
            await asyncio.sleep(0.05)
    inc = await app.declare(roles={"ops": OPS, "model": MODEL, "security": SEC})
    cell.requests.clear()
    out = await say(app, command, user, inc.channel_id)
    if asked:
        assert "needs approval" in out, out
        assert await lever_store(app.services).transition("REQ-1", {"pending_approval"}, "approved", approved_by="U_IC")
        out = (await execute_approved(app.services, "REQ-1", "U_IC")).message
    assert out.startswith(f"REQ-1 {lever} ") and "applied" in out, out

    sent = writes(cell)
    assert sent and all(r.query.get("fieldManager") == "firebreak" for r in sent), [(r.path, r.query) for r in sent]
    for path in {r.path for r in sent if r.status == 200}:
        main = path.removesuffix("/status")
        sub = "status" if path.endswith("/status") else None
        assert ("firebreak", "Update", sub) in await managers(cells, context, main), path

    rec = await lever_store(app.services).get("REQ-1")
    if rec is not None and LEVERS[lever].reversible:  # rollout-abort, killswitch: a person puts them back
        cell.requests.clear()
        assert "undone" in await app.run("undo REQ-1", user=user, channel=inc.channel_id)
        undo = writes(cell)
        assert undo and all(r.query.get("fieldManager") == "firebreak" for r in undo), [(r.path, r.query) for r in undo]
