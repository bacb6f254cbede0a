"""The real KEDA operator (tests/support/keda_controller.py: upstream cmd/operator, built from its Go
module) on the real kube-apiserver: what it writes for a ScaledObject, under each pause annotation
and when each goes; then keda-pause pulled, verified and undone through the real app against it.

Every ScaledObject here has a cron trigger whose window is twelve hours away, so KEDA knows it is
inactive without asking anything outside (upstream pkg/scalers/cron_scaler.go), polled every second.
No kube-controller-manager runs: nothing acts on the HPAs. What is asserted is what KEDA itself writes:
its HPA (controllers/keda/hpa.go newHPAForScaledObject), the target's /scale (its scale loop,
pkg/scaling/executor/scale_scaledobjects.go RequestScale, and scaleTargetToPausedCount), and the
ScaledObject's status (controllers/keda/scaledobject_controller.go reconcileScaledObject, handlePause).
The operator is the session's one (tests/realkube/conftest.py), acting on every ScaledObject.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from fbworld.kube import samples
from levers import hooks
from levers.executor import execute_approved
from levers.requests import LeverState
from levers.store import lever_store
from tests.support.keda_controller import KedaOperator
from tests.support.kube_apiserver import KubeAPIServer, cond
from tests.support.levers import OPS, replace_hook, say

NS = "keda-real"
SO = "scaledobject.keda.sh"
HPA = "horizontalpodautoscaler.autoscaling"
DEPLOY = "deployment.apps"
PAUSED = "autoscaling.keda.sh/paused"
PAUSED_REPLICAS = "autoscaling.keda.sh/paused-replicas"
PAUSED_SCALE_IN = "autoscaling.keda.sh/paused-scale-in"
POLL = 1  # spec.pollingInterval, seconds: how often KEDA's scale loop runs
# "Nothing happens" is watched for this long: several of KEDA's polls, in each of which it acts at once
# when not paused (the controls below show it does).
QUIET = 4 * POLL


def cron_inactive() -> dict[str, Any]:
    """A cron trigger whose 30-minute window starts twelve hours from now (UTC: no tzdata needed)."""
    hour = (dt.datetime.now(dt.UTC).hour + 12) % 24
    return {
        "type": "cron",
        "metadata": {"timezone": "UTC", "start": f"0 {hour} * * *", "end": f"30 {hour} * * *", "desiredReplicas": "5"},
    }


def scaled_object(ns: str, name: str, min_replicas: int, annotations: dict[str, str] | None = None) -> dict:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "labels": {"app": name}}
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": meta,
        "spec": {
            "scaleTargetRef": {"name": name},  # KEDA's default: an apps/v1 Deployment
            "minReplicaCount": min_replicas,
            "maxReplicaCount": 10,
            "pollingInterval": POLL,
            "triggers": [cron_inactive()],
        },
    }


class Keda:
    """One ScaledObject and its Deployment on the real server, read back as admin."""

    def __init__(self, s: KubeAPIServer, op: KedaOperator, ns: str, name: str) -> None:
        self.s, self.op, self.ns, self.name = s, op, ns, name
        self.hpa_name = f"keda-hpa-{name}"  # controllers/keda/hpa.go getDefaultHpaName

    def so(self) -> dict:
        return self.s.get(SO, self.name, self.ns)

    def hpa(self) -> dict | None:
        done = self.s.kubectl_result("get", HPA, self.hpa_name, "-n", self.ns, "-o", "json")
        if done.returncode != 0:
            assert "NotFound" in done.stderr, done.stderr
            return None
        return json.loads(done.stdout)

    def replicas(self) -> int:
        scale = json.loads(
            self.s.kubectl("get", "--raw", f"/apis/apps/v1/namespaces/{self.ns}/deployments/{self.name}/scale")
        )
        return int(scale["spec"].get("replicas", 0))  # Scale.spec.replicas is omitempty: 0 is absent

    def scale(self, n: int) -> None:
        """Someone else scales the target (as the HPA controller or a person would)."""
        self.s.kubectl("scale", DEPLOY, self.name, "-n", self.ns, f"--replicas={n}")

    def annotate(self, *pairs: str) -> None:
        self.s.kubectl("annotate", "--overwrite", SO, self.name, "-n", self.ns, *pairs)

    async def until(self, what: str, read: Callable[[], Any], ok: Callable[[Any], bool], seconds: float = 30.0) -> Any:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while True:
            got = await asyncio.to_thread(read)
            if ok(got):
                return got
            if loop.time() > deadline:
                shown = json.dumps(got, indent=1)[-2500:] if isinstance(got, dict) else repr(got)
                raise AssertionError(
                    f"KEDA did not {what} in {seconds:g}s: {shown}\n--- operator\n{self.op.log_tail(3000)}"
                )
            await asyncio.sleep(0.1)

    async def holds(self, what: str, read: Callable[[], Any], ok: Callable[[Any], bool]) -> None:
        """`ok` stays true for QUIET seconds (KEDA leaves it alone)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + QUIET
        while loop.time() < deadline:
            got = await asyncio.to_thread(read)
            assert ok(got), f"{what}: {got!r}\n--- operator\n{self.op.log_tail(2000)}"
            await asyncio.sleep(0.2)

    async def hpa_made(self) -> dict:
        return await self.until("create its HPA", self.hpa, lambda h: h is not None)

    async def hpa_gone(self) -> None:
        await self.until("delete its HPA", self.hpa, lambda h: h is None)

    async def paused(self, status: str, reason: str) -> dict:
        if status == "False":
            return await self.unpaused(reason)
        return await self.until(
            f"set Paused={status} ({reason})",
            self.so,
            lambda o: cond(o, "Paused").get("status") == status and cond(o, "Paused").get("reason") == reason,
        )

    async def unpaused(self, reason: str) -> dict:
        """KEDA unpaused: Paused=False with `reason`, and its HPA there. KEDA v2.21.0 can leave Paused=True
        for good after an unpause (its first scaling pass writes back a stale conditions list,
        pkg/scaling/scale_handler.go handleResult, after the reconciler wrote Paused=False), so a stale
        True with the HPA made again also counts; every caller then waits for the unpause's own effect
        (the HPA remade, the paused count cleared, scale-down enabled again)."""

        def read() -> tuple[dict, dict | None]:
            return self.so(), self.hpa()

        def done(got: tuple[dict, dict | None]) -> bool:
            paused = cond(got[0], "Paused")
            if paused.get("status") == "False":
                return paused.get("reason") == reason and got[1] is not None
            return (
                paused.get("status") == "True"
                and got[1] is not None
                and not (got[0].get("status") or {}).get("pausedReplicaCount")
            )

        so, _ = await self.until(f"unpause ({reason}) and have its HPA", read, done)
        return so

    async def replicas_become(self, n: int) -> None:
        await self.until(f"scale the target to {n}", self.replicas, lambda r: r == n)


@pytest.fixture
def keda(kube_apiserver: KubeAPIServer, keda_controller: KedaOperator) -> Iterator[Callable[..., Keda]]:
    """make(name, replicas, min_replicas, annotations, ns): a Deployment and its ScaledObject; both
    deleted at the end, the ScaledObject through KEDA's finalizer, its HPA by hand (no garbage collector)."""
    s = kube_apiserver
    made: list[Keda] = []
    namespaces: set[str] = set()

    def make(
        name: str, replicas: int, min_replicas: int, annotations: dict[str, str] | None = None, ns: str = NS
    ) -> Keda:
        if ns not in namespaces:
            s.namespace(ns)
            namespaces.add(ns)
        k = Keda(s, keda_controller, ns, name)
        made.append(k)
        s.put(samples.deployment(ns=ns, name=name, replicas=replicas))
        s.apply(scaled_object(ns, name, min_replicas, annotations))
        return k

    yield make
    for k in made:
        s.delete(SO, k.name, namespace=k.ns)
    for k in made:
        s.kubectl("wait", "--for=delete", f"{SO}/{k.name}", "-n", k.ns, "--timeout=30s", check=False)
        s.delete(HPA, k.hpa_name, namespace=k.ns)
        s.delete(DEPLOY, k.name, namespace=k.ns)
    assert keda_controller.alive(), keda_controller.log_tail()


async def test_keda_makes_its_hpa_and_keeps_the_target_at_min(keda):
    k: Keda = await asyncio.to_thread(keda, "web", 3, 2)
    hpa = await k.hpa_made()
    so = await k.until(
        "mark the ScaledObject Ready and its trigger inactive (its scale loop ran)",
        k.so,
        lambda o: cond(o, "Ready").get("status") == "True" and cond(o, "Active").get("status") == "False",
    )
    spec = hpa["spec"]
    assert spec["minReplicas"] == 2 and spec["maxReplicas"] == 10, spec
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, spec
    [metric] = spec["metrics"]
    assert metric["type"] == "External" and metric["external"]["metric"]["name"].startswith("s0-cron-UTC-"), metric
    assert metric["external"]["target"] == {"type": "AverageValue", "averageValue": "1"}, metric
    assert "behavior" not in spec, spec  # no paused-scale-in/out, no advanced.horizontalPodAutoscalerConfig
    [owner] = hpa["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "ScaledObject",
        "web",
        so["metadata"]["uid"],
        True,
    )
    labels = hpa["metadata"]["labels"]
    # KEDA's own labels, and the ScaledObject's copied.
    assert labels["app.kubernetes.io/managed-by"] == "keda-operator" and labels["app"] == "web", labels
    assert labels["app.kubernetes.io/version"] == k.op.version, labels  # the build's ldflags, as upstream's Makefile

    st = so["status"]
    assert st["hpaName"] == "keda-hpa-web" and st["scaleTargetKind"] == "apps/v1.Deployment", st
    assert st["originalReplicaCount"] == 3 and "pausedReplicaCount" not in st, st
    assert cond(so, "Paused")["status"] == "False" and cond(so, "Active")["reason"] == "ScalerNotActive", st
    assert "finalizer.keda.sh" in so["metadata"]["finalizers"], so["metadata"]
    assert so["metadata"]["labels"]["scaledobject.keda.sh/name"] == "web", so["metadata"]

    # The control for every "KEDA leaves it alone" below: unpaused, its scale loop acts within a poll.
    await k.holds("an inactive trigger at 3 >= minReplicaCount 2: no change", k.replicas, lambda r: r == 3)
    await asyncio.to_thread(k.scale, 1)
    await k.replicas_become(2)  # RequestScale: inactive and below minReplicaCount -> minReplicaCount


async def test_paused_true_deletes_the_hpa_and_stops_the_scale_loop(keda):
    k: Keda = await asyncio.to_thread(keda, "web-paused", 3, 2)
    first = await k.hpa_made()
    await asyncio.to_thread(k.annotate, f"{PAUSED}=true")
    so = await k.paused("True", "ScaledObjectPaused")
    assert cond(so, "Paused")["message"] == "ScaledObject is paused"
    await k.hpa_gone()
    so = await asyncio.to_thread(k.so)
    assert "pausedReplicaCount" not in so["status"], so["status"]
    assert await asyncio.to_thread(k.replicas) == 3  # frozen where it was: KEDA writes no count
    # Its scale loop is stopped: below minReplicaCount stays below.
    await asyncio.to_thread(k.scale, 1)
    await k.holds("paused: the target below minReplicaCount is left alone", k.replicas, lambda r: r == 1)

    await asyncio.to_thread(k.annotate, f"{PAUSED}-")
    so = await k.paused("False", "ScaledObjectUnpaused")
    if cond(so, "Paused")["status"] == "False":  # (not when KEDA's race left a stale True: unpaused())
        assert cond(so, "Paused")["message"] == "pause annotation removed for ScaledObject"
    again = await k.hpa_made()
    assert again["metadata"]["uid"] != first["metadata"]["uid"]  # a new HPA, not the old one kept
    await k.replicas_become(2)  # the scale loop is back


async def test_paused_false_is_not_paused_and_an_unparsable_value_is(keda):
    """getBoolAnnotation: strconv.ParseBool, and a value that does not parse is taken as true."""
    k: Keda = await asyncio.to_thread(keda, "web-bool", 3, 2)
    first = await k.hpa_made()
    await asyncio.to_thread(k.annotate, f"{PAUSED}=false")
    # KEDA copies the ScaledObject's annotations onto its HPA: this one there means KEDA reconciled it.
    hpa = await k.until(
        "copy paused=false onto its HPA",
        k.hpa,
        lambda h: h is not None and h["metadata"]["annotations"].get(PAUSED) == "false",
    )
    assert hpa["metadata"]["uid"] == first["metadata"]["uid"]  # kept, not deleted: not paused
    so = await asyncio.to_thread(k.so)
    assert cond(so, "Paused")["status"] == "False", so["status"]
    await asyncio.to_thread(k.scale, 1)
    await k.replicas_become(2)  # and its scale loop runs

    await asyncio.to_thread(k.annotate, f"{PAUSED}=yes")  # not a Go bool: paused
    await k.paused("True", "ScaledObjectPaused")
    await k.hpa_gone()
    await asyncio.to_thread(k.annotate, f"{PAUSED}-")
    await k.paused("False", "ScaledObjectUnpaused")
    await k.hpa_made()


async def test_paused_replicas_scales_the_target_and_records_the_count(keda):
    k: Keda = await asyncio.to_thread(keda, "web-count", 3, 2)
    await k.hpa_made()
    await asyncio.to_thread(k.annotate, f"{PAUSED_REPLICAS}=5")
    await k.replicas_become(5)  # scaleTargetToPausedCount: through the target's /scale
    so = await k.until("record pausedReplicaCount 5", k.so, lambda o: o["status"].get("pausedReplicaCount") == 5)
    assert cond(so, "Paused")["status"] == "True" and cond(so, "Paused")["reason"] == "ScaledObjectPaused"
    await k.hpa_gone()
    # KEDA scales to the count when it reconciles the ScaledObject (a new count: at once); it does not
    # watch the target, so another writer's count stands until then (its scale loop is stopped).
    await asyncio.to_thread(k.annotate, f"{PAUSED_REPLICAS}=4")
    await k.replicas_become(4)
    await k.until("record pausedReplicaCount 4", k.so, lambda o: o["status"].get("pausedReplicaCount") == 4)
    await asyncio.to_thread(k.scale, 7)
    await k.holds("paused-replicas=4: a count written by someone else is not put back", k.replicas, lambda r: r == 7)
    await asyncio.to_thread(k.scale, 4)
    # paused-replicas wins over paused=false (NeedToBePausedByAnnotation).
    await asyncio.to_thread(k.annotate, f"{PAUSED}=false")
    await k.holds("paused-replicas with paused=false: still no HPA", k.hpa, lambda h: h is None)

    await asyncio.to_thread(k.annotate, f"{PAUSED_REPLICAS}-", f"{PAUSED}-")
    so = await k.paused("False", "ScaledObjectUnpaused")
    await k.until("clear pausedReplicaCount", k.so, lambda o: "pausedReplicaCount" not in o["status"])
    await k.hpa_made()
    assert await asyncio.to_thread(k.replicas) == 4  # KEDA puts nothing back: the HPA controller would move it


async def test_paused_scale_in_disables_scale_down_and_keeps_the_hpa(keda):
    """minReplicaCount 0 and an inactive trigger: unpaused, KEDA scales the target to zero at once
    (no lastActiveTime, initialCooldownPeriod 0), so the annotation is there from the start."""
    k: Keda = await asyncio.to_thread(keda, "web-in", 3, 0, {PAUSED_SCALE_IN: "true"})
    hpa = await k.hpa_made()
    assert hpa["spec"]["behavior"]["scaleDown"]["selectPolicy"] == "Disabled", hpa["spec"]
    assert hpa["spec"]["behavior"]["scaleUp"].get("selectPolicy") != "Disabled", hpa["spec"]  # scale-out kept
    assert hpa["spec"]["minReplicas"] == 1, hpa["spec"]  # an HPA's floor is 1; zero is KEDA's own scale loop
    assert hpa["metadata"]["annotations"][PAUSED_SCALE_IN] == "true"
    so = await k.paused("True", "ScaledObjectPaused")
    assert "pausedReplicaCount" not in so["status"], so["status"]
    await k.holds("scale-in paused: no scale to zero", k.replicas, lambda r: r == 3)
    kept = await asyncio.to_thread(k.hpa)
    assert kept is not None and kept["metadata"]["uid"] == hpa["metadata"]["uid"]  # never deleted

    await asyncio.to_thread(k.annotate, f"{PAUSED_SCALE_IN}-")
    await k.paused("False", "ScaledObjectUnpaused")
    await k.until("take Disabled off the HPA", k.hpa, lambda h: h is not None and "behavior" not in h["spec"])
    await k.replicas_become(0)  # the control: KEDA's scale-to-zero was what the annotation held


# ------------------------------------------------------------------------------ keda-pause through the app

LEVER_NS = "serve-chat"  # a namespace deploy/overlays/example grants the bot scaledobjects in


def req_of(reply: str) -> str:
    found = re.search(r"\bREQ-\d+\b", reply)
    assert found, reply
    return found.group(0)


async def pull(app, command: str, channel: str) -> str:
    """Pull a lever as OPS; the IC approves when it needs approval. The request id."""
    asked: list = []

    async def ask(svc, inc, rec):
        asked.append(rec)

    replace_hook(app, hooks.APPROVAL_REQUESTED, ask)
    out = await say(app, command, OPS, channel, timeout=30)
    req = req_of(out)
    if asked:
        store = lever_store(app.services)
        assert await store.transition(
            asked[-1].id, {LeverState.pending_approval}, LeverState.approved, approved_by="U_IC"
        )
        out = (await execute_approved(app.services, asked[-1].id, "U_IC")).message
    rec = await lever_store(app.services).get(req)
    assert rec is not None and rec.state == "done" and rec.result.get("verified") is True, (command, out)
    return req


async def undo(app, req: str, channel: str) -> None:
    out = await app.run(f"undo {req}", user=OPS, channel=channel)
    rec = await lever_store(app.services).get(req)
    assert "undone" in out and rec is not None and rec.state == "undone", out


async def test_keda_pause_lever_against_the_real_operator(app, deployed, keda):
    k: Keda = await asyncio.to_thread(keda, "keda-web", 3, 2, None, LEVER_NS)
    await k.hpa_made()
    await k.until("mark the ScaledObject Ready", k.so, lambda o: cond(o, "Ready").get("status") == "True")
    inc = await app.declare(cells=("us-east-3",), roles={"ops": OPS})
    target = f"{LEVER_NS}/keda-web --cell us-east-3"

    # paused=true: KEDA pauses, deletes its HPA and leaves the count; undo hands it back.
    req = await pull(app, f"lever keda-pause {target}", inc.channel_id)
    so = await k.paused("True", "ScaledObjectPaused")
    assert so["metadata"]["annotations"][PAUSED] == "true"
    await k.hpa_gone()
    assert await asyncio.to_thread(k.replicas) == 3
    await undo(app, req, inc.channel_id)
    so = await k.paused("False", "ScaledObjectUnpaused")
    assert PAUSED not in (so["metadata"].get("annotations") or {})
    await k.hpa_made()

    # replicas=5: KEDA scales the target to 5 and records it; undo clears it (the count stays).
    req = await pull(app, f"lever keda-pause {target} replicas=5", inc.channel_id)
    await k.replicas_become(5)
    await k.until("record pausedReplicaCount 5", k.so, lambda o: o["status"].get("pausedReplicaCount") == 5)
    await k.hpa_gone()
    await undo(app, req, inc.channel_id)
    await k.paused("False", "ScaledObjectUnpaused")
    await k.until("clear pausedReplicaCount", k.so, lambda o: "pausedReplicaCount" not in o["status"])
    await k.hpa_made()

    # replicas=current: pinned at what /scale says now.
    await asyncio.to_thread(k.scale, 6)
    req = await pull(app, f"lever keda-pause {target} replicas=current", inc.channel_id)
    so = await k.until("record pausedReplicaCount 6", k.so, lambda o: o["status"].get("pausedReplicaCount") == 6)
    assert so["metadata"]["annotations"][PAUSED_REPLICAS] == "6"
    await k.hpa_gone()
    await undo(app, req, inc.channel_id)
    await k.paused("False", "ScaledObjectUnpaused")
    await k.hpa_made()


async def test_keda_pause_lever_pauses_a_scaled_object_marked_paused_false(app, deployed, keda):
    k: Keda = await asyncio.to_thread(keda, "keda-false", 3, 2, {PAUSED: "false"}, LEVER_NS)
    await k.hpa_made()
    inc = await app.declare(cells=("us-east-3",), roles={"ops": OPS})
    req = await pull(app, f"lever keda-pause {LEVER_NS}/keda-false --cell us-east-3", inc.channel_id)
    await k.paused("True", "ScaledObjectPaused")
    await k.hpa_gone()
    # Undo puts back what was there: the owner's "false", which KEDA reads as not paused.
    await undo(app, req, inc.channel_id)
    so = await k.paused("False", "ScaledObjectUnpaused")
    assert so["metadata"]["annotations"][PAUSED] == "false"
    await k.hpa_made()


async def test_keda_pause_scale_in_only_against_the_real_operator(app, deployed, keda):
    """only=scale-in (issue 34): KEDA keeps its HPA and its scale loop, and disables the HPA's scale-down;
    the lever verifies by that HPA, KEDA's effect, not by reading back its own annotation. Scale-out goes
    on; scale-in (KEDA's own, to a minReplicaCount lowered to 0 while paused) does not; undo takes off
    only the lever's annotation, and KEDA enables scale-down again."""
    owner = {"team.corp/owner": "serving"}  # someone else's annotation: undo leaves it
    k: Keda = await asyncio.to_thread(keda, "keda-in", 3, 2, owner, LEVER_NS)
    first = await k.hpa_made()
    await k.until("mark the ScaledObject Ready", k.so, lambda o: cond(o, "Ready").get("status") == "True")
    inc = await app.declare(cells=("us-east-3",), roles={"ops": OPS})

    req = await pull(app, f"lever keda-pause {LEVER_NS}/keda-in --cell us-east-3 only=scale-in", inc.channel_id)
    rec = await lever_store(app.services).get(req)
    assert rec is not None
    said = json.dumps(rec.result)
    assert "KEDA disabled scale-down on its HPA keda-hpa-keda-in; scale-out goes on" in said, said
    so = await asyncio.to_thread(k.so)
    assert so["metadata"]["annotations"][PAUSED_SCALE_IN] == "true"
    assert PAUSED not in so["metadata"]["annotations"] and PAUSED_REPLICAS not in so["metadata"]["annotations"]
    hpa = await asyncio.to_thread(k.hpa)
    assert hpa is not None and hpa["metadata"]["uid"] == first["metadata"]["uid"]  # kept: not a full pause
    assert hpa["spec"]["behavior"]["scaleDown"]["selectPolicy"] == "Disabled", hpa["spec"]
    assert hpa["spec"]["behavior"]["scaleUp"].get("selectPolicy") != "Disabled", hpa["spec"]
    await k.paused("True", "ScaledObjectPaused")

    await asyncio.to_thread(k.scale, 1)
    await k.replicas_become(2)  # scale-out goes on: below minReplicaCount is brought up
    await asyncio.to_thread(
        k.s.kubectl, "patch", SO, k.name, "-n", k.ns, "--type=merge", "-p", '{"spec":{"minReplicaCount":0}}'
    )
    await k.holds("scale-in paused: no scale to zero", k.replicas, lambda r: r == 2)

    await undo(app, req, inc.channel_id)
    so = await k.paused("False", "ScaledObjectUnpaused")
    annotations = so["metadata"].get("annotations") or {}
    assert PAUSED_SCALE_IN not in annotations and annotations.get("team.corp/owner") == "serving", annotations
    await k.until("take Disabled off the HPA", k.hpa, lambda h: h is not None and "behavior" not in h["spec"])
    await k.replicas_become(0)  # the control: what the pause held was KEDA's scale to zero
