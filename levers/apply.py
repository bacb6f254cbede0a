"""Sending a plan so that it lands whole or not at all.

- 409 (or a failed JSON-patch `test` op; a schema 422 is final) once: re-read; if what we change is as
  planned, re-plan against the new resourceVersion and send again; otherwise
  fail with "changed under us".
- A later call failing after an earlier one landed: the earlier fields are
  restored (guarded JSON patch) before the failure is reported.
- A timeout, or a 5xx (the API server, or a proxy in front of it, failed
  after the write may have been stored): read back. Landed: fine. Not landed:
  bump the resourceVersion with a fence annotation (then remove it), so the
  in-flight write, which carries the old resourceVersion, can never land late.
"""

from __future__ import annotations

from typing import Any

from bot import logs
from bot.clusters import KubeError
from levers import messages
from levers.base import Ctx, Lever
from levers.plan import ABSENT, ANNOTATIONS, JSON_PATCH, MERGE, ApiCall, Plan, container_pre, ptr, read, restore_ops

log = logs.get(__name__)
FENCE = "firebreak.io/fence"


class Changed(Exception):
    """The object moved away from the plan between read and write; nothing was applied."""


class NotApplied(Exception):
    """An API error with the guarantee that nothing is left changed (message says so if unsure)."""

    def __init__(self, error: KubeError, note: str = "nothing changed") -> None:
        super().__init__(str(error))
        self.error = error
        self.note = note


def landed(obj: dict[str, Any], plan: Plan) -> bool:
    return all(read(obj, p) == v for p, v in plan.changes.items())


def unsure(e: KubeError) -> bool:
    """The write may or may not have been stored: no answer in time, or a server-side 5xx."""
    return e.timeout or (e.code is not None and e.code >= 500)


def _conflict(e: KubeError, call: ApiCall) -> bool:
    return e.code == 409 or (call.content_type == JSON_PATCH and e.test_failed)


async def apply_plan(lever: Lever, ctx: Ctx, plan: Plan) -> tuple[Plan, dict[str, Any]]:
    """Returns the plan that landed (re-planned after a conflict) and the last API response."""
    for attempt in (1, 2):
        try:
            return plan, await _send_all(lever, ctx, plan)
        except KubeError as e:
            if unsure(e):
                return plan, await _after_timeout(lever, ctx, plan, e)
            if attempt == 2 or not _conflict(e, plan.calls[0]):
                raise NotApplied(e) from None
            obj = await ctx.kube.get(lever.path(ctx))
            fresh = await lever.plan(ctx, obj)
            fresh.price = plan.price  # the retry runs at the price it was pulled at; only the object may differ
            if fresh.digest() != plan.digest():
                raise Changed(
                    f"{ctx.target} changed while Firebreak was writing ({messages.api_error(e)}); nothing applied. "
                    "Pull the lever again to plan from its new state."
                ) from None
            log.info("lever_conflict_retry", request=ctx.req_id)
            plan = fresh
    raise AssertionError("unreachable")


async def _send_all(lever: Lever, ctx: Ctx, plan: Plan) -> dict[str, Any]:
    resp: dict[str, Any] = {}
    for k, call in enumerate(plan.calls):
        try:
            resp = await ctx.kube.send(call)
        except KubeError as e:
            if k == 0:
                raise
            if unsure(e):
                obj = await ctx.kube.get(lever.object_path(ctx, plan))
                if landed(obj, plan):
                    return obj
            await _compensate(lever, ctx, plan, e)
            raise NotApplied(
                e,
                "nothing changed"
                if not unsure(e)
                else "read back: not applied, but the API server may still apply it late: check it",
            ) from None
    return resp


async def _compensate(lever: Lever, ctx: Ctx, plan: Plan, cause: KubeError) -> None:
    """Undo the fields earlier calls set (metadata), leaving the object as it was."""
    path = lever.object_path(ctx, plan)
    current = await ctx.kube.get(path)
    ops = lever.undo_ops(plan.changes, plan.pre_state, current)
    if ops:
        try:
            await ctx.kube.call("PATCH", path, JSON_PATCH, ops)
        except KubeError as e:
            note = f"and restoring the provenance annotations failed too ({messages.api_error(e)}): check {ctx.target}"
            raise NotApplied(cause, note) from None


async def _after_timeout(lever: Lever, ctx: Ctx, plan: Plan, cause: KubeError) -> dict[str, Any]:
    path = lever.object_path(ctx, plan)
    try:
        obj = await ctx.kube.get(path)
        if landed(obj, plan):
            return obj
        fence_key = ptr("metadata", "annotations", FENCE)
        rv = obj["metadata"]["resourceVersion"]
        fence = {"metadata": {"resourceVersion": rv, "annotations": {FENCE: ctx.req_id}}}
        try:
            fenced = await ctx.kube.call("PATCH", path, MERGE, fence)
        except KubeError as e:
            if e.code != 409:
                raise
            obj = await ctx.kube.get(path)  # something wrote first: ours, or someone's that our write can't follow
            if landed(obj, plan):
                return obj
            note = "nothing changed (read back; the object has moved on, so the slow write can't land)"
            raise NotApplied(cause, note) from None
        # Of a plan of several calls, the first (the provenance annotations) may have been stored
        # before the one that got no answer: that goes back with the fence.
        part = {
            p: v
            for p, v in plan.changes.items()
            if not p.startswith("/status/") and read(obj, p) == v and plan.pre_state.get(p, ABSENT) != v
        }
        pre = {fence_key: read(obj, fence_key)}
        container_pre(obj, pre, ANNOTATIONS)
        pre = {**pre, **plan.pre_state} if part else pre
        await ctx.kube.call("PATCH", path, JSON_PATCH, restore_ops({fence_key: ctx.req_id, **part}, pre, fenced))
    except KubeError as e:
        note = f"and checking what landed failed ({messages.api_error(e)}): check {ctx.target} by hand"
        raise NotApplied(cause, note) from None
    raise NotApplied(cause, "nothing changed (read back, and fenced so the slow write can't land late)")
