"""The common shape: set a few fields with one guarded JSON merge patch."""

from __future__ import annotations

from typing import Any

from levers.base import Ctx, Lever
from levers.plan import Plan, merge_body, read, with_provenance


def merge_plan(
    lever: Lever, ctx: Ctx, obj: dict[str, Any], changes: dict[str, Any], effect: str, pre: dict[str, Any] | None = None
) -> Plan:
    """One PATCH (merge) carrying metadata.resourceVersion, so it applies only to the object we read."""
    pre = dict(pre or {})
    for p in changes:
        pre[p] = read(obj, p)
    changes = dict(changes)
    with_provenance(obj, changes, pre, ctx.req_id, ctx.incident)
    body = merge_body(changes, obj["metadata"].get("resourceVersion"))
    return Plan([lever.merge_call(ctx, body)], changes, pre, effect)
