"""rollout-abort: abort an Argo Rollout; verify by Argo's own status that stable serves again.

Mirrors `kubectl argo rollouts abort`: a merge patch {"status":{"abort":true}}
on the status subresource. Provenance goes on the main resource first, since
/status writes can't change metadata. Not undoable here: re-promoting is a deploy.

Verified (argo-rollouts v1.9; v1.10.1 runs against it in tests/realkube/test_argo_real.py), for canary
and blue-green alike, when the controller has
- marked it aborted: status.phase "Degraded", status.message "RolloutAborted: ..."
  (utils/rollout/rolloututil.go CalculateRolloutPhase, from the Progressing condition
  rollout/sync.go calculateRolloutConditions sets with reason RolloutAborted);
- the stable ReplicaSet (label rollouts-pod-template-hash = status.stableRS) fully available
  (utils/replicaset/replicaset.go IsReplicaSetAvailable: spec.replicas <= availableReplicas) at the
  rollout's full size;
- blue-green: the active service back on stable, status.blueGreen.activeSelector == stableRS
  (rollout/service.go reconcileActiveService switches it to StableRS on abort);
- canary with trafficRouting: status.canary.weights.stable.weight at the max traffic weight
  (100 unless trafficRouting.maxTrafficWeight; rollout/trafficrouting.go calculateWeightStatus).
- a basic canary (no trafficRouting, no weights in status: reconcileTrafficRouting sets them nil)
  splits traffic by pod count, so no pod of the aborted revision left: status.updatedReplicas 0
  (rollout/sync.go calculateBaseStatus: the new ReplicaSet's status.replicas). Argo scales that
  ReplicaSet to 0 at once on abort, but the ReplicaSet controller reports its pods gone only later;
  until then Argo already says Degraded and stable may already be full.
"""

from __future__ import annotations

import asyncio
import shlex
from dataclasses import dataclass
from typing import Any

from bot.clock import hhmm
from bot.clusters import KubeError
from bot.policy.levers import LeverRule, LeversPolicy
from levers import recheck
from levers.base import Access, Ctx, Kind, Lever, LeverRefusal, Verified, Writes
from levers.plan import ApiCall, Plan, merge_body, read, with_provenance
from levers.price import Cost, Price

ABORT = {"status": {"abort": True}}


ABORTED = "RolloutAborted"  # conditions.RolloutAbortedReason
DEGRADED = "Degraded"  # v1alpha1.RolloutPhaseDegraded
HASH_LABEL = "rollouts-pod-template-hash"  # v1alpha1.DefaultRolloutUniqueLabelKey
REVISION = "rollout.argoproj.io/revision"  # annotations.RevisionAnnotation, on each ReplicaSet


# defaults.DefaultProgressDeadlineSeconds: what Argo applies when spec.progressDeadlineSeconds is unset
# (utils/defaults/defaults.go GetProgressDeadlineSecondsOrDefault, v1.10.1; the CRD has no default).
ARGO_PROGRESS_DEADLINE = 600


@dataclass(frozen=True)
class Window:
    wait: float  # how long the pull waits for Argo before it answers
    wait_why: str
    deadline: float  # when Argo's own window ends, from the apply: the verdict is read again then
    deadline_why: str


def verify_window(policy: LeversPolicy, target: str, ro: dict[str, Any]) -> Window:
    """How long verify waits for Argo, and until when Argo may still settle the abort: its progress
    deadline (the rollout's spec.progressDeadlineSeconds, else Argo's 600 s; a model server may take
    minutes to load). The pull waits the policy's value for this rollout, else rollout_verify_seconds, at
    most that deadline and below stuck_after_seconds (so the in-flight timer never settles a request still
    verifying); a verdict still open then is read again when the deadline ends (levers/recheck.py)."""
    pds = (ro.get("spec") or {}).get("progressDeadlineSeconds")
    if isinstance(pds, int) and pds > 0:
        deadline, deadline_why = float(pds), f"the rollout's progressDeadlineSeconds, {pds}s"
    else:
        deadline = float(ARGO_PROGRESS_DEADLINE)
        deadline_why = f"Argo's default progress deadline, {ARGO_PROGRESS_DEADLINE}s"
    if target in policy.rollout_verify_by_rollout:
        wait, why = policy.rollout_verify_by_rollout[target], "policy rollout_verify_by_rollout"
    else:
        wait, why = policy.rollout_verify_seconds, "policy rollout_verify_seconds"
    if wait > deadline:
        wait, why = deadline, deadline_why
    cap = max(policy.stuck_after_seconds - 2 * policy.api_timeout_seconds, 0)
    if wait > cap:
        wait, why = cap, f"{why}, capped below stuck_after_seconds"
    return Window(wait, why, deadline, deadline_why)


def stable_share(obj: dict[str, Any]) -> tuple[int | None, int | None]:
    weights = ((obj.get("status") or {}).get("canary") or {}).get("weights") or {}
    stable = (weights.get("stable") or {}).get("weight")
    canary = (weights.get("canary") or {}).get("weight")
    return stable, canary


def canary_share(obj: dict[str, Any]) -> Cost:
    """The share of traffic the new revision serves now, which the abort sends back to stable: Argo's
    own status weights (traffic routing), else the active service (blue-green), else the desired
    weight of the last setWeight step reached (a basic canary: approximated by its pod counts)."""
    status = obj.get("status") or {}
    strategy = (obj.get("spec") or {}).get("strategy") or {}
    current = status.get("currentPodHash")
    what = f"traffic on the new revision ({current or 'unknown hash'}), back to stable"
    stable_w, canary_w = stable_share(obj)
    if isinstance(canary_w, int):
        top = stable_w + canary_w if isinstance(stable_w, int) and stable_w + canary_w else 100
        return Cost(what=what, unit="%", value=round(100 * canary_w / top, 1), how="Argo's status.canary.weights")
    if "blueGreen" in strategy:
        active = (status.get("blueGreen") or {}).get("activeSelector")
        if not active:
            return Cost(what=what, unit="%", value=None, how="status.blueGreen.activeSelector is empty")
        return Cost(
            what=what, unit="%", value=100.0 if active == current else 0.0, how=f"the active service selects {active}"
        )
    steps = (strategy.get("canary") or {}).get("steps") or []
    index = status.get("currentStepIndex")
    if not isinstance(index, int):
        return Cost(what=what, unit="%", value=None, how="no traffic weights and no status.currentStepIndex")
    reached = [
        s["setWeight"] for s in steps[: index + 1] if isinstance(s, dict) and isinstance(s.get("setWeight"), int)
    ]
    if not reached:
        return Cost(what=what, unit="%", value=0.0, how=f"no setWeight step reached (step {index})")
    return Cost(
        what=what, unit="%", value=float(reached[-1]), how=f"setWeight of step {index} or before (desired weight)"
    )


def _owned_by(rs: dict[str, Any], rollout: str) -> bool:
    refs = (rs.get("metadata") or {}).get("ownerReferences") or []
    return any(r.get("kind") == "Rollout" and r.get("name") == rollout for r in refs)


class RolloutAbort(Lever):
    name = "rollout-abort"
    default_rule = LeverRule(roles=["model"])
    kind = Kind("Rollout", "argoproj.io", "v1alpha1", "rollouts", namespaced=True)
    needs = (
        Access.on(kind, "get", "patch"),  # read, provenance annotations (and their restore, the fence)
        Access.on(kind, "patch", sub="status"),  # status.abort, as `kubectl argo rollouts abort`
        # verify and the price: the stable ReplicaSet, by its pod-template hash
        Access("apps", "replicasets", ("list",)),
    )
    summary = "abort an Argo Rollout (stable back to 100%)"
    reversible = False
    not_reversible_why = (
        "an aborted rollout goes forward again only by re-promoting it, which is a deploy: "
        "use your deploy tooling (kubectl argo rollouts promote/retry), not Firebreak"
    )

    def writes(self, ctx: Ctx, path: str) -> Writes:
        return {"/status/abort": True}

    async def plan(self, ctx: Ctx, obj: dict[str, Any]) -> Plan:
        status = obj.get("status") or {}
        stable = status.get("stableRS")
        if stable and stable == status.get("currentPodHash"):
            # Argo clears status.abort on a fully promoted rollout (rollout/controller.go newRolloutContext,
            # rolloututil.IsFullyPromoted): an abort there would be undone at once and never verified.
            raise LeverRefusal(
                f"nothing to abort: {ctx.target} is fully promoted (its stable ReplicaSet {stable} is the "
                "current pod template), and Argo clears an abort there. To go back to an older revision, "
                f"roll back with your deploy tooling (kubectl argo rollouts undo {ctx.target.name} "
                f"-n {ctx.target.namespace})."
            )
        changes: dict[str, Any] = {}
        pre: dict[str, Any] = {"/status/abort": read(obj, "/status/abort")}
        with_provenance(obj, changes, pre, ctx.req_id, ctx.incident)
        annotate = self.merge_call(ctx, merge_body(changes, obj["metadata"].get("resourceVersion")))
        abort = self.merge_call(ctx, ABORT, sub="status")
        plugin = [
            "kubectl",
            "--context",
            ctx.context,
            "argo",
            "rollouts",
            "abort",
            ctx.target.name,
            "-n",
            ctx.target.namespace or "default",
        ]
        abort = ApiCall(
            abort.method,
            abort.path,
            abort.content_type,
            abort.body,
            f"{abort.kubectl}  # = {' '.join(shlex.quote(p) for p in plugin)}",
        )
        changes["/status/abort"] = True
        w = verify_window(ctx.policy, str(ctx.target), obj)
        plan = Plan([annotate, abort], changes, pre, "abort=true")
        later = (
            f"; if Argo has not settled it by then, Firebreak checks again when its progress deadline ends, "
            f"{w.deadline:g}s after applying ({w.deadline_why})"
            if w.deadline > w.wait
            else ""
        )
        plan.notes.append(f"verify waits up to {w.wait:g}s for Argo to settle the abort ({w.wait_why}){later}")
        return plan

    async def price(self, ctx: Ctx, obj: dict[str, Any], plan: Plan) -> Price:
        """The traffic share the new revision has now (it goes back to stable) and the revision restored."""
        return Price(costs=(canary_share(obj), await self._restored(ctx, obj)))

    async def _restored(self, ctx: Ctx, obj: dict[str, Any]) -> Cost:
        stable = (obj.get("status") or {}).get("stableRS")
        what = "revision restored (the stable ReplicaSet)"
        if not stable:
            return Cost(what=what, unit="revision", value=None, how="status.stableRS is empty")
        ns = ctx.target.namespace or "default"
        try:
            found = await ctx.kube.get(
                f"/apis/apps/v1/namespaces/{ns}/replicasets", {"labelSelector": f"{HASH_LABEL}={stable}"}
            )
        except KubeError as e:
            return Cost(what=what, unit="revision", value=None, how=f"pod-template-hash {stable}; {e}")
        items = [rs for rs in found.get("items") or [] if _owned_by(rs, ctx.target.name)] or [
            rs for rs in found.get("items") or [] if not (rs.get("metadata") or {}).get("ownerReferences")
        ]
        if len(items) != 1:
            why = f"{len(items) or 'no'} ReplicaSets of it labelled {HASH_LABEL}={stable}"
            return Cost(what=what, unit="revision", value=None, how=f"pod-template-hash {stable}; {why}")
        meta = items[0].get("metadata") or {}
        revision = str((meta.get("annotations") or {}).get(REVISION, ""))
        how = f"ReplicaSet {meta.get('name')}, pod-template-hash {stable}"
        if not revision.isdigit():
            return Cost(what=what, unit="revision", value=None, how=f"{how}; no {REVISION} annotation")
        return Cost(what=what, unit="revision", value=float(revision), how=how)

    async def _stable_rs(self, ctx: Ctx, stable_hash: str) -> dict[str, Any] | None:
        """The Rollout's ReplicaSet whose pod-template hash is status.stableRS."""
        ns = ctx.target.namespace or "default"
        found = await ctx.kube.get(
            f"/apis/apps/v1/namespaces/{ns}/replicasets", {"labelSelector": f"{HASH_LABEL}={stable_hash}"}
        )
        items = found.get("items") or []
        # Argo sets the owner reference; a ReplicaSet with no owner at all is taken as the Rollout's too.
        owned = [rs for rs in items if _owned_by(rs, ctx.target.name)]
        orphans = [rs for rs in items if not (rs.get("metadata") or {}).get("ownerReferences")]
        return next(iter(owned or orphans), None)

    async def _unmet(self, ctx: Ctx, ro: dict[str, Any]) -> tuple[list[str], list[str]]:
        """(what Argo's status does not show yet, what it does show), for the verdict."""
        status = ro.get("status") or {}
        strategy = (ro.get("spec") or {}).get("strategy") or {}
        unmet: list[str] = []
        seen: list[str] = []
        phase, message = status.get("phase"), str(status.get("message") or "")
        marked = phase == DEGRADED and message.startswith(ABORTED + ":")
        if marked:
            seen.append(message)
        else:
            unmet.append(f"Argo has not marked it aborted (phase {phase or 'unset'}: {message or 'no message'})")
        stable = status.get("stableRS")
        rs = await self._stable_rs(ctx, stable) if stable else None
        if not stable:
            unmet.append("status.stableRS is empty")
        elif rs is None:
            unmet.append(f"no ReplicaSet labelled {HASH_LABEL}={stable}")
        else:
            # Aborted, the desired canary weight is 0, so the stable ReplicaSet goes back to the
            # rollout's full size (utils/replicaset/canary.go CalculateReplicaCountsForBasicCanary,
            # CalculateReplicaCountsForTrafficRoutedCanary), all of it available.
            want = max((rs.get("spec") or {}).get("replicas") or 0, (ro.get("spec") or {}).get("replicas", 1))
            have = (rs.get("status") or {}).get("availableReplicas") or 0
            name = rs["metadata"]["name"]
            (seen if want and have >= want else unmet).append(f"stable ReplicaSet {name} {have}/{want} available")
        if "blueGreen" in strategy:
            active = (status.get("blueGreen") or {}).get("activeSelector")
            if stable and active == stable:
                seen.append("active service on stable")
            else:
                unmet.append(f"the active service selects {active or 'nothing'}, not stable {stable}")
        elif ((strategy.get("canary") or {}).get("trafficRouting")) is not None:
            top = strategy["canary"]["trafficRouting"].get("maxTrafficWeight") or 100
            share, canary = stable_share(ro)
            if share == top:
                seen.append(f"stable back at {share}%" if top == 100 else f"stable at {share} of {top}")
            elif share is None:
                unmet.append("no traffic weights in status")
            else:
                unmet.append(f"stable at {share}%, canary {canary}%" if top == 100 else f"stable at {share} of {top}")
        elif "canary" in strategy and marked:
            # Only once Argo marked it aborted: it scales the new ReplicaSet to 0 in that same pass, so
            # before then its pods are still up as a matter of course (the verdict already says why).
            left = status.get("updatedReplicas") or 0
            current = status.get("currentPodHash") or "unknown hash"
            if left:
                unmet.append(f"{left} pod(s) of the aborted revision ({current}) still up")
            else:
                seen.append("no pod of the aborted revision left")
        return unmet, seen

    async def settled(self, ctx: Ctx, ro: dict[str, Any], why: str) -> Verified:
        """One read of Argo's status, when its window (``why``) has ended (levers/recheck.py)."""
        if read(ro, "/status/abort") is not True:
            return Verified(False, "status.abort is no longer set (the rollout was retried or promoted since)")
        unmet, seen = await self._unmet(ctx, ro)
        if not unmet:
            return Verified(True, "aborted; " + "; ".join(seen))
        watch = f"kubectl argo rollouts get rollout {ctx.target.name} -n {ctx.target.namespace}"
        return Verified(False, f"{'; '.join(unmet)}: watch `{watch}`")

    async def verify(self, ctx: Ctx, plan: Plan, after: dict[str, Any]) -> Verified:
        # Nothing here reconciles: the Argo controller does, so give it a bounded while, and read it
        # again when its progress deadline ends if that is later.
        loop = asyncio.get_running_loop()
        applied = ctx.svc.clock.now()
        w = verify_window(ctx.policy, str(ctx.target), after)
        deadline = loop.time() + w.wait
        unmet: list[str] = []
        while True:
            aborted = read(after, "/status/abort") is True
            if aborted:
                unmet, seen = await self._unmet(ctx, after)
                if not unmet:
                    return Verified(True, "aborted; " + "; ".join(seen))
            if loop.time() >= deadline:
                break
            await asyncio.sleep(0.5)
            after = await ctx.kube.get(self.path(ctx))
        if not aborted:
            return Verified(False, "status.abort is not set on read-back")
        if w.deadline > w.wait:
            due = applied + w.deadline
            await recheck.at(ctx, due, "rollout", f"the progress deadline ({w.deadline_why})")
            return Verified(
                False,
                f"abort set, but {'; '.join(unmet)} after {w.wait:g}s. Argo may still settle it until "
                f"{hhmm(due)} UTC ({w.deadline_why}): Firebreak checks again then and posts the verdict here",
            )
        return Verified(
            False,
            f"abort set, but {'; '.join(unmet)} after {w.wait:g}s: "
            f"watch `kubectl argo rollouts get rollout {ctx.target.name} -n {ctx.target.namespace}`",
        )
