"""Every lever in the catalogue against the fake API server: the object after apply equals what the
kubectl line an on-call would type by hand produces on an identical object; the wire carries exactly the
planned calls; undo restores the original exactly; --dry-run changes nothing."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from levers import hooks
from levers.catalogue import LEVERS
from levers.executor import execute_approved
from levers.store import lever_store
from tests.support.catalogue import assert_every_lever
from tests.support.harness import audit_entries
from tests.support.levers import KUBECTL, MODEL, OPS, SEC, comparable, kubectl, patches, replace_hook, say


@dataclass
class Case:
    command: str
    user: str
    kind: str
    name: str
    namespace: str | None
    kubectl: list[list[str]] | None  # typed by hand; None: `kubectl patch --type=json` with the plan's body
    effect: str
    cluster: str = "east3"  # which fake cell holds the object
    context: str = "us-east-3"


PAUSE_REFERENCE = '[{"op":"add","path":"/spec/pauseRequests/-","value":"firebreak:INC-1"}]'

CASES = {
    "kueue-hold": Case(
        "lever kueue-hold research-h100 --cell us-east-3",
        OPS,
        "clusterqueue",
        "research-h100",
        None,
        [["patch", "clusterqueue", "research-h100", "--type=merge", "-p", '{"spec":{"stopPolicy":"Hold"}}']],
        "stopPolicy=Hold",
    ),
    "kueue-hold-drain": Case(
        "lever kueue-hold-drain research-h100 --cell us-east-3",
        OPS,
        "clusterqueue",
        "research-h100",
        None,
        [["patch", "clusterqueue", "research-h100", "--type=merge", "-p", '{"spec":{"stopPolicy":"HoldAndDrain"}}']],
        "stopPolicy=HoldAndDrain",
    ),
    "keda-pause": Case(
        "lever keda-pause serve-chat/llm-70b --cell us-east-3",
        OPS,
        "scaledobject",
        "llm-70b",
        "serve-chat",
        [
            [
                "annotate",
                "scaledobject",
                "llm-70b",
                "-n",
                "serve-chat",
                "autoscaling.keda.sh/paused=true",
                "--overwrite",
            ]
        ],
        "paused at its current replicas",
    ),
    "node-quarantine": Case(
        "lever node-quarantine gpu-a3-0001 --cell us-east-3 reason=xid79 ticket=INC-4812",
        OPS,
        "node",
        "gpu-a3-0001",
        None,
        [
            ["taint", "nodes", "gpu-a3-0001", "gpu.corp/quarantine=xid79:NoSchedule", "--overwrite"],
            [
                "label",
                "nodes",
                "gpu-a3-0001",
                "gpu.corp/quarantine-reason=xid79",
                "gpu.corp/quarantine-ticket=INC-4812",
                "--overwrite",
            ],
        ],
        "gpu.corp/quarantine=xid79",
    ),
    "jobset-suspend": Case(
        "lever jobset-suspend train-llm/pretrain-405b --cell us-east-3",
        OPS,
        "jobset",
        "pretrain-405b",
        "train-llm",
        [["patch", "jobset", "pretrain-405b", "-n", "train-llm", "--type=merge", "-p", '{"spec":{"suspend":true}}']],
        "suspend=true",
    ),
    "killswitch": Case(
        "lever killswitch toolgw/toolgw-flags --cell us-east-3 tenant=acme level=read",
        SEC,
        "configmap",
        "toolgw-flags",
        "toolgw",
        [
            [
                "patch",
                "configmap",
                "toolgw-flags",
                "-n",
                "toolgw",
                "--type=merge",
                "-p",
                '{"data":{"acme.max_side_effect":"read"}}',
            ]
        ],
        "acme.max_side_effect=read",
    ),
    "sandbox-quarantine": Case(
        "lever sandbox-quarantine sbx-tenant-acme/sess-7f3a9c-0 --cell us-east-3",
        SEC,
        "pod",
        "sess-7f3a9c-0",
        "sbx-tenant-acme",
        [["label", "pod", "-n", "sbx-tenant-acme", "sess-7f3a9c-0", "ir.corp/quarantine=true"]],
        "ir.corp/quarantine=true",
    ),
    # NHC's brake: the list is replaced whole by a merge patch, so the reference appends with a JSON patch.
    "remediation-pause": Case(
        "lever remediation-pause nhc-gpu --cell us-east-3",
        OPS,
        "nodehealthcheck",
        "nhc-gpu",
        None,
        [["patch", "nodehealthcheck", "nhc-gpu", "--type=json", "-p", PAUSE_REFERENCE]],
        "spec.pauseRequests is cluster-upgrade-operator, firebreak:INC-1",
    ),
    # `kubectl argo rollouts abort` is a merge patch of {"status":{"abort":true}} on /status.
    "rollout-abort": Case(
        "lever rollout-abort serve-chat/llm-70b --cell us-east-3",
        MODEL,
        "rollout",
        "llm-70b",
        "serve-chat",
        [
            [
                "patch",
                "rollout",
                "llm-70b",
                "-n",
                "serve-chat",
                "--subresource=status",
                "--type=merge",
                "-p",
                '{"status":{"abort":true}}',
            ]
        ],
        "abort",
    ),
    # The global route table: the fleet context, approval, and a guarded JSON patch as the reference.
    "route-weight": Case(
        "lever route-weight edge/chat-global backend=cell-us-east-1",
        OPS,
        "httproute",
        "chat-global",
        "edge",
        None,
        "cell-us-east-1 weight 50→25",
        "fleet",
        "global",
    ),
}


@pytest.fixture
def app_settings(request) -> dict:
    """route-weight checks the receivers' headroom: give it the real Prometheus."""
    if request.node.callspec.params.get("lever") == "route-weight":
        return {"prometheus_url": request.getfixturevalue("prometheus").url}
    return {}


@pytest.fixture
def approvals(app):
    """Stand-in for the approval flow: record what was asked."""
    asked = []

    async def ask(svc, inc, rec):
        asked.append(rec)

    replace_hook(app, hooks.APPROVAL_REQUESTED, ask)
    return asked


async def _pull(app, cells, case: Case, channel: str, asked: list) -> str:
    out = await say(app, case.command, case.user, channel)
    if asked:  # needs approval: the IC approves, then the executor runs it
        assert "needs approval" in out, out
        rec = asked[-1]
        cell = getattr(cells, case.cluster)
        assert cell.requests and not patches(cell)  # planned from a read; nothing written yet
        assert await lever_store(app.services).transition(rec.id, {"pending_approval"}, "approved", approved_by="U_IC")
        res = await execute_approved(app.services, rec.id, "U_IC")
        out = res.message
    return out


def test_every_lever_has_a_case():
    assert_every_lever(CASES, "tests/levers/test_catalogue.py CASES")


@pytest.mark.parametrize("lever", sorted(LEVERS))
async def test_lever_matches_kubectl_and_undoes_exactly(lever, app, cells, approvals):
    case = CASES.get(lever)
    assert case is not None, f"{lever}: add its Case to CASES"
    cell = getattr(cells, case.cluster)
    inc = await app.declare(roles={"ops": OPS, "model": MODEL, "security": SEC})
    original = cell.get(case.kind, case.name, case.namespace)
    cell.requests.clear()

    # Dry run: the exact calls, and nothing written.
    dry = await say(app, case.command + " --dry-run", case.user, inc.channel_id)
    assert "(dry run)" in dry and "Nothing was changed" in dry and "Content-Type: application/" in dry, dry
    assert f"kubectl --context {case.context}" in dry
    assert not patches(cell)
    assert cell.get(case.kind, case.name, case.namespace) == original
    planned = await lever_store(app.services).get("REQ-1")
    lines = case.kubectl
    if lines is None:
        body = json.dumps(planned.plan["body"], separators=(",", ":"))
        assert planned.plan["content_type"] == "application/json-patch+json"
        assert planned.plan["kubectl"].startswith(f"kubectl --context {case.context} patch httproutes.")
        lines = [["patch", case.kind, case.name, "-n", case.namespace, "--type=json", "-p", body]]
    reference = None
    if KUBECTL:
        for args in lines:
            await kubectl(cells.kubeconfig, case.context, *args)
        reference = comparable(cell.get(case.kind, case.name, case.namespace))
        assert reference != comparable(original)
        cell.put(original)
        original = cell.get(case.kind, case.name, case.namespace)
    cell.requests.clear()
    approvals.clear()

    out = await _pull(app, cells, case, inc.channel_id, approvals)
    req_id = "REQ-2"
    assert out.startswith(f"{req_id} {lever} ") and "applied" in out and case.effect in out, out
    rec = await lever_store(app.services).get(req_id)
    assert rec is not None and rec.state == "done"
    # The wire carried exactly the planned calls.
    sent = patches(cell)
    assert [(r.method, r.path, r.content_type, r.body) for r in sent] == [
        (c["method"], c["path"], c["content_type"], c["body"]) for c in rec.plan["calls"]
    ]
    after = cell.get(case.kind, case.name, case.namespace)
    assert after["metadata"]["annotations"]["firebreak.io/request"] == req_id
    assert after["metadata"]["annotations"]["firebreak.io/incident"] == inc.id
    if reference is not None:
        assert comparable(after) == reference

    undo = await app.run(f"undo {req_id}", user=case.user, channel=inc.channel_id)
    if lever == "rollout-abort":
        assert "can't be undone by Firebreak" in undo and "deploy" in undo, undo
        return
    if lever == "killswitch":  # only narrows (deploy/admission): a person restores it, with the line given
        assert "can't be undone by Firebreak" in undo and "To put it back: `kubectl --context" in undo, undo
        assert (await lever_store(app.services).get(req_id)).state == "done"
        return
    assert f"{req_id} {lever}" in undo and "undone" in undo, undo
    restored = cell.get(case.kind, case.name, case.namespace)
    assert comparable(restored, drop_provenance=False) == comparable(original, drop_provenance=False)
    assert (await lever_store(app.services).get(req_id)).state == "undone"
    again = await app.run(f"undo {req_id}", user=case.user, channel=inc.channel_id)
    assert "only a lever that ran" in again
    actions = [e["action"] for e in await audit_entries(app, inc.id)]
    for a in ("command.lever", "lever.apply", "lever.done", "lever.undo", "command.undo"):
        assert a in actions, (a, actions)
