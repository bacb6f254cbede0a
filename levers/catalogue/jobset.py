"""jobset-suspend: the training-hang move; keeps the object and its history. Undo resumes."""

from __future__ import annotations

from typing import Any

from levers.base import Ctx, Kind, Lever
from levers.catalogue.simple import merge_plan
from levers.plan import Plan


class JobSetSuspend(Lever):
    name = "jobset-suspend"
    kind = Kind("JobSet", "jobset.x-k8s.io", "v1alpha2", "jobsets", namespaced=True)
    summary = "JobSet spec.suspend=true (stops the bleed, keeps the object)"

    async def plan(self, ctx: Ctx, obj: dict[str, Any]) -> Plan:
        return merge_plan(self, ctx, obj, {"/spec/suspend": True}, "suspend=true")
