"""NodeHealthCheck's stand-in (fbworld.realkube.nhc, following medik8s/node-healthcheck-operator v0.9.0)
on the real kube-apiserver, driven as admin: which nodes are unhealthy (selector, unhealthyConditions
with durations), the remediation objects it creates from the remediationTemplate (Self Node
Remediation's CRDs, world/fbworld/kube/crds) and deletes when nodes heal, minHealthy, its status, and
what spec.pauseRequests does. Then the product's remediation-pause lever through the real app,
against it.

Nodes are cluster-wide and the session's server is shared: each test selects only its own nodes
(a label of its own) and removes what it made."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fbworld.realkube import RealKube, run_controllers
from fbworld.realkube.nhc import NodeHealthChecks
from levers import hooks
from levers.executor import execute_approved
from levers.store import lever_store
from tests.support.kube_apiserver import KubeAPIServer
from tests.support.kube_apiserver import until_read as until
from tests.support.levers import OPS, replace_hook, say

TEMPLATE_NS = "medik8s-test"
TEMPLATE = "self-node-remediation-automatic-strategy-template"
SNR = "selfnoderemediation.self-node-remediation.medik8s.io"
NHC = "nodehealthcheck.remediation.medik8s.io"
LABEL = "firebreak.test/nhc"


def ago(seconds: float) -> str:
    return (datetime.now(UTC) - timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def node(name: str, group: str, ready: str = "True", since: float = 3600) -> dict:
    """A Node as its kubelet reports it: Ready since `since` seconds ago."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {LABEL: group, "kubernetes.io/hostname": name}},
        "spec": {},
        "status": {
            "conditions": [
                {
                    "type": "Ready",
                    "status": ready,
                    "reason": "KubeletReady" if ready == "True" else "KubeletNotReady",
                    "lastTransitionTime": ago(since),
                    "lastHeartbeatTime": ago(0),
                }
            ]
        },
    }


def set_ready(s: KubeAPIServer, name: str, ready: str, since: float) -> None:
    """What the kubelet (True/False) or the node lifecycle controller (Unknown) writes."""
    cond = node(name, "")["status"]["conditions"][0]
    cond.update(status=ready, lastTransitionTime=ago(since))
    s.kubectl(
        "patch", "node", name, "--subresource", "status", "--type", "merge",
        "-p", json.dumps({"status": {"conditions": [cond]}}),
    )  # fmt: skip


def template() -> dict:
    """Self Node Remediation's default template (NewRemediationTemplates), with the annotation SNR's
    mutating webhook adds to every template (no SNR webhook runs here)."""
    return {
        "apiVersion": "self-node-remediation.medik8s.io/v1alpha1",
        "kind": "SelfNodeRemediationTemplate",
        "metadata": {
            "name": TEMPLATE,
            "namespace": TEMPLATE_NS,
            "labels": {"remediation.medik8s.io/default-template": "true"},
            "annotations": {"remediation.medik8s.io/multiple-templates-support": "true"},
        },
        "spec": {"template": {"spec": {"remediationStrategy": "Automatic"}}},
    }


def nhc(name: str, group: str, min_healthy: Any = "51%", pauses: list[str] | None = None) -> dict:
    """Shaped like upstream's config/samples at v0.9.0, selecting this test's nodes."""
    spec: dict[str, Any] = {
        "selector": {"matchLabels": {LABEL: group}},
        "minHealthy": min_healthy,
        "unhealthyConditions": [
            {"type": "Ready", "status": "False", "duration": "300s"},
            {"type": "Ready", "status": "Unknown", "duration": "300s"},
        ],
        "remediationTemplate": {
            "apiVersion": "self-node-remediation.medik8s.io/v1alpha1",
            "kind": "SelfNodeRemediationTemplate",
            "name": TEMPLATE,
            "namespace": TEMPLATE_NS,
        },
    }
    if pauses is not None:
        spec["pauseRequests"] = pauses
    return {
        "apiVersion": "remediation.medik8s.io/v1alpha1",
        "kind": "NodeHealthCheck",
        "metadata": {"name": name},
        "spec": spec,
    }


def remediations(s: KubeAPIServer) -> list[dict]:
    return json.loads(s.kubectl("get", SNR, "-n", TEMPLATE_NS, "-o", "json"))["items"]


def for_node(s: KubeAPIServer, name: str) -> list[dict]:
    return [
        r
        for r in remediations(s)
        if (r["metadata"].get("annotations") or {}).get("remediation.medik8s.io/node-name") == name
    ]


async def passes(rec: NodeHealthChecks, n: int = 3) -> None:
    """`n` whole reconcile passes from now: long enough for anything the stand-in would do to show."""
    start = rec.passes
    await until(lambda: rec.passes, lambda p: p >= start + n + 1)


@pytest.fixture
def cluster(kube_apiserver: KubeAPIServer) -> Iterator[KubeAPIServer]:
    s = kube_apiserver
    s.namespace(TEMPLATE_NS)
    s.apply(template())
    yield s


@pytest.fixture
async def standin(cluster: KubeAPIServer) -> AsyncIterator[NodeHealthChecks]:
    """The stand-in on the real server as admin (its RBAC is not under test); a crashed pass fails the test."""
    s = cluster
    async with RealKube(s.url, s.admin_token, s.ca_file) as kube:
        rec = NodeHealthChecks(kube)
        task = asyncio.get_running_loop().create_task(run_controllers(kube, [rec], interval=0.1))
        yield rec
        crashed = task.done() and not task.cancelled() and task.exception()
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        except Exception:  # noqa: BLE001 - reported just below
            pass
        assert not crashed, f"the NodeHealthCheck stand-in crashed: {crashed!r}"


class Seeded:
    def __init__(self, s: KubeAPIServer, group: str) -> None:
        self.s, self.group, self.nodes, self.nhcs = s, group, [], []

    def nodes_(self, *specs: tuple[str, str, float]) -> None:
        for name, ready, since in specs:
            self.nodes.append(name)
            self.s.put(node(name, self.group, ready, since))

    def nhc(self, obj: dict) -> None:
        self.nhcs.append(obj["metadata"]["name"])
        self.s.apply(obj)

    def cleanup(self) -> None:
        for name in self.nhcs:
            self.s.delete(NHC, name)
        for r in remediations(self.s):
            if (r["metadata"].get("annotations") or {}).get("remediation.medik8s.io/node-name") in self.nodes:
                self.s.delete(SNR, r["metadata"]["name"], namespace=TEMPLATE_NS)
        if self.nodes:
            self.s.delete("node", *self.nodes)


@pytest.fixture
def seeded(cluster: KubeAPIServer, request: pytest.FixtureRequest) -> Iterator[Seeded]:
    group = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower())[-40:].strip("-")
    seeds = Seeded(cluster, group)
    yield seeds
    seeds.cleanup()


def status_of(s: KubeAPIServer, name: str) -> dict:
    return s.get(NHC, name).get("status") or {}


def cond(status: dict, ctype: str) -> dict:
    return next((c for c in status.get("conditions") or [] if c["type"] == ctype), {})


async def test_an_unhealthy_node_gets_a_remediation_that_goes_when_it_heals(seeded: Seeded, standin):
    s, g = seeded.s, seeded.group
    seeded.nodes_(
        (f"{g}-0", "True", 3600),
        (f"{g}-1", "True", 3600),
        (f"{g}-2", "True", 3600),
        (f"{g}-3", "False", 600),  # NotReady for 10 minutes: past the 300 s duration
        (f"{g}-4", "Unknown", 30),  # unknown for 30 s: not yet (soon matching)
    )
    seeded.nhc(nhc(g, g))

    got = await until(lambda: status_of(s, g), lambda st: st.get("phase") == "Remediating")
    assert (got["observedNodes"], got["healthyNodes"]) == (5, 3)  # the soon-matching node is not healthy
    assert got["reason"] == "NHC is remediating 1 nodes"
    enabled = cond(got, "Disabled")
    assert (enabled["status"], enabled["reason"], enabled["message"]) == (
        "False",
        "NodeHealthCheckEnabled",
        "No issues found, NodeHealthCheck is enabled.",
    )
    (entry,) = got["unhealthyNodes"]
    assert entry["name"] == f"{g}-3"
    (rem,) = entry["remediations"]
    (cr,) = await asyncio.to_thread(for_node, s, f"{g}-3")
    assert not await asyncio.to_thread(for_node, s, f"{g}-4")
    # generateName: SNR's template supports several templates, so `<node>-<random>`.
    assert cr["metadata"]["name"].startswith(f"{g}-3-") and cr["metadata"]["name"] != f"{g}-3-"
    assert cr["metadata"]["annotations"]["remediation.medik8s.io/template-name"] == TEMPLATE
    assert cr["metadata"]["labels"] == {"app.kubernetes.io/part-of": "node-healthcheck-controller"}
    (owner,) = cr["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("NodeHealthCheck", g, False)
    assert cr["spec"] == {"remediationStrategy": "Automatic"}  # the template's spec.template.spec
    assert rem["resource"] == {
        "kind": "SelfNodeRemediation",
        "namespace": TEMPLATE_NS,
        "name": cr["metadata"]["name"],
        "uid": cr["metadata"]["uid"],
        "apiVersion": "self-node-remediation.medik8s.io/v1alpha1",
    }
    assert rem["started"] == cr["metadata"]["creationTimestamp"] and rem["templateName"] == TEMPLATE
    assert got["lastUpdateTime"]

    # Healed: its remediation object is deleted, then the node counts as healthy again.
    await asyncio.to_thread(set_ready, s, f"{g}-3", "True", 0)
    got = await until(lambda: status_of(s, g), lambda st: st.get("phase") == "Enabled")
    assert not await asyncio.to_thread(for_node, s, f"{g}-3")
    assert (got["observedNodes"], got["healthyNodes"]) == (5, 4) and "unhealthyNodes" not in got
    assert got["reason"] == "NHC is enabled, no ongoing remediation"


async def test_min_healthy_holds_remediation_back_and_a_lower_one_lets_it_start(seeded: Seeded, standin):
    s, g = seeded.s, seeded.group
    seeded.nodes_((f"{g}-0", "True", 3600), *((f"{g}-{i}", "False", 900) for i in (1, 2, 3)))
    seeded.nhc(nhc(g, g, min_healthy="51%"))  # ceil(51% of 4) = 3 healthy needed; 1 is
    got = await until(lambda: status_of(s, g), lambda st: len(st.get("unhealthyNodes") or []) == 3)
    await passes(standin)
    got = await asyncio.to_thread(status_of, s, g)
    assert all("remediations" not in u for u in got["unhealthyNodes"]), got
    assert (got["phase"], got["observedNodes"], got["healthyNodes"]) == ("Enabled", 4, 1)
    assert not [r for i in (1, 2, 3) for r in await asyncio.to_thread(for_node, s, f"{g}-{i}")]

    await asyncio.to_thread(
        s.kubectl, "patch", NHC, g, "--type", "merge", "-p", json.dumps({"spec": {"minHealthy": 1}})
    )
    got = await until(
        lambda: status_of(s, g),
        lambda st: sum(bool(u.get("remediations")) for u in st.get("unhealthyNodes") or []) == 3,
    )
    assert got["phase"] == "Remediating" and got["reason"] == "NHC is remediating 3 nodes"
    for i in (1, 2, 3):
        assert len(await asyncio.to_thread(for_node, s, f"{g}-{i}")) == 1


async def test_while_paused_nothing_starts_nothing_is_deleted_and_the_counts_read_zero(seeded: Seeded, standin):
    s, g = seeded.s, seeded.group
    seeded.nodes_(*((f"{g}-{i}", "True", 3600) for i in range(4)), (f"{g}-4", "False", 600))
    seeded.nhc(nhc(g, g))
    before = await until(lambda: status_of(s, g), lambda st: st.get("phase") == "Remediating")
    assert (before["observedNodes"], before["healthyNodes"]) == (5, 4)
    (cr,) = await asyncio.to_thread(for_node, s, f"{g}-4")

    await asyncio.to_thread(
        s.kubectl, "patch", NHC, g, "--type", "merge", "-p", json.dumps({"spec": {"pauseRequests": ["upgrade", "sre"]}})
    )
    paused = await until(lambda: status_of(s, g), lambda st: st.get("phase") == "Paused")
    assert paused["reason"] == "NHC is paused: upgrade,sre"
    # Every Reconcile zeroes the counts first; a paused one returns before counting again.
    assert (paused["observedNodes"], paused["healthyNodes"]) == (0, 0)
    assert paused["unhealthyNodes"] == before["unhealthyNodes"]  # left as it was

    # The node heals: its remediation object stays (Self Node Remediation keeps it fenced) ...
    await asyncio.to_thread(set_ready, s, f"{g}-4", "True", 0)
    # ... and another node goes bad: no remediation starts for it.
    await asyncio.to_thread(set_ready, s, f"{g}-0", "False", 600)
    await passes(standin)
    kept = await asyncio.to_thread(for_node, s, f"{g}-4")
    assert [r["metadata"]["uid"] for r in kept] == [cr["metadata"]["uid"]]
    assert not await asyncio.to_thread(for_node, s, f"{g}-0")
    still = await asyncio.to_thread(status_of, s, g)
    assert (still["phase"], still["observedNodes"], still["healthyNodes"]) == ("Paused", 0, 0)
    assert still["unhealthyNodes"] == before["unhealthyNodes"]

    # Unpaused: the healed node's object goes, the new unhealthy node is remediated.
    await asyncio.to_thread(
        s.kubectl, "patch", NHC, g, "--type", "json", "-p", '[{"op":"remove","path":"/spec/pauseRequests"}]'
    )
    after = await until(
        lambda: status_of(s, g),
        lambda st: [u["name"] for u in st.get("unhealthyNodes") or [] if u.get("remediations")] == [f"{g}-0"],
    )
    assert not await asyncio.to_thread(for_node, s, f"{g}-4")
    assert len(await asyncio.to_thread(for_node, s, f"{g}-0")) == 1
    assert (after["phase"], after["observedNodes"], after["healthyNodes"]) == ("Remediating", 5, 4)


async def test_a_missing_template_disables_it_before_any_pause(seeded: Seeded, standin):
    s, g = seeded.s, seeded.group
    seeded.nodes_((f"{g}-0", "False", 600))
    broken = nhc(g, g, pauses=["upgrade"])
    broken["spec"]["remediationTemplate"]["name"] = "no-such-template"
    seeded.nhc(broken)
    got = await until(lambda: status_of(s, g), lambda st: st.get("phase") == "Disabled")
    disabled = cond(got, "Disabled")
    assert (disabled["status"], disabled["reason"]) == ("True", "RemediationTemplateNotFound")
    assert got["reason"].startswith("NHC is disabled: RemediationTemplateNotFound: Remediation template not found: ")
    assert "no-such-template" in got["reason"] and (got["observedNodes"], got["healthyNodes"]) == (0, 0)
    assert not await asyncio.to_thread(for_node, s, f"{g}-0")


async def test_a_deleted_nodes_remediation_is_deleted_and_an_excluded_node_is_left_alone(seeded: Seeded, standin):
    s, g = seeded.s, seeded.group
    seeded.nodes_(*((f"{g}-{i}", "True", 3600) for i in range(3)), (f"{g}-3", "False", 600), (f"{g}-4", "False", 600))
    await asyncio.to_thread(
        s.kubectl, "label", "node", f"{g}-4", "remediation.medik8s.io/exclude-from-remediation=true"
    )
    seeded.nhc(nhc(g, g))
    got = await until(lambda: status_of(s, g), lambda st: st.get("phase") == "Remediating")
    assert {u["name"]: bool(u.get("remediations")) for u in got["unhealthyNodes"]} == {f"{g}-3": True, f"{g}-4": False}
    assert not await asyncio.to_thread(for_node, s, f"{g}-4")

    await asyncio.to_thread(s.delete, "node", f"{g}-3")  # e.g. replaced by the cloud provider
    await until(lambda: for_node(s, f"{g}-3"), lambda items: not items)
    got = await until(lambda: status_of(s, g), lambda st: st.get("phase") == "Enabled")
    assert [u["name"] for u in got["unhealthyNodes"]] == [f"{g}-4"] and got["observedNodes"] == 4


# ------------------------------------------------------------------------ the lever, through the app


def price_lines(out: str) -> list[str]:
    lines = out.splitlines()
    assert "Price (read now):" in lines, out
    rest = lines[lines.index("Price (read now):") + 1 :]
    return rest[: next((k for k, ln in enumerate(rest) if not ln.startswith("• ")), len(rest))]


async def test_remediation_pause_pulls_verifies_and_undoes_against_the_standin(app, deployed, seeded: Seeded, standin):
    s, g = seeded.s, seeded.group
    seeded.nodes_(*((f"{g}-{i}", "True", 3600) for i in range(3)), (f"{g}-3", "False", 600))
    seeded.nhc(nhc(g, g))
    await until(lambda: status_of(s, g), lambda st: st.get("phase") == "Remediating")
    (cr,) = await asyncio.to_thread(for_node, s, f"{g}-3")

    asked = []

    async def ask(svc, inc, rec):
        asked.append(rec)

    replace_hook(app, hooks.APPROVAL_REQUESTED, ask)
    inc = await app.declare(cells=("us-east-3",), roles={"ops": OPS})
    store = lever_store(app.services)
    command = f"lever remediation-pause {g} --cell us-east-3"
    # The price is read before the pause, from the stand-in's status as upstream writes it.
    dry = await say(app, f"{command} --dry-run", OPS, inc.channel_id, timeout=30)
    price = price_lines(dry)
    assert (
        f"• nodes NodeHealthCheck {g} watches, none remediated automatically while paused: 4 nodes (3 healthy now)"
        in price
    ), price
    going = "• nodes under remediation (not stopped; one that heals stays fenced until the pause ends)"
    assert f"{going}: 1 node ({g}-3)" in price, price
    assert f"Under remediation now (1): {g}-3 (SelfNodeRemediation {TEMPLATE_NS}/{cr['metadata']['name']})" in dry

    out = await say(app, command, OPS, inc.channel_id, timeout=30)
    req = re.search(r"\bREQ-\d+\b", out)
    assert req, out
    if asked:  # needs approval: the IC approves
        assert await store.transition(asked[-1].id, {"pending_approval"}, "approved", approved_by="U_IC")
        out = (await execute_approved(app.services, asked[-1].id, "U_IC")).message
    rec = await store.get(req.group(0))
    assert rec.state == "done" and rec.result.get("verified") is True, (out, rec.result)
    # Verified by NodeHealthCheck's own word, not by reading back the entry written.
    assert f"NodeHealthCheck reports phase Paused (NHC is paused: firebreak:{inc.id})" in out, out

    got = await until(lambda: status_of(s, g), lambda st: st.get("phase") == "Paused")
    assert s.get(NHC, g)["spec"]["pauseRequests"] == [f"firebreak:{inc.id}"]
    assert got["reason"] == f"NHC is paused: firebreak:{inc.id}" and (got["observedNodes"], got["healthyNodes"]) == (
        0,
        0,
    )
    # Paused: the node heals, but its remediation object stays until the pause ends.
    await asyncio.to_thread(set_ready, s, f"{g}-3", "True", 0)
    await passes(standin)
    assert [r["metadata"]["uid"] for r in await asyncio.to_thread(for_node, s, f"{g}-3")] == [cr["metadata"]["uid"]]

    undo = await app.run(f"undo {req.group(0)}", user=OPS, channel=inc.channel_id)
    assert "undone" in undo and (await store.get(req.group(0))).state == "undone", undo
    assert "pauseRequests" not in s.get(NHC, g)["spec"]
    got = await until(lambda: status_of(s, g), lambda st: st.get("phase") == "Enabled")
    assert not await asyncio.to_thread(for_node, s, f"{g}-3")
    assert (got["observedNodes"], got["healthyNodes"]) == (4, 4)


async def test_remediation_pause_of_an_nhc_another_party_paused_prices_no_zero_and_verifies_its_entry(
    app, deployed, seeded: Seeded, standin
):
    """Paused by someone else first, NodeHealthCheck reports 0 nodes watched (upstream zeroes the counts
    and returns at the pause): the price says the count is not known instead of "0 nodes", and verify
    waits for the reason to name Firebreak's entry too."""
    s, g = seeded.s, seeded.group
    seeded.nodes_(*((f"{g}-{i}", "True", 3600) for i in range(3)), (f"{g}-3", "False", 600))
    seeded.nhc(nhc(g, g))
    await until(lambda: status_of(s, g), lambda st: st.get("phase") == "Remediating")
    await asyncio.to_thread(
        s.kubectl, "patch", NHC, g, "--type", "merge", "-p", json.dumps({"spec": {"pauseRequests": ["upgrade"]}})
    )
    paused = await until(lambda: status_of(s, g), lambda st: st.get("phase") == "Paused")
    assert (paused["observedNodes"], paused["healthyNodes"]) == (0, 0)

    asked = []

    async def ask(svc, inc, rec):
        asked.append(rec)

    replace_hook(app, hooks.APPROVAL_REQUESTED, ask)
    inc = await app.declare(cells=("us-east-3",), roles={"ops": OPS})
    command = f"lever remediation-pause {g} --cell us-east-3"
    dry = await say(app, f"{command} --dry-run", OPS, inc.channel_id, timeout=30)
    price = price_lines(dry)
    assert (
        f"• nodes NodeHealthCheck {g} watches, none remediated automatically while paused: unknown (already paused "
        "by upgrade: NodeHealthCheck reports 0 nodes while paused, so how many it watches is not known)" in price
    ), price
    assert not [ln for ln in price if ": 0 nodes" in ln], price
    going = "• nodes under remediation (not stopped; one that heals stays fenced until the pause ends)"
    assert f"{going}: 1 node ({g}-3 (as of the earlier pause))" in price, price
    assert "NodeHealthCheck is already paused by upgrade" in dry, dry

    out = await say(app, command, OPS, inc.channel_id, timeout=30)
    if asked:  # the session's cells share one API server, so it is fleet-wide: the IC approves
        assert await lever_store(app.services).transition(
            asked[-1].id, {"pending_approval"}, "approved", approved_by="U_IC"
        )
        out = (await execute_approved(app.services, asked[-1].id, "U_IC")).message
    assert "applied and verified" in out, out
    assert f"NodeHealthCheck reports phase Paused (NHC is paused: upgrade,firebreak:{inc.id})" in out, out


async def test_escalating_remediations_move_to_the_next_template_when_one_times_out(
    seeded: Seeded, kube_apiserver: KubeAPIServer
):
    """escalatingRemediations: the first template by order; when its timeout passes with the node still
    unhealthy, its object is annotated nhc-timed-out, the status records timedOut, and the next
    template's object is created. The stand-in's clock (upstream's currentTime) is moved, not waited.

    Both templates here are Self Node Remediation's (the only remediator whose CRDs the world has; its
    templates allow several of one kind). Upstream's UpdateStatusRemediationStarted keeps one status
    entry per kind, so the second remediation is never recorded, and the reconcile after it fails with
    "failed to find started remediation in status for handling timeout": followed as upstream does."""
    s, g = seeded.s, seeded.group
    second = template()
    second["metadata"].update(name=f"{TEMPLATE}-2", labels={})
    await asyncio.to_thread(s.apply, second)
    seeded.nodes_(*((f"{g}-{i}", "True", 3600) for i in range(3)), (f"{g}-3", "False", 600))
    obj = nhc(g, g)
    ref = obj["spec"].pop("remediationTemplate")
    obj["spec"]["escalatingRemediations"] = [
        {"remediationTemplate": {**ref, "name": f"{TEMPLATE}-2"}, "order": 2, "timeout": "5m"},
        {"remediationTemplate": ref, "order": 1, "timeout": "2m"},
    ]
    offset = timedelta(0)
    async with RealKube(s.url, s.admin_token, s.ca_file) as kube:
        rec = NodeHealthChecks(kube, clock=lambda: datetime.now(UTC) + offset)
        task = asyncio.get_running_loop().create_task(run_controllers(kube, [rec], interval=0.1))
        try:
            seeded.nhc(obj)
            got = await until(lambda: status_of(s, g), lambda st: st.get("phase") == "Remediating")
            (first,) = await asyncio.to_thread(for_node, s, f"{g}-3")
            assert first["metadata"]["annotations"]["remediation.medik8s.io/template-name"] == TEMPLATE
            (rem,) = got["unhealthyNodes"][0]["remediations"]
            assert rem["templateName"] == TEMPLATE and "timedOut" not in rem
            await passes(rec)
            assert not rec.errors and len(await asyncio.to_thread(for_node, s, f"{g}-3")) == 1  # not timed out yet

            offset = timedelta(minutes=3)  # past order 1's 2m timeout
            await until(lambda: for_node(s, f"{g}-3"), lambda crs: len(crs) == 2)
            crs = {
                r["metadata"]["annotations"]["remediation.medik8s.io/template-name"]: r
                for r in await asyncio.to_thread(for_node, s, f"{g}-3")
            }
            assert set(crs) == {TEMPLATE, f"{TEMPLATE}-2"}
            assert crs[TEMPLATE]["metadata"]["annotations"]["remediation.medik8s.io/nhc-timed-out"]
            assert "remediation.medik8s.io/nhc-timed-out" not in crs[f"{TEMPLATE}-2"]["metadata"]["annotations"]
            got = await asyncio.to_thread(status_of, s, g)
            (timed_out,) = got["unhealthyNodes"][0]["remediations"]
            assert timed_out["templateName"] == TEMPLATE and timed_out["timedOut"]
            await until(lambda: dict(rec.errors), lambda errors: errors)
            assert rec.errors == {g: "failed to find started remediation in status for handling timeout"}
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await asyncio.to_thread(
                s.delete, "selfnoderemediationtemplate.self-node-remediation.medik8s.io", f"{TEMPLATE}-2",
                namespace=TEMPLATE_NS,
            )  # fmt: skip
