"""The real Argo Rollouts controller (tests/support/argo_controller.py: upstream's rollouts-controller,
built from its Go module) on the session's real kube-apiserver: what it does on `status.abort`, and
the rollout-abort lever pulled through the real app against a Rollout it manages.

Argo creates and scales the ReplicaSets itself. Nothing here runs a ReplicaSet controller or a
kubelet, so where a step needs a ReplicaSet's pods available the test writes the ReplicaSet's status
as those two would (`follow_replica_sets`, `report_available`), and says so. Everything else on the
Rollout, its ReplicaSets and Services is Argo's own doing, read back as admin.

The controller is the session's one (tests/realkube/conftest.py), acting on every Rollout in the
server: each test uses Rollouts of its own names.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from levers import hooks
from levers.executor import execute_approved
from levers.kube import FIELD_MANAGER
from levers.store import lever_store
from tests.support.argo_controller import (
    HASH_LABEL,
    ArgoController,
    follow_replica_sets,
    replica_sets,
    report_available,
)
from tests.support.harness import audit_entries
from tests.support.kube_apiserver import KubeAPIServer
from tests.support.levers import MODEL, replace_hook, say

NS = "argo-real"  # the controller-only tests' namespace
LEVER_NS = "serve-chat"  # where deploy/overlays/example grants rollout-abort (policies/levers.yaml namespaces)
ARGO = "rollouts-controller"  # Argo's field manager: client-go's default, its binary's name
IMAGE = "registry.example/vllm:{}"


# ------------------------------------------------------------------------------ our objects


def canary(name: str, ns: str, image: str, replicas: int = 5) -> dict[str, Any]:
    """A basic canary (no traffic routing): 20% of the pods on the new revision, then paused."""
    labels = {"app": name}
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "server", "image": IMAGE.format(image)}]},
            },
            "strategy": {"canary": {"steps": [{"setWeight": 20}, {"pause": {}}]}},
        },
    }


def blue_green(name: str, ns: str, image: str, replicas: int = 3) -> list[dict[str, Any]]:
    """A blue-green Rollout with its active and preview Services; promotion by hand only."""
    labels = {"app": name}

    def service(suffix: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": f"{name}-{suffix}", "namespace": ns},
            "spec": {"selector": dict(labels), "ports": [{"port": 80, "targetPort": 8000}]},
        }

    ro = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "server", "image": IMAGE.format(image)}]},
            },
            "strategy": {
                "blueGreen": {
                    "activeService": f"{name}-active",
                    "previewService": f"{name}-preview",
                    "autoPromotionEnabled": False,
                    # The preview's pods go 2 s after an abort, not upstream's default 30 s.
                    "abortScaleDownDelaySeconds": 2,
                }
            },
        },
    }
    return [service("active"), service("preview"), ro]


# ------------------------------------------------------------------------------ reading Argo's work


def rollout(s: KubeAPIServer, name: str, ns: str) -> dict[str, Any]:
    return s.get("rollout.argoproj.io", name, ns)


def condition(ro: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in (ro.get("status") or {}).get("conditions") or [] if c["type"] == kind), None)


def by_hash(s: KubeAPIServer, name: str, ns: str) -> dict[str, dict[str, Any]]:
    """The Rollout's ReplicaSets by pod-template hash."""
    return {rs["metadata"]["labels"][HASH_LABEL]: rs for rs in replica_sets(s, ns, f"app={name}")}


def status_managers(obj: dict[str, Any]) -> set[str]:
    return {m["manager"] for m in obj["metadata"].get("managedFields") or [] if m.get("subresource") == "status"}


async def until(
    ctl: ArgoController, what: str, probe: Callable[[], Any], check: Callable[[Any], bool], seconds: float = 90.0
) -> Any:
    """``probe()`` (blocking, run in a thread) until ``check`` holds of it; fails with the last value and
    the controller's log. Argo answers in well under a second on an idle machine; the bound is for a busy one."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while True:
        value = await asyncio.to_thread(probe)
        if check(value):
            return value
        if loop.time() > deadline:
            raise AssertionError(
                f"{what}: not after {seconds}s; last: {json.dumps(value, default=str)[:3000]}\n"
                f"--- rollouts-controller\n{ctl.log_tail(6000)}"
            )
        await asyncio.sleep(0.2)


def abort(s: KubeAPIServer, name: str, ns: str) -> dict[str, Any]:
    """What `kubectl argo rollouts abort` sends: a merge patch of status.abort on the status subresource."""
    out = s.kubectl(
        "patch", "rollout.argoproj.io", name, "-n", ns, "--subresource", "status", "--type", "merge",
        "-p", json.dumps({"status": {"abort": True}}), "-o", "json",
    )  # fmt: skip
    return json.loads(out)


def set_image(s: KubeAPIServer, name: str, ns: str, image: str) -> None:
    """A new revision, as a deploy pipeline would make one."""
    ops = [{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": IMAGE.format(image)}]
    s.kubectl("patch", "rollout.argoproj.io", name, "-n", ns, "--type", "json", "-p", json.dumps(ops))


def cleanup(s: KubeAPIServer, objs: list[dict[str, Any]]) -> None:
    for o in objs:
        kind = "rollout.argoproj.io" if o["kind"] == "Rollout" else o["kind"].lower()
        s.delete(kind, o["metadata"]["name"], namespace=o["metadata"]["namespace"])
    for o in objs:  # no garbage collector here to follow the owner references Argo set
        if o["kind"] == "Rollout":
            app = o["spec"]["selector"]["matchLabels"]["app"]
            s.kubectl("delete", "replicasets.apps", "-n", o["metadata"]["namespace"], "-l", f"app={app}",
                      "--ignore-not-found", "--wait=false")  # fmt: skip


@pytest.fixture
def argo_ns(kube_apiserver: KubeAPIServer) -> Iterator[KubeAPIServer]:
    kube_apiserver.namespace(NS)
    yield kube_apiserver


# ------------------------------------------------------------------------------ to mid-rollout


async def healthy_canary(s: KubeAPIServer, ctl: ArgoController, name: str, ns: str) -> str:
    """A new canary Rollout, applied and taken by Argo to Healthy (its first revision is stable at
    once: no steps on a first deploy); the stable pod-template hash."""
    await asyncio.to_thread(s.apply, canary(name, ns, "v1"))
    ro = await until(
        ctl, "Argo makes revision 1 stable and Healthy", lambda: rollout(s, name, ns),
        lambda ro: (ro.get("status") or {}).get("phase") == "Healthy",
    )  # fmt: skip
    return str(ro["status"]["stableRS"])


async def paused_canary(s: KubeAPIServer, ctl: ArgoController, name: str, ns: str) -> tuple[str, str]:
    """A canary Rollout Argo has taken to revision 2's first pause (20%): (stable hash, canary hash).
    Called inside follow_replica_sets: the pods Argo asks for come up at once."""
    stable = await healthy_canary(s, ctl, name, ns)
    await asyncio.to_thread(set_image, s, name, ns, "v2")
    ro = await until(
        ctl, "Argo pauses revision 2 at its first pause step", lambda: rollout(s, name, ns),
        lambda ro: (ro.get("status") or {}).get("phase") == "Paused" and ro["status"].get("currentStepIndex") == 1,
    )  # fmt: skip
    current = ro["status"]["currentPodHash"]
    assert ro["status"]["stableRS"] == stable != current, ro["status"]
    assert ro["status"]["message"] == "CanaryPauseStep", ro["status"]
    return stable, current


# ------------------------------------------------------------------------------ the controller's own reaction


async def test_abort_mid_canary_scales_back_to_stable(
    argo_ns: KubeAPIServer,
    argo_controller: ArgoController,
):
    s, ctl, name = argo_ns, argo_controller, "abort-canary"
    objs = [canary(name, NS, "v1")]
    try:
        async with follow_replica_sets(s, NS, f"app={name}"):
            stable, current = await paused_canary(s, ctl, name, NS)
            sets = await asyncio.to_thread(by_hash, s, name, NS)
            # Argo's basic canary at 20% of 5: one canary pod, four stable.
            assert (sets[current]["spec"]["replicas"], sets[stable]["spec"]["replicas"]) == (1, 4)
        # From here nothing reports pods: what changes is Argo's doing alone.
        patched = await asyncio.to_thread(abort, s, name, NS)
        assert patched["status"]["abort"] is True

        def aborted(ro: dict[str, Any]) -> bool:
            return (ro.get("status") or {}).get("phase") == "Degraded"

        ro = await until(ctl, "Argo marks the Rollout aborted", lambda: rollout(s, name, NS), aborted)
        st = ro["status"]
        message = "Rollout aborted update to revision 2"
        assert st["abort"] is True and st.get("abortedAt"), st
        assert st["message"] == f"RolloutAborted: {message}", st
        progressing = condition(ro, "Progressing")
        assert progressing and (progressing["status"], progressing["reason"], progressing["message"]) == (
            "False", "RolloutAborted", message,
        ), st["conditions"]  # fmt: skip
        assert st["stableRS"] == stable and st["currentPodHash"] == current, st
        assert st["currentStepIndex"] == 0, st  # back before the first step (rollout/canary.go, aborted)
        assert ARGO in status_managers(ro), status_managers(ro)

        sets = await until(
            ctl, "Argo scales the canary to 0 and stable back to 5", lambda: by_hash(s, name, NS),
            lambda sets: (sets[current]["spec"]["replicas"], sets[stable]["spec"]["replicas"]) == (0, 5),
        )  # fmt: skip
        # Until pods change, the ReplicaSets' status is as before: stable 4 of 5 available, the canary's
        # pod still up. Argo still says Degraded, never Healthy, while it waits.
        assert (sets[stable]["status"]["availableReplicas"], sets[current]["status"]["availableReplicas"]) == (4, 1)
        assert (await asyncio.to_thread(rollout, s, name, NS))["status"]["phase"] == "Degraded"
        # The ReplicaSet controller and kubelet's part: the canary's pod gone, the fifth stable pod up.
        for rs in (sets[current], sets[stable]):
            assert await asyncio.to_thread(report_available, s, rs)
        ro = await until(
            ctl, "Argo counts the pods back on stable", lambda: rollout(s, name, NS),
            lambda ro: (ro["status"].get("availableReplicas"), ro["status"].get("updatedReplicas", 0)) == (5, 0),
        )  # fmt: skip
        assert ro["status"]["phase"] == "Degraded" and ro["status"]["abort"] is True, ro["status"]
    finally:
        await asyncio.to_thread(cleanup, s, objs)


async def test_abort_mid_blue_green_keeps_the_active_service_on_stable(
    argo_ns: KubeAPIServer,
    argo_controller: ArgoController,
):
    s, ctl, name = argo_ns, argo_controller, "abort-bg"
    objs = blue_green(name, NS, "v1")
    try:
        async with follow_replica_sets(s, NS, f"app={name}"):
            await asyncio.to_thread(s.apply, *objs)
            ro = await until(
                ctl, "Argo makes revision 1 active and Healthy", lambda: rollout(s, name, NS),
                lambda ro: (ro.get("status") or {}).get("phase") == "Healthy",
            )  # fmt: skip
            stable = ro["status"]["stableRS"]
            assert ro["status"]["blueGreen"]["activeSelector"] == stable, ro["status"]
            await asyncio.to_thread(set_image, s, name, NS, "v2")
            ro = await until(
                ctl, "Argo pauses revision 2 in preview", lambda: rollout(s, name, NS),
                lambda ro: ro["status"].get("phase") == "Paused",
            )  # fmt: skip
            current = ro["status"]["currentPodHash"]
            assert ro["status"]["message"] == "BlueGreenPause", ro["status"]
            assert ro["status"]["blueGreen"] == {"activeSelector": stable, "previewSelector": current}, ro["status"]
            sets = await asyncio.to_thread(by_hash, s, name, NS)
            assert (sets[stable]["spec"]["replicas"], sets[current]["spec"]["replicas"]) == (3, 3)

            await asyncio.to_thread(abort, s, name, NS)
            ro = await until(
                ctl, "Argo marks the Rollout aborted", lambda: rollout(s, name, NS),
                lambda ro: ro["status"].get("phase") == "Degraded",
            )  # fmt: skip
            st = ro["status"]
            assert st["message"] == "RolloutAborted: Rollout aborted update to revision 2", st
            assert st["abort"] is True and st["stableRS"] == stable, st
            assert st["blueGreen"]["activeSelector"] == stable, st
            active = await asyncio.to_thread(s.get, "service", f"{name}-active", NS)
            assert active["spec"]["selector"] == {"app": name, HASH_LABEL: stable}, active["spec"]
            # The preview's pods go after abortScaleDownDelaySeconds (2 s here); stable keeps all 3.
            sets = await until(
                ctl, "Argo scales the preview down", lambda: by_hash(s, name, NS),
                lambda sets: sets[current]["spec"]["replicas"] == 0,
            )  # fmt: skip
            assert sets[stable]["spec"]["replicas"] == 3
    finally:
        await asyncio.to_thread(cleanup, s, objs)


async def test_argo_clears_an_abort_on_a_fully_promoted_rollout(
    argo_ns: KubeAPIServer,
    argo_controller: ArgoController,
):
    """rollout/controller.go newRolloutContext: `if IsFullyPromoted(rollout) && IsAborted() { RemoveAbort() }`,
    IsFullyPromoted being status.stableRS == status.currentPodHash as stored. So an abort with no update in
    flight is undone on the next reconcile (the rollout-abort lever refuses that case for this reason)."""
    s, ctl, name = argo_ns, argo_controller, "abort-promoted"
    objs = [canary(name, NS, "v1")]
    try:
        async with follow_replica_sets(s, NS, f"app={name}"):
            stable = await healthy_canary(s, ctl, name, NS)
            patched = await asyncio.to_thread(abort, s, name, NS)
            assert patched["status"]["abort"] is True  # it landed; Argo takes it back
            ro = await until(
                ctl, "Argo removes the abort", lambda: rollout(s, name, NS),
                lambda ro: not ro["status"].get("abort")
                and int(ro["metadata"]["resourceVersion"]) > int(patched["metadata"]["resourceVersion"]),
            )  # fmt: skip
            st = ro["status"]
            assert st["phase"] == "Healthy" and st["stableRS"] == st["currentPodHash"] == stable, st
            assert "abortedAt" not in st, st
            assert "Removing abort condition from fully promoted rollout" in await asyncio.to_thread(
                ctl.log_tail, 1_000_000
            )
    finally:
        await asyncio.to_thread(cleanup, s, objs)


async def test_argo_clears_an_abort_once_the_template_is_back_on_stable(
    argo_ns: KubeAPIServer,
    argo_controller: ArgoController,
):
    """After a real abort, the deploy pipeline rolls the template back to revision 1: the template change
    resets the status (rollout/sync.go resetRolloutStatus: RemoveAbort, as any new revision does), Argo
    skips the steps back to stable ("Rollback to stable ReplicaSets", rollout/canary.go), and from then on
    it is fully promoted (newRolloutContext's check above): Healthy, not aborted."""
    s, ctl, name = argo_ns, argo_controller, "abort-rollback"
    objs = [canary(name, NS, "v1")]
    try:
        async with follow_replica_sets(s, NS, f"app={name}"):
            stable, current = await paused_canary(s, ctl, name, NS)
            await asyncio.to_thread(abort, s, name, NS)
            await until(
                ctl, "Argo marks the Rollout aborted", lambda: rollout(s, name, NS),
                lambda ro: ro["status"].get("phase") == "Degraded",
            )  # fmt: skip
            await asyncio.to_thread(set_image, s, name, NS, "v1")
            ro = await until(
                ctl, "Argo clears the abort after the rollback", lambda: rollout(s, name, NS),
                lambda ro: ro["status"].get("phase") == "Healthy",
            )  # fmt: skip
            st = ro["status"]
            assert not st.get("abort") and st["stableRS"] == st["currentPodHash"] == stable, st
            assert condition(ro, "Progressing")["reason"] != "RolloutAborted", st["conditions"]
            sets = await asyncio.to_thread(by_hash, s, name, NS)
            assert (sets[stable]["spec"]["replicas"], sets[current]["spec"]["replicas"]) == (5, 0)
    finally:
        await asyncio.to_thread(cleanup, s, objs)


# ------------------------------------------------------------------------------ the lever on it

# The verify windows (policy rollout_verify_by_rollout): long enough for Argo and the ReplicaSet status
# writes on a busy 2-core machine where verify should pass; a short one where it must not.
VERIFIED, LINGER, LATE = "llm-argo", "llm-argo-linger", "llm-argo-late"


@pytest.fixture
def policy_overrides() -> dict:
    windows = {f"{LEVER_NS}/{VERIFIED}": 60, f"{LEVER_NS}/{LINGER}": 10, f"{LEVER_NS}/{LATE}": 3}
    return {"rollout_verify_seconds": 5, "api_timeout_seconds": 5, "rollout_verify_by_rollout": windows}


def req_of(reply: str) -> str:
    found = re.search(r"\bREQ-\d+\b", reply)
    assert found, reply
    return found.group(0)


async def pull(app, name: str) -> tuple[str, Any]:
    """Plan (dry run), then pull rollout-abort as the model role, the IC approving when asked (this
    server is the cell and the fleet context, so it asks); the reply and the request's record."""
    asked = []

    async def ask(svc, inc, rec):
        asked.append(rec)

    replace_hook(app, hooks.APPROVAL_REQUESTED, ask)
    inc = await app.declare(cells=("us-east-3",), roles={"model": MODEL})
    store = lever_store(app.services)
    command = f"lever rollout-abort {LEVER_NS}/{name} --cell us-east-3"
    dry = await say(app, f"{command} --dry-run", MODEL, inc.channel_id, timeout=60)
    assert "(dry run)" in dry and "Nothing was changed" in dry, dry
    assert (await store.get(req_of(dry))).result["ok"] is True  # the real server accepted both calls
    out = await say(app, command, MODEL, inc.channel_id, timeout=120)
    req = req_of(out)
    if asked:
        assert "needs approval" in out, out
        assert await store.transition(asked[-1].id, {"pending_approval"}, "approved", approved_by="U_IC")
        out = (await execute_approved(app.services, asked[-1].id, "U_IC")).message
    return out, await store.get(req)


async def test_rollout_abort_lever_is_verified_by_the_real_controllers_status(
    app,
    deployed: KubeAPIServer,
    argo_controller: ArgoController,
):
    """Plan, pull and verify by Argo's own status, as the bot's ServiceAccount through deploy/'s RBAC: the
    verify waits on Argo scaling stable back and the canary down, and on the pods following."""
    s, ctl, name = deployed, argo_controller, VERIFIED
    objs = [canary(name, LEVER_NS, "v1")]
    try:
        async with follow_replica_sets(s, LEVER_NS, f"app={name}"):
            stable, current = await paused_canary(s, ctl, name, LEVER_NS)
            assert not (await asyncio.to_thread(rollout, s, name, LEVER_NS))["status"].get("abort")
            out, rec = await pull(app, name)
            assert rec.state == "done" and rec.result.get("verified") is True, (out, rec.result)
            assert rec.result["verify"] == (
                "aborted; RolloutAborted: Rollout aborted update to revision 2; "
                f"stable ReplicaSet {name}-{stable} 5/5 available; no pod of the aborted revision left"
            ), rec.result
            # Its price, from what Argo wrote: 20% on the new revision (a basic canary: the setWeight reached).
            assert f"traffic on the new revision ({current}), back to stable: 20 %" in out, out
            assert f"revision restored (the stable ReplicaSet): revision 1 (ReplicaSet {name}-{stable}" in out, out

            ro = await asyncio.to_thread(rollout, s, name, LEVER_NS)
            st = ro["status"]
            assert st["abort"] is True and st["phase"] == "Degraded", st
            assert st["message"] == "RolloutAborted: Rollout aborted update to revision 2", st
            assert {FIELD_MANAGER, ARGO} <= status_managers(ro), status_managers(ro)
            assert (ro["metadata"].get("annotations") or {}).get("firebreak.io/request") == rec.id
            sets = await asyncio.to_thread(by_hash, s, name, LEVER_NS)
            assert (sets[current]["spec"]["replicas"], sets[stable]["spec"]["replicas"]) == (0, 5)
            assert (sets[current]["status"]["replicas"], sets[stable]["status"]["availableReplicas"]) == (0, 5)
    finally:
        await asyncio.to_thread(cleanup, s, objs)


async def test_rollout_abort_is_not_verified_while_a_canary_pod_is_up(
    app,
    deployed: KubeAPIServer,
    argo_controller: ArgoController,
):
    """A basic canary splits traffic by pod count. Argo marks the abort Degraded and scales the canary's
    ReplicaSet to 0 in one pass, before any pod goes; here its pod never goes (nothing reports it), while
    stable comes back in full. The lever must not call stable back while that pod is up."""
    s, ctl, name = deployed, argo_controller, LINGER
    objs = [canary(name, LEVER_NS, "v1")]
    try:
        async with follow_replica_sets(s, LEVER_NS, f"app={name}"):
            stable, current = await paused_canary(s, ctl, name, LEVER_NS)
        # From here only stable's pods follow Argo's scaling; the canary's one pod stays up.
        async with follow_replica_sets(s, LEVER_NS, f"app={name},{HASH_LABEL}={stable}"):
            out, rec = await pull(app, name)
            assert rec.state == "done" and rec.result.get("verified") is False, (out, rec.result)
            assert f"1 pod(s) of the aborted revision ({current}) still up after 10s" in out, out
            ro = await asyncio.to_thread(rollout, s, name, LEVER_NS)
            st = ro["status"]
            # Argo's own view meanwhile: aborted, one pod of revision 2 still counted.
            assert st["phase"] == "Degraded" and st["updatedReplicas"] == 1, st
            sets = await asyncio.to_thread(by_hash, s, name, LEVER_NS)
            assert sets[current]["spec"]["replicas"] == 0 and sets[stable]["status"]["availableReplicas"] == 5
    finally:
        await asyncio.to_thread(cleanup, s, objs)


async def test_rollout_abort_is_read_again_when_argos_progress_deadline_ends(
    app,
    deployed: KubeAPIServer,
    argo_controller: ArgoController,
):
    """The Rollout sets no spec.progressDeadlineSeconds, so Argo has its default 600 s (utils/defaults
    GetProgressDeadlineSecondsOrDefault) to settle the abort. Stable's pods come back only after the pull
    has answered (a model server loading): the pull says NOT verified yet and when it looks again; at
    600 s the verdict is read again from Argo's status, once, and posted (issue 34)."""
    s, ctl, name = deployed, argo_controller, LATE
    objs = [canary(name, LEVER_NS, "v1")]
    try:
        async with follow_replica_sets(s, LEVER_NS, f"app={name}"):
            stable, current = await paused_canary(s, ctl, name, LEVER_NS)
        out, rec = await pull(app, name)  # nothing reports stable's new pods while the pull waits
        assert rec.state == "done" and rec.result.get("verified") is False, (out, rec.result)
        assert "(Argo's default progress deadline, 600s): Firebreak checks again then" in out, out
        async with follow_replica_sets(s, LEVER_NS, f"app={name}"):
            await until(
                ctl, "stable is back in full and the canary gone", lambda: rollout(s, name, LEVER_NS),
                lambda ro: ro["status"].get("phase") == "Degraded" and not ro["status"].get("updatedReplicas")
                and ro["status"].get("availableReplicas") == 5,
            )  # fmt: skip
            app.clock.advance(601)
            await app.tick()
        again = (await lever_store(app.services).get(rec.id)).result
        assert again["rechecked"] is True and again["verified"] is True, again
        assert again["verify"].startswith("aborted; RolloutAborted: Rollout aborted update to revision 2; "), again
        assert f"stable ReplicaSet {name}-{stable} 5/5 available" in again["verify"], again
        [entry] = [e for e in await audit_entries(app, rec.incident) if e["action"] == "lever.rechecked"]
        assert "checked again when the progress deadline" in entry["detail"]["message"], entry
        assert current not in again["verify"]  # nothing of the aborted revision is left to name
    finally:
        await asyncio.to_thread(cleanup, s, objs)
