"""`/incident undo REQ-n`: restore the pre-state a lever captured, exactly.

No approval: restoring is the safe direction, except where the lever's own check before undo
fails (node-quarantine's return gate, levers/returngate.py: a node that is not Ready or reported a
fatal XID, ECC or row-remap signal since): then the undo waits for the IC's approval
(UNDO_APPROVAL_REQUESTED) and nothing changes until it is given. The claim done -> undoing is a
compare-and-set (so two undos can't both run); if the API refuses, the claim
is handed back (undoing -> done) and nothing changed; after the restore is
read back, undoing -> undone. A process dying in between (or losing its store
after the restore) leaves `undoing`, which levers/reconcile.py settles from a
read-back when the timer armed before the claim fires (levers/inflight.py). The
patch tests that every field still holds what the lever set, so a later edit is
never overwritten.

The record comes from Redis: before anything is read or written for it, it is held to what its lever
could have planned (levers/bounds.py); one that names another object or field is refused, audited and
posted, and nothing is sent.
"""

from __future__ import annotations

from typing import Any

from redis.exceptions import RedisError

from bot import logs, metrics
from bot.chat import person
from bot.clock import hhmm
from bot.clusters import KubeError, UnknownCell
from bot.core.posts import announce
from bot.core.request import IncidentView, Outcome, Refusal, Request
from bot.core.services import Services
from levers import authz, bounds, hooks, inflight, messages
from levers.apply import unsure
from levers.base import Ctx, Lever, LeverRefusal, Verified
from levers.catalogue import LEVERS
from levers.commands import Undo
from levers.context import for_record
from levers.executor import ExecResult
from levers.plan import JSON_PATCH, canonical, is_absent
from levers.requests import LeverEvent, LeverRequest, LeverState
from levers.store import lever_store

log = logs.get(__name__)


async def undo(svc: Services, req: Request, cmd: Undo, inc: IncidentView, cleared: authz.Cleared | None) -> Outcome:
    store = lever_store(svc)
    rec = await store.get(cmd.request)
    if rec is None:
        raise Refusal(f"There is no {cmd.request}. `/incident status` lists this incident's open levers.")
    if rec.incident != inc.id:
        raise Refusal(f"{rec.id} belongs to {rec.incident}; undo it from that incident's channel.")
    if cleared is None:  # the rule found no such record here: it appeared since, and was never checked
        raise RuntimeError(f"no lever access decision for request {req.id}: the route rule did not allow it")
    grant = cleared.grant
    try:
        await bounds.check(svc, rec)
        held = True
    except bounds.Tampered as t:
        await hooks.grant_used(svc, rec, grant, "undo refused: the stored record names what its lever never writes")
        raise Refusal(await bounds.refuse(svc, rec, t, "undo", req.actor), request=rec.id) from None
    except (KubeError, UnknownCell, LeverRefusal):
        held = False  # the cell can't be read now: restore() checks again, and says why it can't undo
    lever = LEVERS[rec.lever]
    if not lever.reversible:
        await hooks.grant_used(svc, rec, grant, "undo refused: not reversible")
        # The line a person runs is built from the stored before-values: only from a record that held.
        by_hand = lever.manual_undo(rec.target, rec.context, rec.pre_state) if held else ""
        raise Refusal(
            f"{rec.label} can't be undone by Firebreak: {lever.not_reversible_why}."
            + (f" To put it back: `{by_hand}`" if by_hand else ""),
            request=rec.id,
        )
    checked = None
    if rec.state is LeverState.done:
        gate = await _checked(svc, rec, lever)
        if gate is not None and not gate.ok:
            return await _needs_approval(svc, inc, rec, req.actor, grant, gate.text)
        checked = gate.text if gate is not None else None
    try:
        res = await restore(svc, rec, req.actor, grant, checked=checked)
    except LeverRefusal as e:
        raise Refusal(str(e), request=rec.id) from None
    return Outcome(
        result="ok" if res.ok else "error", message=res.message, audit={"request": rec.id, "state": res.state}
    )


async def _checked(svc: Services, rec: LeverRequest, lever: Lever) -> Verified | None:
    """The lever's check before undo (node-quarantine's return gate); one that can't be made fails."""
    since = rec.finished_at or rec.started_at or rec.created_at
    try:
        return await lever.undo_check(await for_record(svc, rec), since)
    except (KubeError, UnknownCell) as e:
        why = messages.api_error(e) if isinstance(e, KubeError) else str(e)
        return Verified(False, f"{rec.target} could not be read to check it ({why})")


async def _needs_approval(
    svc: Services, inc: IncidentView, rec: LeverRequest, actor: str, grant: str | None, found: str
) -> Outcome:
    """The check failed: nothing is undone; the IC decides on a card (bot.approvals, UNDO_APPROVAL_REQUESTED)."""
    ask = svc.registry.provided(hooks.UNDO_APPROVAL_REQUESTED)
    if ask is None:
        raise Refusal(
            f"{rec.label}: not undone: the check of {rec.target} failed ({found}), so returning it needs the IC's "
            "approval, and this Firebreak runs no approvals; nothing changed.",
            request=rec.id,
        )
    ballot = await ask(svc, inc, rec, actor, grant, found)
    await hooks.grant_used(svc, rec, grant, f"undo waits for approval ({ballot}); nothing changed yet")
    message = (
        f"{rec.label}: not returned yet. Checked {rec.target} first: {found}. Returning it over a failing check "
        f"needs the IC's approval: {ballot} is on the approval card in the channel; nothing changed."
    )
    return Outcome(message=message, audit={"request": rec.id, "state": rec.state, "approval": ballot, "found": found})


def not_restored(rec: LeverRequest, obj: dict[str, Any]) -> list[str]:
    """Pointers the lever changed whose value in `obj` is not (yet) the captured pre-state."""
    return LEVERS[rec.lever].not_restored(rec.plan.get("changes", {}), rec.pre_state, obj)


def _restored(rec: LeverRequest) -> str:
    parts = []
    changes = rec.plan.get("changes", {})
    for pointer, before in rec.pre_state.items():
        if pointer in changes and "/annotations/" not in pointer and not pointer.startswith("/status/"):
            field = pointer.rsplit("/", 1)[-1].replace("~1", "/")
            parts.append(f"{field} {'removed' if is_absent(before) else 'back to ' + canonical(before)}")
    return ", ".join(parts) or "pre-state restored"


async def restore(
    svc: Services,
    rec: LeverRequest,
    actor: str,
    grant_id: str | None,
    *,
    checked: str | None = None,
    approved_by: str | None = None,
) -> ExecResult:
    """Put back what `rec` changed; LeverRefusal when it is not `done` (nothing to undo, or already undoing).
    `checked`: what the lever's check before undo found (said with the outcome); `approved_by`: who
    approved an undo over a failing check."""
    store = lever_store(svc)
    now = svc.clock.now()
    await inflight.arm(svc, rec.id, rec.incident, now)  # before the claim, as the executor does
    if not await store.transition(rec.id, {LeverState.done}, LeverState.undoing, undone_by=actor, undone_at=now):
        cur = await store.get(rec.id)
        state = cur.state.value if cur else "missing"
        why = f"{rec.label} is {state.replace('_', ' ')}; only a lever that ran (done) can be undone."
        await hooks.grant_used(svc, rec, grant_id, f"undo refused: {state}")
        raise LeverRefusal(why)
    read_back = ""
    try:
        held = await bounds.check(svc, rec)
        lever, ctx, path = held.lever, held.ctx, held.path
        try:
            ops, resp = await _send_restore(held, rec)
        except Unanswered as u:
            # The restore may have been stored: read back before saying anything.
            landed = await _read_back(ctx, rec, path)
            if landed is None:
                return await _unsettled(svc, rec, actor, u.error, now, grant_id)
            ops, resp = u.ops, landed
            read_back = f"the restore got no answer ({messages.api_error(u.error)}); read back: it landed; "
    except bounds.Tampered as t:
        return await _tampered(svc, rec, actor, grant_id, t)
    except (KubeError, UnknownCell, LeverRefusal) as e:
        return await _not_undone(svc, rec, actor, grant_id, e)
    rv = (resp.get("metadata") or {}).get("resourceVersion")
    left = not_restored(rec, resp)
    try:
        await store.transition(
            rec.id,
            {LeverState.undoing},
            LeverState.undone,
            result={**rec.result, "undo": {"resource_version": rv, "patch": ops, "verified": not left}},
        )
        await inflight.disarm(svc, rec.id)
        metrics.lever_settled(rec.lever, LeverState.undone)
    except RedisError:
        # The restore went out, but the store went away before it was recorded: the request stays
        # `undoing`, and its timer settles it from a read-back.
        log.exception("lever_undo_not_recorded", request=rec.id)
        due = now + svc.policy.levers.stuck_after_seconds
        return ExecResult(
            f"{rec.label}: the restore was sent to the API server, but Firebreak lost its store while "
            f"recording it. Firebreak settles {rec.id} from a read-back of {rec.target} at {hhmm(due)} UTC "
            "and posts the outcome in the incident channel.",
            False,
            LeverState.undoing,
        )
    await lever.undone(ctx)
    await svc.audit.append(
        LeverEvent.undo.action,
        actor=actor,
        incident=rec.incident,
        detail={
            **rec.ids(),
            "patch": ops,
            "resource_version": rv,
            "verified": not left,
            "grant": grant_id,
            **({"checked": checked} if checked is not None else {}),
            **({"approved_by": approved_by} if approved_by else {}),
        },
    )
    check = "verified" if not left else f"but read-back differs at {', '.join(left)}"
    first = f" Checked first: {checked}." if checked else ""
    over = f", approved by {person(approved_by)} over a failing check" if approved_by else ""
    message = f"{rec.label}: undone by {person(actor)}{over} ({read_back}{_restored(rec)}; {check}, rv {rv}).{first}"
    await announce(svc, rec.incident, message)
    await hooks.grant_used(svc, rec, grant_id)
    return ExecResult(message, True, LeverState.undone)


class Unanswered(Exception):
    """The restore patch got no answer, or a 5xx: it may or may not have been stored."""

    def __init__(self, error: KubeError, ops: list[Any]) -> None:
        super().__init__(str(error))
        self.error = error
        self.ops = ops


async def _send_restore(held: bounds.Checked, rec: LeverRequest) -> tuple[list[Any], dict[str, Any]]:
    """The guarded restore patch, built from a fresh read and held to the record's checked fields; (ops, response)."""
    ctx, lever, path = held.ctx, held.lever, held.path
    changes = rec.plan.get("changes", {})
    for attempt in (1, 2):
        current = await ctx.kube.get(path)
        ops = lever.undo_ops(changes, rec.pre_state, current)
        bounds.within(held, ops)
        try:
            return ops, await ctx.kube.call("PATCH", path, JSON_PATCH, ops)
        except KubeError as e:
            if unsure(e):
                raise Unanswered(e, ops) from None
            # A failed test op may be an edit between that read and the patch (a taint added just
            # then): read once more. A field the lever set that someone changed fails twice.
            if attempt == 2 or not e.test_failed:
                raise
            log.info("lever_undo_retry", request=rec.id)
    raise AssertionError("unreachable")


async def _read_back(ctx: Ctx, rec: LeverRequest, path: str) -> dict[str, Any] | None:
    """The object if it shows the restore landed; None if it does not (yet), or could not be read."""
    try:
        obj = await ctx.kube.get(path)
    except KubeError as e:
        log.warning("lever_undo_read_back_failed", request=rec.id, error=str(e))
        return None
    return None if not_restored(rec, obj) else obj


async def _unsettled(
    svc: Services, rec: LeverRequest, actor: str, e: KubeError, since: float, grant_id: str | None
) -> ExecResult:
    """No answer and no restore seen on read-back: the write may still land. The request stays
    `undoing`; the timer armed before the claim settles it from a read-back (levers/reconcile.py)."""
    due = since + svc.policy.levers.stuck_after_seconds
    message = (
        f"{rec.label}: the undo got no answer from the API server ({messages.api_error(e)}) and a read-back "
        f"does not show the restore (yet); it may still land. {rec.id} stays being undone: Firebreak settles it "
        f"from a read-back of {rec.target} at {hhmm(due)} UTC and posts the outcome in the incident channel."
    )
    await svc.audit.append(
        LeverEvent.undo_unsettled.action,
        actor=actor,
        incident=rec.incident,
        detail={**rec.ids(), "reason": str(e), "settle_at": due},
    )
    await announce(svc, rec.incident, message)
    await hooks.grant_used(svc, rec, grant_id, "undo sent, no answer; settled by read-back later")
    return ExecResult(message, False, LeverState.undoing)


async def _tampered(
    svc: Services, rec: LeverRequest, actor: str, grant_id: str | None, t: bounds.Tampered
) -> ExecResult:
    """The stored record names what its lever never writes: nothing was sent; the claim goes back to `done`."""
    await lever_store(svc).transition(rec.id, {LeverState.undoing}, LeverState.done, undone_by=None, undone_at=None)
    await inflight.disarm(svc, rec.id)
    message = await bounds.refuse(svc, rec, t, "undo", actor)
    await hooks.grant_used(svc, rec, grant_id, "undo refused: the stored record names what its lever never writes")
    return ExecResult(message, False, LeverState.done)


async def _not_undone(svc: Services, rec: LeverRequest, actor: str, grant_id: str | None, e: Exception) -> ExecResult:
    """The API refused (or was never reached): nothing changed; the claim goes back to `done`."""
    store = lever_store(svc)
    await store.transition(rec.id, {LeverState.undoing}, LeverState.done, undone_by=None, undone_at=None)
    metrics.lever_settled(rec.lever, LeverEvent.undo_failed)
    await inflight.disarm(svc, rec.id)
    why = messages.api_error(e) if isinstance(e, KubeError) else str(e)
    if isinstance(e, KubeError) and e.test_failed:
        why = f"{rec.target} changed since {rec.id} applied ({why}); a later lever or a person edited it"
    message = f"{rec.label}: undo failed: {why}; nothing changed, {rec.id} is still applied."
    await svc.audit.append(
        LeverEvent.undo_failed.action, actor=actor, incident=rec.incident, detail={"request": rec.id, "reason": str(e)}
    )
    await announce(svc, rec.incident, message)
    await hooks.grant_used(svc, rec, grant_id, "undo failed; still applied")
    return ExecResult(message, False, LeverState.done)
