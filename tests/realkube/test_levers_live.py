"""Every lever on a real kube-apiserver, as the bot's own ServiceAccount (a TokenRequest token of
firebreak/firebreak) with deploy/overlays/example applied by `kubectl apply -k`: dry run (dryRun=All:
the server's RBAC, admission and schema answer, nothing stored), pull, verify and undo each. What
the levers wrote is read back as admin: changed as planned, `firebreak` in managedFields, restored
by undo. tests/deploy/test_rbac_live.py runs the same levers on the emulator with the ClusterRole's
rules; here the real RBAC authorizer and admission chain decide.

The controllers a bare API server lacks (Kueue's Workload admission, Argo Rollouts' abort, KEDA's
pause) are the stand-ins in fbworld.realkube, running against this server."""

from __future__ import annotations

import asyncio
import json
import re
import ssl
from typing import Any

import aiohttp
import pytest

from fbworld.kube import samples
from levers import hooks
from levers.catalogue import LEVERS
from levers.executor import execute_approved
from levers.kube import FIELD_MANAGER
from levers.store import lever_store
from tests.realkube.conftest import OVERLAY
from tests.support.deploy import DEPLOY
from tests.support.kube_apiserver import BOT_NS, BOT_SA, KubeAPIServer, resource_name
from tests.support.levers import MODEL, OPS, PROVENANCE, SEC, replace_hook, say

NS = "serve-chat"
NAMESPACES = ("serve-chat", "train-llm", "sbx-tenant-acme", "toolgw", "edge")
QUARANTINE = "ir.corp/quarantine"


def scaled(name: str, api_version: str, kind: str, target: str) -> dict:
    so = samples.scaled_object(name=name, target=target)
    so["spec"]["scaleTargetRef"] = {"apiVersion": api_version, "kind": kind, "name": target}
    return so


def quarantine_policy() -> dict:
    """The deny-all NetworkPolicy a platform team keeps beside agent sandboxes for the quarantine label."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "quarantine-deny-all", "namespace": "sbx-tenant-acme"},
        "spec": {"podSelector": {"matchLabels": {QUARANTINE: "true"}}, "policyTypes": ["Ingress", "Egress"]},
    }


def seeds() -> list[dict]:
    """One cell's objects (overlays/example: the home cluster is the cell and the fleet context)."""
    so = samples.scaled_object()
    so["spec"]["scaleTargetRef"] = {"name": "llm-70b"}  # KEDA's default target: apps/v1 Deployment
    rollout = samples.rollout()
    return [
        samples.cluster_queue(),
        samples.deployment(name="llm-70b", replicas=6),
        so,
        samples.stateful_set(NS, "llm-sts"),
        scaled("llm-sts", "apps/v1", "StatefulSet", "llm-sts"),
        scaled("llm-ro", "argoproj.io/v1alpha1", "Rollout", "llm-70b"),
        rollout,
        *samples.rollout_replica_sets(rollout),
        samples.jobset(),
        samples.kueue_jobset(name="finetune-8b"),
        samples.pod(),
        quarantine_policy(),
        samples.configmap_toolgw(),
        *(samples.gpu_node(f"gpu-a3-{i:04d}", "us-east-3") for i in range(10)),
        samples.http_route(backends={"cell-us-east-1": 50, "cell-us-east-2": 50, "cell-us-east-3": 0}),
        samples.node_health_check(pause_requests=["maintenance-window-42"]),  # another party's entry stays
    ]


@pytest.fixture
def seeded(deployed: KubeAPIServer) -> Any:
    s = deployed
    for ns in NAMESPACES:
        s.namespace(ns)
    objs = seeds()
    s.put(*objs)
    yield s
    for o in reversed(objs):
        s.delete(resource_name(o), o["metadata"]["name"], namespace=o["metadata"].get("namespace"))
    for ns in ("train-llm",):  # the Workloads Kueue's stand-in made (no garbage collector here)
        s.kubectl("delete", "workloads.kueue.x-k8s.io", "--all", "-n", ns, "--ignore-not-found")


def req_of(reply: str) -> str:
    found = re.search(r"\bREQ-\d+\b", reply)
    assert found, reply
    return found.group(0)


# (command, who pulls it, the object it changes: resource, namespace, name): every lever, each scale-target
# kind keda-pause is granted, and both ways jobset-suspend stops a JobSet (spec.suspend; a Kueue-queued
# one through its Workload, found by the stand-in's owner reference).
CQ = ("clusterqueue.kueue.x-k8s.io", None, "research-h100")
SO = "scaledobject.keda.sh"
PULLS = [
    ("lever kueue-hold research-h100 --cell us-east-3", OPS, CQ),
    ("lever kueue-hold-drain research-h100 --cell us-east-3", OPS, CQ),
    ("lever keda-pause serve-chat/llm-70b --cell us-east-3", OPS, (SO, NS, "llm-70b")),  # paused=true
    # The count option reads the scale target: a Deployment, a StatefulSet, an Argo Rollout.
    ("lever keda-pause serve-chat/llm-70b --cell us-east-3 replicas=current", OPS, (SO, NS, "llm-70b")),
    ("lever keda-pause serve-chat/llm-sts --cell us-east-3 replicas=current", OPS, (SO, NS, "llm-sts")),
    ("lever keda-pause serve-chat/llm-ro --cell us-east-3 replicas=current", OPS, (SO, NS, "llm-ro")),
    ("lever node-quarantine gpu-a3-0001 --cell us-east-3 reason=xid79", OPS, ("node", None, "gpu-a3-0001")),
    (
        "lever remediation-pause nhc-gpu --cell us-east-3",
        OPS,
        ("nodehealthcheck.remediation.medik8s.io", None, "nhc-gpu"),
    ),
    (
        "lever jobset-suspend train-llm/pretrain-405b --cell us-east-3",
        OPS,
        ("jobset.jobset.x-k8s.io", "train-llm", "pretrain-405b"),
    ),
    (
        "lever jobset-suspend train-llm/finetune-8b --cell us-east-1",  # Kueue-queued: its Workload
        OPS,
        ("workload.kueue.x-k8s.io", "train-llm", None),
    ),
    (
        "lever killswitch toolgw/toolgw-flags --cell us-east-3 tenant=acme level=read",
        SEC,
        ("configmap", "toolgw", "toolgw-flags"),
    ),
    (
        "lever sandbox-quarantine sbx-tenant-acme/sess-7f3a9c-0 --cell us-east-3",
        SEC,
        ("pod", "sbx-tenant-acme", "sess-7f3a9c-0"),
    ),
    (
        "lever route-weight edge/chat-global backend=cell-us-east-1",  # the fleet context
        OPS,
        ("httproute.gateway.networking.k8s.io", "edge", "chat-global"),
    ),
    (
        "lever rollout-abort serve-chat/llm-70b --cell us-east-3",
        MODEL,
        ("rollout.argoproj.io", NS, "llm-70b"),
    ),  # no undo
]


def read_back(s: KubeAPIServer, target: tuple[str, str | None, str | None]) -> dict:
    res, ns, name = target
    if name is None:  # the one Workload in the namespace (Kueue names it by a hash of the owner's uid)
        items = json.loads(s.kubectl("get", res, "-n", ns or "default", "-o", "json", "--show-managed-fields"))["items"]
        assert len(items) == 1, [i["metadata"]["name"] for i in items]
        return items[0]
    return s.get(res, name, ns)


def desired(obj: dict) -> dict:
    """What a lever changes and its undo restores: spec, labels, annotations (not Firebreak's provenance
    annotations, which stay as the record of who changed it), data; not status or bookkeeping."""
    meta = obj["metadata"]
    ann = {k: v for k, v in (meta.get("annotations") or {}).items() if k not in PROVENANCE}
    return {"spec": obj.get("spec"), "data": obj.get("data"), "labels": meta.get("labels") or {}, "annotations": ann}


def managers(obj: dict) -> set[str]:
    return {m["manager"] for m in obj["metadata"].get("managedFields") or []}


async def wait_admitted(s: KubeAPIServer, ns: str, seconds: float = 15.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while loop.time() < deadline:
        out = await asyncio.to_thread(s.kubectl, "get", "workloads.kueue.x-k8s.io", "-n", ns, "-o", "json")
        for wl in json.loads(out)["items"]:
            if any(
                c["type"] == "Admitted" and c["status"] == "True" for c in wl.get("status", {}).get("conditions") or []
            ):
                return
        await asyncio.sleep(0.1)
    raise AssertionError("Kueue's stand-in did not admit the JobSet")


async def test_every_lever_pulls_verifies_and_undoes_as_the_bots_serviceaccount(app, seeded, controllers):
    s: KubeAPIServer = seeded
    await wait_admitted(s, "train-llm")
    asked = []

    async def ask(svc, inc, rec):
        asked.append(rec)

    replace_hook(app, hooks.APPROVAL_REQUESTED, ask)
    inc = await app.declare(cells=("us-east-3", "us-east-1"), roles={"ops": OPS, "model": MODEL, "security": SEC})
    store = lever_store(app.services)

    for command, user, target in PULLS:
        before = await asyncio.to_thread(read_back, s, target)
        dry = await say(app, f"{command} --dry-run", user, inc.channel_id, timeout=30)
        assert "(dry run)" in dry and "Nothing was changed" in dry, dry
        planned = await store.get(req_of(dry))
        assert planned.result["ok"] is True, (command, planned.result)  # the real server accepted each call
        after_dry = await asyncio.to_thread(read_back, s, target)
        assert after_dry["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"], command

        asked.clear()
        out = await say(app, command, user, inc.channel_id, timeout=30)
        req = req_of(out)
        if asked:  # needs approval: the IC approves
            assert "needs approval" in out, out
            rec = asked[-1]
            assert await store.transition(rec.id, {"pending_approval"}, "approved", approved_by="U_IC")
            out = (await execute_approved(app.services, rec.id, "U_IC")).message
        rec = await store.get(req)
        assert rec.state == "done" and rec.result.get("verified") is True, (command, out, rec.result)

        pulled = await asyncio.to_thread(read_back, s, target)
        assert FIELD_MANAGER in managers(pulled), (command, managers(pulled))
        assert (pulled["metadata"].get("annotations") or {}).get("firebreak.io/request") == req, command
        if "rollout-abort" in command:  # the status subresource only; Argo's stand-in handled it
            assert not before["status"].get("abort"), before["status"]
            assert pulled["status"]["abort"] is True and pulled["status"]["phase"] == "Degraded", pulled["status"]
            status_managers = {
                m["manager"] for m in pulled["metadata"]["managedFields"] if m.get("subresource") == "status"
            }
            assert {FIELD_MANAGER, "rollouts-controller"} <= status_managers, status_managers
            continue
        assert desired(pulled) != desired(before), f"{command}: nothing changed on the server"
        if not LEVERS[rec.lever].reversible:  # killswitch: only narrows; a person puts it back
            undo = await app.run(f"undo {req}", user=user, channel=inc.channel_id)
            assert "can't be undone by Firebreak" in undo and "To put it back: `kubectl" in undo, undo
            continue
        undo = await app.run(f"undo {req}", user=user, channel=inc.channel_id)
        gate = re.search(r"needs the IC's approval: (REQ-\d+) is on the approval card", undo)
        if gate:  # node-quarantine's return gate: this Prometheus has no DCGM series for the fleet context
            undo = await app.reply(
                await app.press("lever.approve", gate.group(1), user="U_IC", channel=inc.channel_id), timeout=30
            )
        assert "undone" in undo and (await store.get(req)).state == "undone", undo
        restored = await asyncio.to_thread(read_back, s, target)
        assert desired(restored) == desired(before), command


async def test_the_bots_serviceaccount_cannot_read_secrets(deployed: KubeAPIServer):
    """A real 403 from the server's RBAC, on the bot's own token, in its namespace and cluster-wide."""
    s = deployed
    ctx = ssl.create_default_context(cafile=str(s.ca_file))
    headers = {"Authorization": f"Bearer {s.bot_token}"}
    async with aiohttp.ClientSession(headers=headers) as http:
        for path in (f"/api/v1/namespaces/{BOT_NS}/secrets", "/api/v1/secrets", f"/api/v1/namespaces/{NS}/secrets/x"):
            async with http.get(s.url + path, ssl=ctx) as r:
                body = await r.json()
                assert r.status == 403, (path, r.status, body)
                assert body["reason"] == "Forbidden"
                assert f'User "system:serviceaccount:{BOT_NS}:{BOT_SA}" cannot ' in body["message"], body
                assert 'resource "secrets"' in body["message"], body
    can = await asyncio.to_thread(
        s.kubectl, "auth", "can-i", "get", "secrets", "-A", kubeconfig=s.bot_kubeconfig, check=False
    )
    assert can.strip() == "no"


async def until_can_i(s: KubeAPIServer, want: bool, *args: str, seconds: float = 10.0) -> None:
    """RBAC changes reach the authorizer through its informer, not at once: wait for the answer."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while loop.time() < deadline:
        out = await asyncio.to_thread(s.kubectl, "auth", "can-i", *args, kubeconfig=s.bot_kubeconfig, check=False)
        if (out.strip() == "yes") is want:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"can-i {' '.join(args)} is not {want} after {seconds}s")


async def test_without_its_rule_a_lever_gets_the_real_servers_403(app, seeded, controllers):
    """The negative control: deploy/'s Role in serve-chat less `rollouts/status`, and rollout-abort is refused by
    the real server's RBAC, naming what is missing, and nothing is stored (so the test above would catch a
    missing verb). The Role is re-applied from deploy/ afterwards."""
    s: KubeAPIServer = seeded
    role = await asyncio.to_thread(s.get, "role", "firebreak", NS)  # namespaced needs: a Role per namespace
    [i] = [n for n, r in enumerate(role["rules"]) if r.get("resources") == ["rollouts/status"]]
    ops = [
        {"op": "test", "path": f"/rules/{i}/resources", "value": ["rollouts/status"]},
        {"op": "remove", "path": f"/rules/{i}"},
    ]
    await asyncio.to_thread(s.kubectl, "patch", "role", "firebreak", "-n", NS, "--type", "json", "-p", json.dumps(ops))
    try:
        await until_can_i(s, False, "patch", "rollouts.argoproj.io", "--subresource", "status", "-n", NS)
        before = await asyncio.to_thread(s.get, "rollout.argoproj.io", "llm-70b", NS)
        asked = []

        async def ask(svc, inc, rec):
            asked.append(rec)

        replace_hook(app, hooks.APPROVAL_REQUESTED, ask)
        inc = await app.declare(roles={"model": MODEL})
        command = "lever rollout-abort serve-chat/llm-70b --cell us-east-3"
        out = await say(app, command, MODEL, inc.channel_id, timeout=30)
        if asked:  # one server is the cell and the fleet context (overlays/example): fleet-wide, approved
            store = lever_store(app.services)
            assert await store.transition(asked[-1].id, {"pending_approval"}, "approved", approved_by="U_IC")
            out = (await execute_approved(app.services, asked[-1].id, "U_IC")).message
        assert "403" in out and 'cannot patch resource "rollouts/status"' in out, out
        assert (await lever_store(app.services).get(req_of(out))).state != "done"
        after = await asyncio.to_thread(s.get, "rollout.argoproj.io", "llm-70b", NS)
        assert not after["status"].get("abort") and after["status"] == before["status"]
    finally:
        await asyncio.to_thread(s.apply_k, DEPLOY / OVERLAY)
    await until_can_i(s, True, "patch", "rollouts.argoproj.io", "--subresource", "status", "-n", NS)
