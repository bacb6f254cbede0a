"""kueue-hold / kueue-hold-drain: stop admissions on a ClusterQueue (spec.stopPolicy).

Kueue serves ClusterQueue as v1beta2 (storage) and the deprecated v1beta1; a cluster on an older
Kueue serves only v1beta1. spec.stopPolicy is the same field in both, so either works: the newest
one the cluster serves is used (levers.base.version_of).
"""

from __future__ import annotations

from typing import Any, ClassVar

from bot.policy.levers import LeverRule
from levers.base import Access, Ctx, Kind, Lever
from levers.catalogue.simple import merge_plan
from levers.plan import Plan

CLUSTER_QUEUE = Kind("ClusterQueue", "kueue.x-k8s.io", "v1beta2", "clusterqueues", namespaced=False, older=("v1beta1",))


class _StopPolicy(Lever):
    kind = CLUSTER_QUEUE
    needs = (Access.on(CLUSTER_QUEUE, "get", "patch"),)  # read, merge patch (and the fence, undo's JSON patch)
    stop: ClassVar[str]

    async def plan(self, ctx: Ctx, obj: dict[str, Any]) -> Plan:
        return merge_plan(self, ctx, obj, {"/spec/stopPolicy": self.stop}, f"stopPolicy={self.stop}")


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
