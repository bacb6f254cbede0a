"""`/incident lever …`: plan, check, store, then run or ask for approval.

Order matters: grammar and roles (the route rule, whose answer the handler
is given: authz.Cleared) first, then cell and approval needs, then one
read of the object, the plan and the policy checks. Only then is a REQ
stored; a dry-run stops there with the exact calls, each also sent with
dryRun=All so the API server's RBAC, admission and schema checks answer
(nothing is stored, no budget is taken).
"""

from __future__ import annotations

from typing import Any

from bot.chat import quote
from bot.clusters import KubeError, UnknownCell
from bot.core.request import IncidentView, Outcome, Refusal, Request
from bot.core.services import Services
from levers import authz, gitops, hooks, messages
from levers.base import Ctx, LeverRefusal, Target, params_of, priced, version_of
from levers.catalogue import LEVERS
from levers.commands import PullLever
from levers.executor import execute_approved
from levers.plan import Plan
from levers.requests import LeverRequest, LeverState
from levers.scope import OutOfScope, Scope, approval_reasons, place, resolve, scope_name
from levers.store import lever_store


def ack(cmd: PullLever) -> str:
    """The immediate answer while the plan is made (reading the object can take seconds)."""
    where = f" in {cmd.cell}" if cmd.cell else ""
    mode = "Dry run: planning" if cmd.dry_run else "Planning"
    return f"{mode} {cmd.lever} on {quote(cmd.target)}{where}…"


async def _read(ctx: Ctx, path: str, kind: str) -> dict[str, Any]:
    try:
        return await ctx.kube.get(path)
    except KubeError as e:
        if e.code == 404:
            raise Refusal(
                f"{kind} {ctx.target} not found in {ctx.context}; nothing changed. "
                "Check the name (and namespace) with kubectl get."
            ) from None
        raise Refusal(
            f"Could not read {kind} {ctx.target} in {ctx.context}: {messages.api_error(e)}; nothing changed."
        ) from None


async def _dry_run(ctx: Ctx, plan: Plan) -> list[dict[str, Any]]:
    """Each planned call sent with dryRun=All: what the API server answered (nothing is stored)."""
    answers: list[dict[str, Any]] = []
    for call in plan.calls:
        where = f"{call.method} {call.path}"
        try:
            await ctx.kube.send(call, dry_run=True)
        except KubeError as e:
            answers.append({"call": where, "accepted": False, "code": e.code, "error": messages.api_error(e)})
        else:
            answers.append({"call": where, "accepted": True})
    return answers


async def pull(svc: Services, req: Request, cmd: PullLever, inc: IncidentView, cleared: authz.Cleared) -> Outcome:
    cell = await scope_name(svc, LEVERS[cmd.lever], cmd.cell, inc)
    grant = cleared.grant
    try:
        return await _pull(svc, req, cmd, inc, grant)
    except Refusal as e:
        # A pull authorized by a grant is reported whatever came of it, refusals included.
        await hooks.grant_used(svc, _attempt(req, cmd, inc, cell, e), grant, f"refused: {e.message}")
        raise


def _attempt(req: Request, cmd: PullLever, inc: IncidentView, cell: str, e: Refusal) -> LeverRequest:
    """What a refused pull was, for the grant report (it may have been refused before a REQ was stored)."""
    return LeverRequest(
        id=e.audit.get("request") or "(no REQ)",
        incident=inc.id,
        lever=cmd.lever,
        target=cmd.target,
        cell=cell,
        context="",
        requester=req.actor,
        state=LeverState.refused,
        created_at=0,
    )


async def _pull(svc: Services, req: Request, cmd: PullLever, inc: IncidentView, grant: str | None) -> Outcome:
    lever = LEVERS[cmd.lever]
    store = lever_store(svc)
    scope: Scope | None = None
    try:
        params = params_of(lever, cmd.params)
        target = Target.parse(cmd.target, lever.kind.namespaced, lever.kind.kind)
        lever.accepts(svc.policy.levers, target, params)
        scope = await place(svc, lever, cmd.cell, inc)
        needs = approval_reasons(svc.policy.levers, lever, scope, target)
        client = await svc.clusters.client(scope.context)
        version = await version_of(lever.kind, client)
    except OutOfScope as e:
        raise Refusal(str(e), out_of_scope=cmd.cell) from None
    except LeverRefusal as e:
        raise Refusal(f"{messages.NOT_PULLED}{e}") from None
    except UnknownCell as e:
        named = scope or resolve(svc.policy.levers, lever, cmd.cell, inc)
        raise Refusal(messages.no_context(named.label, e.context, named.fleet, e.known)) from None
    except KubeError as e:
        where = scope.context if scope else "the kubeconfig"
        raise Refusal(f"{messages.NOT_PULLED}{where}: {messages.api_error(e)}.") from None
    ctx = Ctx(
        svc=svc,
        kube=client,
        req_id=await store.next_id(),
        incident=inc.id,
        cell=scope.cell,
        context=scope.context,
        target=target,
        params=params,
        requester=req.actor,
        version=version,
        budget_override=cmd.override == "budget",
    )
    obj = await _read(ctx, lever.path(ctx), lever.kind.kind)
    try:
        plan = await lever.plan(ctx, obj)
        await lever.check(ctx, plan, obj)
        if managed := await gitops.plan_note(ctx, obj):
            plan.notes.append(managed)
        plan.price = await priced(lever, ctx, obj, plan)
    except LeverRefusal as e:
        raise Refusal(
            f"{ctx.req_id} {cmd.lever} {target} ({scope.label}) not pulled, nothing changed: {e}", request=ctx.req_id
        ) from None
    except KubeError as e:
        raise Refusal(
            f"{ctx.req_id} {cmd.lever}: could not plan: {messages.api_error(e)}; nothing changed.", request=ctx.req_id
        ) from None
    if ctx.breaches:
        needs = [*needs, "budget override: " + " ".join(ctx.breaches)]
    elif cmd.override:
        plan.notes.append("override=budget was not needed: this is within the budgets")
    state = LeverState.planned if cmd.dry_run else LeverState.pending_approval if needs else LeverState.approved
    answers = await _dry_run(ctx, plan) if cmd.dry_run else []
    rec = LeverRequest(
        id=ctx.req_id,
        incident=inc.id,
        lever=cmd.lever,
        target=str(target),
        cell=scope.cell,
        context=scope.context,
        params=cmd.params,
        requester=req.actor,
        state=state,
        dry_run=cmd.dry_run,
        plan=plan.to_record(),
        pre_state=plan.pre_state,
        digest=plan.digest(),
        needs_approval=needs,
        grant_id=grant,
        notes=plan.notes,
        budget_override=bool(ctx.breaches),
        created_at=svc.clock.now(),
        approved_by=None if needs or cmd.dry_run else "policy",
        result={"dry_run": answers, "ok": all(a["accepted"] for a in answers)} if cmd.dry_run else {},
    )
    await store.create(rec)
    audit = {**messages.audit_plan(rec), "state": state, "notes": plan.notes, "grant": grant}
    if cmd.dry_run:
        accepted = all(a["accepted"] for a in answers)
        await hooks.grant_used(
            svc, rec, grant, f"dry run ({'accepted' if accepted else 'refused'} by the API server); nothing changed"
        )
        return Outcome(
            result="ok" if accepted else "error", message=messages.dry_run(rec), audit={**audit, "dry_run": answers}
        )
    if needs:
        if (ask := svc.registry.provided(hooks.APPROVAL_REQUESTED)) is not None:
            await ask(svc, inc, rec)
        await hooks.grant_used(svc, rec, grant, f"pending approval ({'; '.join(needs)}); nothing changed yet")
        return Outcome(message=messages.needs_approval(rec), audit=audit)
    res = await execute_approved(svc, rec.id, "policy")
    return Outcome(result="ok" if res.ok else "error", message=res.message, audit={**audit, "state": res.state})
