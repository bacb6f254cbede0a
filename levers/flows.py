"""`/incident lever …` and `/incident undo REQ-n`: plan, check, store, then run or ask for approval.

Order matters: grammar and roles (the route rule, whose answer the handler
reuses: authz.allowed_grant) first, then cell and approval needs, then one
read of the object, the plan and the policy checks. Only then is a REQ
stored; a dry-run stops there with the exact calls.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import levers.catalogue  # noqa: F401 - registers the catalogue
from bot.core.grammar import Spec
from bot.core.registry import route
from bot.core.request import Outcome, Refusal, Request
from levers import authz, hooks, listing, messages, reconcile  # noqa: F401 - `levers`; `lever_settle`
from levers.base import LEVERS, Ctx, LeverRefusal, Target, params_of
from levers.commands import PullLever, Undo
from levers.executor import execute_approved
from levers.kube import KubeError, UnknownCell, kube_for
from levers.requests import LeverRequest, create, get_request, next_id
from levers.scope import approval_reasons, resolve, scope_name
from levers.undo import undo as run_undo

if TYPE_CHECKING:
    from bot.core.services import Services
    from bot.incidents.models import Incident


def _ack(cmd: PullLever) -> str:  # type: ignore[override]
    where = f" in {cmd.cell}" if cmd.cell else ""
    mode = "Dry run: planning" if cmd.dry_run else "Planning"
    return f"{mode} {cmd.lever} on {cmd.target}{where}…"


async def _read(ctx: Ctx, path: str, kind: str) -> dict:
    try:
        return await ctx.kube.get(path)
    except KubeError as e:
        if e.code == 404:
            raise Refusal(f"{kind} {ctx.target} not found in {ctx.context}; nothing changed. "
                          "Check the name (and namespace) with kubectl get.") from None
        raise Refusal(f"Could not read {kind} {ctx.target} in {ctx.context}: {e}; nothing changed.") from None


@route(PullLever, spec=Spec("/incident lever <name> <target> [--cell C] [key=value]… [--dry-run]",
                            positional=("lever", "target"), flags={"cell": "one", "dry-run": "bool"}, pairs=True),
       summary="pull a lever (see `/incident levers`); --dry-run shows the exact API call", rule=authz.lever_rule,
       ack=_ack)  # type: ignore[arg-type]
async def pull(svc: "Services", req: Request, inc: "Incident | None") -> Outcome:
    cmd: PullLever = req.command  # type: ignore[assignment]
    assert inc is not None
    cell = scope_name(svc.policy.levers, LEVERS[cmd.lever], cmd.cell, inc)
    grant = authz.allowed_grant(req)
    try:
        return await _pull(svc, req, inc, grant)
    except Refusal as e:
        # A pull authorized by a grant is reported whatever came of it, refusals included.
        await hooks.grant_used(svc, _attempt(req, inc, cell, e), grant, f"refused: {e.message}")
        raise


def _attempt(req: Request, inc: "Incident", cell: str, e: Refusal) -> LeverRequest:
    """What a refused pull was, for the grant report (it may have been refused before a REQ was stored)."""
    cmd: PullLever = req.command  # type: ignore[assignment]
    return LeverRequest(id=e.audit.get("request") or "(no REQ)", incident=inc.id, lever=cmd.lever,
                        target=cmd.target, cell=cell, context="", requester=req.actor, state="refused",
                        created_at=0)


async def _pull(svc: "Services", req: Request, inc: "Incident", grant: str | None) -> Outcome:
    cmd: PullLever = req.command  # type: ignore[assignment]
    lever = LEVERS[cmd.lever]
    try:
        params = params_of(lever, cmd.params)
        target = Target.parse(cmd.target, lever.kind.namespaced, lever.kind.kind)
        lever.accepts(svc.policy.levers, target, params)
        scope = resolve(svc.policy.levers, lever, cmd.cell, inc)
        needs = approval_reasons(svc.policy.levers, lever, scope, target)
        client = await kube_for(svc).client(scope.context)
    except LeverRefusal as e:
        raise Refusal(f"{messages.NOT_PULLED}{e}") from None
    except UnknownCell as e:
        raise Refusal(messages.no_context(scope.label, e.context, scope.fleet, e.known)) from None
    ctx = Ctx(svc=svc, kube=client, req_id=await next_id(svc.redis), incident=inc.id, cell=scope.cell,
              context=scope.context, target=target, params=params, requester=req.actor,
              budget_override=cmd.override == "budget")
    obj = await _read(ctx, lever.path(ctx), lever.kind.kind)
    try:
        plan = await lever.plan(ctx, obj)
        await lever.check(ctx, plan, obj)
    except LeverRefusal as e:
        raise Refusal(f"{ctx.req_id} {cmd.lever} {target} ({scope.label}) not pulled, nothing changed: {e}",
                      request=ctx.req_id) from None
    except KubeError as e:
        raise Refusal(f"{ctx.req_id} {cmd.lever}: could not plan: {e}; nothing changed.", request=ctx.req_id) from None
    if ctx.breaches:
        needs = [*needs, "budget override: " + " ".join(ctx.breaches)]
    elif cmd.override:
        plan.notes.append("override=budget was not needed: this is within the budgets")
    state = "planned" if cmd.dry_run else "pending_approval" if needs else "approved"
    rec = LeverRequest(
        id=ctx.req_id, incident=inc.id, lever=cmd.lever, target=str(target), cell=scope.cell, context=scope.context,
        params=cmd.params, requester=req.actor, state=state, dry_run=cmd.dry_run, plan=plan.to_record(),
        pre_state=plan.pre_state, digest=plan.digest(), needs_approval=needs, grant_id=grant, notes=plan.notes,
        budget_override=bool(ctx.breaches),
        created_at=svc.clock.now(), approved_by=None if needs or cmd.dry_run else "policy",
    )
    await create(svc.redis, rec)
    audit = {**messages.audit_plan(rec), "state": state, "notes": plan.notes, "grant": grant}
    if cmd.dry_run:
        await hooks.grant_used(svc, rec, grant, "dry run only; nothing changed")
        return Outcome(message=messages.dry_run(rec), audit=audit)
    if needs:
        for ask in hooks.APPROVAL_REQUESTED:
            await ask(svc, inc, rec)
        await hooks.grant_used(svc, rec, grant, f"pending approval ({'; '.join(needs)}); nothing changed yet")
        return Outcome(message=messages.needs_approval(rec), audit=audit)
    res = await execute_approved(svc, rec.id, "policy")
    return Outcome(result="ok" if res.ok else "error", message=res.message, audit={**audit, "state": res.state})


@route(Undo, spec=Spec("/incident undo <REQ-n>", positional=("request",)),
       summary="restore what a lever changed, exactly (no approval needed)", rule=authz.undo_rule)
async def undo(svc: "Services", req: Request, inc: "Incident | None") -> Outcome:
    cmd: Undo = req.command  # type: ignore[assignment]
    assert inc is not None
    rec = await get_request(svc.redis, cmd.request)
    if rec is None:
        raise Refusal(f"There is no {cmd.request}. `/incident status` lists this incident's open levers.")
    if rec.incident != inc.id:
        raise Refusal(f"{rec.id} belongs to {rec.incident}; undo it from that incident's channel.")
    lever = LEVERS[rec.lever]
    grant = authz.allowed_grant(req)
    if not lever.reversible:
        await hooks.grant_used(svc, rec, grant, "undo refused: not reversible")
        raise Refusal(f"{rec.label} can't be undone by Firebreak: {lever.not_reversible_why}.", request=rec.id)
    try:
        res = await run_undo(svc, rec, req.actor, grant)
    except LeverRefusal as e:
        raise Refusal(str(e), request=rec.id) from None
    return Outcome(result="ok" if res.ok else "error", message=res.message,
                   audit={"request": rec.id, "state": res.state})
