"""kueue-hold / kueue-hold-drain: stop admissions on a ClusterQueue (spec.stopPolicy).

Kueue serves ClusterQueue as v1beta2 (storage) and the deprecated v1beta1; a cluster on an older
Kueue serves only v1beta1. spec.stopPolicy is the same field in both, so either works: the newest
one the cluster serves is used (levers.base.version_of).
"""

from __future__ import annotations

from typing import Any, ClassVar

from bot.clusters import KubeError
from bot.policy.levers import LeverRule
from levers import gangs
from levers.base import Access, Ctx, Kind, Lever, Writes
from levers.catalogue.jobset import WORKLOAD, finished
from levers.catalogue.simple import merge_plan
from levers.plan import Plan
from levers.price import Cost, Price

CLUSTER_QUEUE = Kind("ClusterQueue", "kueue.x-k8s.io", "v1beta2", "clusterqueues", namespaced=False, older=("v1beta1",))


class _StopPolicy(Lever):
    kind = CLUSTER_QUEUE
    needs = (
        Access.on(CLUSTER_QUEUE, "get", "patch"),  # read, merge patch (and the fence, undo's JSON patch)
        # The price: the queue's admitted Workloads in the policy's namespaces for this lever.
        Access.on(WORKLOAD, "list"),
    )
    stop: ClassVar[str]

    async def plan(self, ctx: Ctx, obj: dict[str, Any]) -> Plan:
        return merge_plan(self, ctx, obj, {"/spec/stopPolicy": self.stop}, f"stopPolicy={self.stop}")

    def writes(self, ctx: Ctx, path: str) -> Writes:
        return {"/spec/stopPolicy": self.stop}

    async def price(self, ctx: Ctx, obj: dict[str, Any], plan: Plan) -> Price:
        """Workloads held back (pending) and, for a drain, evicted, with their GPUs."""
        queue = obj["metadata"]["name"]
        pending = (obj.get("status") or {}).get("pendingWorkloads")
        costs = [
            Cost(
                what=f"ClusterQueue {queue}: workloads pending, not admitted while it holds",
                unit="workloads",
                value=pending if isinstance(pending, int) else None,
                how="status.pendingWorkloads"
                if isinstance(pending, int)
                else "the queue has no status.pendingWorkloads",
            )
        ]
        notes = ["the pending workloads' GPUs are not read (Kueue names their queue only on their LocalQueue)"]
        admitted, gpus, missing = await self._admitted(ctx, queue)
        if missing:
            notes.append(missing)
        if self.stop == "HoldAndDrain":
            what = f"ClusterQueue {queue}: admitted workloads evicted"
            how = _how(ctx, self.name) if admitted is not None else missing
            costs.append(Cost(what=what, unit="workloads", value=admitted, how=how))
            costs.append(Cost(what=what, unit="GPUs", value=gpus, how="their podSets" if gpus is not None else missing))
        elif admitted is not None:
            keep = "workloads keep" if admitted != 1 else "workload keeps"
            notes.append(f"{admitted} admitted {keep} running ({gangs.figure_gpus(gpus)})")
        return Price(costs=tuple(costs), notes=tuple(notes))

    async def _admitted(self, ctx: Ctx, queue: str) -> tuple[int | None, int | None, str]:
        """(workloads admitted to `queue` and not finished, their GPUs, what could not be read) in the
        policy's namespaces."""
        names = ctx.policy.namespaces.get(self.name) or []
        if not names:
            return (
                None,
                None,
                f"policies/levers.yaml `namespaces` names none for {self.name}: its Workloads are not read",
            )
        version = await ctx.kube.served_version(WORKLOAD.group, WORKLOAD.versions, WORKLOAD.plural)
        if version is None:
            return None, None, "this cluster serves no Kueue Workload API"
        count, gpus = 0, 0
        for ns in names:
            try:
                listing = await ctx.kube.list_all(
                    f"/apis/{WORKLOAD.group}/{version}/namespaces/{ns}/{WORKLOAD.plural}", {}
                )
            except KubeError as e:
                return None, None, f"could not list Workloads in {ns}: {e}"
            for wl in listing:
                if ((wl.get("status") or {}).get("admission") or {}).get("clusterQueue") != queue:
                    continue
                # Kueue never clears a finished Workload's admission; it holds no quota and runs nothing.
                if finished(wl) is not None:
                    continue
                try:
                    gpus += gangs.workload_gpus(wl)
                except (gangs.Unreadable, ValueError, TypeError) as e:
                    return None, None, f"Workload {ns}/{wl['metadata']['name']}: {e}"
                count += 1
        return count, gpus, ""


def _how(ctx: Ctx, lever: str) -> str:
    return "status.admission.clusterQueue of the Workloads in " + ", ".join(ctx.policy.namespaces.get(lever) or [])


class KueueHold(_StopPolicy):
    name = "kueue-hold"
    summary = "ClusterQueue stopPolicy=Hold: no new admissions, running work continues"
    default_rule = LeverRule(roles=["ops"])
    stop = "Hold"


class KueueHoldDrain(_StopPolicy):
    name = "kueue-hold-drain"
    summary = "ClusterQueue stopPolicy=HoldAndDrain: also evicts admitted workloads"
    default_rule = LeverRule(roles=["ops"], needs_approval=True, why="HoldAndDrain evicts admitted workloads")
    stop = "HoldAndDrain"
