"""Running an approved lever request exactly once: approved -> executing -> done | failed | stale.

The compare-and-set approved -> executing is the only way in, so double
clicks, retries and replicas can't run a request twice. The lever is
re-planned against the live object; if that plan differs from the one that
was approved, nothing is applied and the request goes stale. The timer that
settles the request if this process dies in flight is armed before the claim
(levers/inflight.py); losing the store after the write leaves it to that timer.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from redis.exceptions import RedisError

from bot import logs, metrics
from bot.chat.text import literal
from bot.clock import hhmm
from bot.clusters import KubeError, UnknownCell
from bot.core.posts import announce
from bot.core.services import Services
from levers import authz, bounds, evidence, gitops, hooks, inflight, messages, resolve
from levers.apply import Changed, NotApplied, apply_plan
from levers.base import Ctx, Lever, LeverRefusal, priced
from levers.catalogue import LEVERS
from levers.context import for_record
from levers.plan import Plan
from levers.price import Moves, Price, show
from levers.requests import LeverEvent, LeverRequest, LeverState
from levers.store import lever_store

log = logs.get(__name__)


@dataclass
class ExecResult:
    message: str
    ok: bool
    state: LeverState | None  # None: there is no such request


async def execute_approved(svc: Services, req_id: str, approver: str) -> ExecResult:
    store = lever_store(svc)
    rec = await store.get(req_id)
    if rec is None:
        return ExecResult(f"{req_id} does not exist.", False, None)
    inc = await svc.incidents.get(rec.incident)
    # Resolved before it ran: it never will (levers/resolve.py cancelled what it saw; this is one
    # that came after, e.g. a plan that finished as the incident was resolved).
    if inc is not None and not inc.is_open and await resolve.cancel(svc, rec, approver, f"{rec.incident} is resolved"):
        return ExecResult(f"{rec.label}: not run: {rec.incident} is resolved; nothing changed.", False, None)
    started = svc.clock.now()
    # Armed before the claim, so a process that dies (or loses its store) once it is executing
    # always leaves the timer that settles the request in a live replica (levers/inflight.py).
    await inflight.arm(svc, req_id, rec.incident, started)
    if not await store.transition(req_id, {LeverState.approved}, LeverState.executing, started_at=started):
        now = await store.get(req_id)
        state = now.state if now else None
        return ExecResult(f"{rec.label} is already {state or 'missing'}; nothing more was done.", False, state)
    return await _run(svc, rec.model_copy(update={"state": LeverState.executing, "started_at": started}), approver)


async def _finish(
    svc: Services, rec: LeverRequest, state: LeverState, message: str, ok: bool, **result: Any
) -> ExecResult:
    await lever_store(svc).transition(
        rec.id,
        {LeverState.executing},
        state,
        finished_at=svc.clock.now(),
        result={"ok": ok, "message": message, **result},
    )
    metrics.lever_settled(rec.lever, state, verified=ok)
    try:
        await inflight.disarm(svc, rec.id)
        await svc.audit.append(
            LeverEvent.settled(state).action,
            actor=rec.requester,
            incident=rec.incident,
            detail={
                **rec.ids(),
                "approved_by": rec.approved_by,
                "message": message,
                "price": rec.plan.get("price"),  # what it ran at: the drill report and the postmortem read it
                **result,
            },
        )
        warn = await announce(svc, rec.incident, message)
        if warn:
            log.warning("lever_outcome_not_posted", request=rec.id)
        # Every pull under a grant is reported, including the ones that failed or went stale.
        await hooks.grant_used(svc, rec, rec.grant_id)
    except RedisError:
        # The outcome is recorded (the transition above); only its audit and post are missing.
        log.exception("lever_outcome_not_audited", request=rec.id)
        return ExecResult(f"{message} (Firebreak lost its store before auditing and posting this.)", ok, state)
    return ExecResult(message, ok, state)


async def _run(svc: Services, rec: LeverRequest, approver: str) -> ExecResult:
    lever = LEVERS[rec.lever]
    denied = await authz.still_allowed(svc, rec)
    if denied:
        return await _finish(
            svc,
            rec,
            LeverState.failed,
            messages.failed(rec, f"not applied: {denied}; nothing changed"),
            False,
            reason="grant ended" if rec.grant_id else "role removed",
            denied=denied,
        )
    try:
        # The permission recheck above judges rec.cell; the context written to must be that cell's.
        await bounds.where(svc, rec)
    except bounds.Tampered as t:
        refused = await bounds.refuse(svc, rec, t, "apply", approver, post=False)
        return await _finish(svc, rec, LeverState.failed, refused, False, reason="record refused")
    try:
        ctx = await for_record(svc, rec)
        obj = await ctx.kube.get(lever.path(ctx))
        plan = await lever.plan(ctx, obj)
        # The plan is compared with the price it was approved at; the price itself just after.
        approved = Price.from_record(rec.plan.get("price"))
        plan.price = approved
        if plan.digest() != rec.digest:
            again = " and approval" if rec.needs_approval else ""
            return await _finish(
                svc,
                rec,
                LeverState.stale,
                f"{rec.label}: not applied: the target changed since it was "
                f"planned{' and approved' if rec.needs_approval else ''}. Pull the lever again "
                f"for a fresh plan{again}.",
                False,
                reason="stale",
            )
        reread: dict[str, Any] = {}
        if approved is not None and rec.needs_approval:
            fresh = await priced(lever, ctx, obj, plan)
            moves = approved.moved(fresh, ctx.policy.price.live_band)
            if moves.stale:
                return await _price_moved(svc, rec, lever, ctx, obj, fresh, moves)
            # What it hits is what was approved: it runs at the price read now, and the figures that
            # moved by themselves are said (a request only policy approved runs on the price it was
            # planned at, a moment ago). The approved price stays in the record and its digest.
            plan.price = fresh
            rec = rec.model_copy(update={"plan": {**rec.plan, "price": fresh.to_record()}})
            reread = {"approved_price": approved.to_record(), "moved": moves.live}
        await lever.check(ctx, plan, obj)
        await lever.reserve(ctx, plan)
    except (LeverRefusal, UnknownCell, Changed) as e:
        return await _finish(
            svc,
            rec,
            LeverState.failed,
            messages.failed(rec, f"{e}".rstrip(".") + "; nothing changed"),
            False,
            reason=str(e),
        )
    except KubeError as e:
        why = messages.api_error(e)
        return await _finish(
            svc, rec, LeverState.failed, messages.failed(rec, f"{why}; nothing changed"), False, reason=why, code=e.code
        )
    # The plan and its price go to the incident channel before the write, whoever pulled it.
    said = messages.applying(rec)
    if reread.get("moved"):
        said += "\n" + literal(
            "Read again now, moved by themselves since the approval (no new one needed): "
            + "; ".join(reread["moved"])
            + "."
        )
    if warn := await announce(svc, rec.incident, said):
        log.warning("lever_plan_not_announced", request=rec.id, warning=warn)
    # The object as this run saw it, kept before the write (its digest goes into lever.apply).
    kept = await evidence.capture(svc, ctx, rec, obj)
    try:
        plan, resp = await apply_plan(lever, ctx, plan)
    except (NotApplied, Changed) as e:
        await lever.release(ctx, plan)
        err = e.error if isinstance(e, NotApplied) else None
        text = f"{messages.api_error(e.error)}; {e.note}" if isinstance(e, NotApplied) else str(e).rstrip(".")
        return await _finish(
            svc, rec, LeverState.failed, messages.failed(rec, text), False, reason=text, code=err.code if err else None
        )
    try:
        return await _record(svc, rec, lever, ctx, plan, resp, approver, kept, reread)
    except RedisError:
        # The write went out, but the store went away while it was being recorded. The request
        # stays `executing`; its timer (armed before the claim) settles it from a read-back.
        log.exception("lever_outcome_not_recorded", request=rec.id)
        due = inflight.stuck_at(svc, rec)
        return ExecResult(
            f"{rec.label}: sent to the API server, but Firebreak lost its store while recording the outcome. "
            f"Nothing will be re-applied: Firebreak settles {rec.id} from a read-back of {rec.target} at "
            f"{hhmm(due)} UTC and posts the outcome in the incident channel.",
            False,
            LeverState.executing,
        )


async def _price_moved(
    svc: Services, rec: LeverRequest, lever: Lever, ctx: Ctx, obj: dict[str, Any], fresh: Price, moves: Moves
) -> ExecResult:
    """What the lever hits changed since it was approved, or a live figure moved beyond the policy's
    band: this request goes stale (its compare-and-set from executing) and a new one, with the new
    price, asks for approval."""
    store = lever_store(svc)
    new_id = await store.next_id()
    # The new request's own plan: its provenance annotations name it, not the stale one.
    plan = await lever.plan(dataclasses.replace(ctx, req_id=new_id), obj)
    plan.price = fresh
    again = rec.model_copy(
        update={
            "id": new_id,
            "state": LeverState.pending_approval,
            "plan": plan.to_record(),
            "pre_state": plan.pre_state,
            "digest": plan.digest(),
            "created_at": svc.clock.now(),
            "approved_by": None,
            "approved_at": None,
            "started_at": None,
            "notes": [*plan.notes, f"re-asked: the price of {rec.id} moved since it was approved"],
            "result": {},
        }
    )
    await store.create(again)
    why = (
        "what it hits changed"
        if moves.hits
        else f"a live figure moved more than {show(ctx.policy.price.live_band)}-fold"
    )
    out = await _finish(
        svc,
        rec,
        LeverState.stale,
        f"{rec.label}: not applied: {why} since it was approved ({'; '.join(moves.stale)}). "
        f"{again.id} asks for approval at the new price; nothing changed.",
        False,
        reason="price moved",
        moved=moves.stale,
        price=fresh.to_record(),
        again=again.id,
    )
    inc = await svc.incidents.get(rec.incident)
    if inc is not None and (ask := svc.registry.provided(hooks.APPROVAL_REQUESTED)) is not None:
        await ask(svc, inc, again)
    return out


async def _record(
    svc: Services,
    rec: LeverRequest,
    lever: Lever,
    ctx: Ctx,
    plan: Plan,
    resp: dict[str, Any],
    approver: str,
    kept: evidence.Evidence,
    reread: dict[str, Any],
) -> ExecResult:
    """After the write: bookkeeping, the audit, the read-back verify and the outcome. `reread`: the
    approved price and what moved by itself since, when it ran at a price read again."""
    await lever.applied(ctx, plan)
    await svc.audit.append(
        LeverEvent.apply.action,
        actor=rec.requester,
        incident=rec.incident,
        detail={
            **rec.ids(),
            "calls": [c.to_dict() for c in plan.calls],
            "pre_state": plan.pre_state,
            "resource_version": (resp.get("metadata") or {}).get("resourceVersion"),
            "approved_by": approver,
            "price": rec.plan.get("price"),
            **reread,
            "evidence": {"sha256": kept.digest, "events": len(kept.record["events"])},
        },
    )
    try:
        after = await ctx.kube.get(lever.object_path(ctx, plan))
        verdict = await gitops.recheck(lever, ctx, plan, await lever.verify(ctx, plan, after), after)
        rv = (after.get("metadata") or {}).get("resourceVersion")
    except KubeError as e:
        verdict, rv = None, None
        text = f"could not read it back ({messages.api_error(e)})"
    ok = bool(verdict and verdict.ok)
    text = verdict.text if verdict else text
    # Applied but not verified is still `done` (the write landed; undo applies), yet not a success.
    return await _finish(
        svc,
        rec,
        LeverState.done,
        messages.done(rec, ok, text, rv),
        ok,
        verified=ok,
        verify=text,
        resource_version=rv,
        pre_state=plan.pre_state,
        plan=plan.to_record(),
        **reread,
    )
