"""rollout-abort: abort an Argo Rollout; verify stable is back at 100%.

Mirrors `kubectl argo rollouts abort`: a merge patch {"status":{"abort":true}}
on the status subresource. Provenance goes on the main resource first, since
/status writes can't change metadata. Not undoable here: re-promoting is a deploy.
"""

from __future__ import annotations

import asyncio
import shlex
from typing import Any

from levers.base import Ctx, Kind, Lever, Verified
from levers.plan import ApiCall, Plan, merge_body, read, with_provenance

ABORT = {"status": {"abort": True}}


def stable_share(obj: dict[str, Any]) -> tuple[int | None, int | None]:
    weights = ((obj.get("status") or {}).get("canary") or {}).get("weights") or {}
    stable = (weights.get("stable") or {}).get("weight")
    canary = (weights.get("canary") or {}).get("weight")
    return stable, canary


class RolloutAbort(Lever):
    name = "rollout-abort"
    kind = Kind("Rollout", "argoproj.io", "v1alpha1", "rollouts", namespaced=True)
    summary = "abort an Argo Rollout (stable back to 100%)"
    reversible = False
    not_reversible_why = (
        "an aborted rollout goes forward again only by re-promoting it, which is a deploy: "
        "use your deploy tooling (kubectl argo rollouts promote/retry), not Firebreak"
    )

    async def plan(self, ctx: Ctx, obj: dict[str, Any]) -> Plan:
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
        return Plan([annotate, abort], changes, pre, "abort=true")

    async def verify(self, ctx: Ctx, plan: Plan, after: dict[str, Any]) -> Verified:
        # Nothing here reconciles: the Argo controller does, so give it a bounded while.
        deadline = asyncio.get_running_loop().time() + ctx.policy.rollout_verify_seconds
        while True:
            aborted = read(after, "/status/abort") is True
            stable, canary = stable_share(after)
            if aborted and stable == 100:
                return Verified(True, "aborted; stable back at 100%")
            if asyncio.get_running_loop().time() >= deadline:
                break
            await asyncio.sleep(1)
            after = await ctx.kube.get(self.path(ctx))
        if not aborted:
            return Verified(False, "status.abort is not set on read-back")
        share = f"stable at {stable}%, canary {canary}%" if stable is not None else "no canary weights in status"
        return Verified(
            False,
            f"abort set, but {share} after {ctx.policy.rollout_verify_seconds:g}s: "
            f"watch `kubectl argo rollouts get rollout {ctx.target.name} -n {ctx.target.namespace}`",
        )
