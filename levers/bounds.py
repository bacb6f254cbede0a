"""What a stored lever record may name, recomputed from the lever's own code before a write it drives.

Undo, the settle timer and the restart sweep (levers/undo.py, levers/reconcile.py) patch a cluster
from a record kept in Redis, with no person choosing the patch. Whoever can write that Redis can
rewrite the record, so before any such write the record is held to what its lever could have planned:

- the lever is one of the catalogue's, and the kube context is the one its cell maps to (the fleet
  context, or a context on the fleet's API server, for a fleet record);
- the target parses as an object of the lever's Kind, the params as the lever's own, and the lever
  accepts both (killswitch: the policy's ConfigMap only);
- the object is the target itself, recomputed from its Kind; only jobset-suspend may name another,
  the Kueue Workload in the JobSet's namespace that the JobSet owns, as read now (Lever.object_of);
- every field the record says the lever set is one the lever writes, with the value it writes
  there (Lever.writes), and its provenance annotations name this very request and incident, so
  undo's guarded patch (which tests each field) lands only on an object this request last wrote;
  every "before" value is one of those fields, or the marker of a map holding one;
- the patch built from it touches only those fields (``within``).

Anything else is refused: nothing is sent, a `lever.record_refused` entry is audited and the
incident channel is told (``refuse``). What stays possible is said in docs/security-model.md ("Redis").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from bot import logs
from bot.chat.text import literal
from bot.core.posts import announce
from bot.core.request import SYSTEM_ACTOR
from bot.core.services import Services
from levers.base import Ctx, Lever, LeverRefusal, Target, Writes, params_of
from levers.catalogue import LEVERS
from levers.context import for_record
from levers.plan import ABSENT, INCIDENT_ANNOTATION, PRESENT, REQUEST_ANNOTATION, canonical, ptr
from levers.requests import LeverRequest
from levers.scope import FLEET

log = logs.get(__name__)

ACTION = "lever.record_refused"
_REQUEST = ptr("metadata", "annotations", REQUEST_ANNOTATION)
_INCIDENT = ptr("metadata", "annotations", INCIDENT_ANNOTATION)


class Tampered(Exception):
    """The stored record names something its lever never writes. ``what`` says what, briefly."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


@dataclass(frozen=True)
class Checked:
    """A record held to its lever's bounds: the lever, its run context and the object to act on."""

    lever: Lever
    ctx: Ctx
    path: str
    fields: tuple[str, ...]  # the record's pointers (changes and before-values), each checked


def _shown(value: Any) -> str:
    text = canonical(value) if not isinstance(value, str) else value
    return literal(text if len(text) <= 120 else text[:117] + "...")


def _expected(fields: Writes, pointer: str) -> tuple[bool, Any]:
    """(whether the lever writes ``pointer``, what it writes there)."""
    if pointer in fields:
        return True, fields[pointer]
    for key, value in fields.items():
        if isinstance(key, re.Pattern) and key.fullmatch(pointer):
            return True, value
    return False, None


def _holds(expect: Any, value: Any) -> bool:
    return bool(expect(value)) if callable(expect) else bool(value == expect)


async def where(svc: Services, rec: LeverRequest) -> Lever:
    """The record's lever, and its kube context held to its cell (the fleet's for the fleet): what an
    approved request resumed after a restart is checked for before it runs (levers/executor.py), since
    the permission recheck judges the cell and the context is what gets written to."""
    lever = LEVERS.get(rec.lever)
    if lever is None:
        raise Tampered(f"the lever `{_shown(rec.lever)}`, which is not in the catalogue")
    pol = svc.policy.levers
    if rec.cell == FLEET:
        fleet = rec.context == pol.fleet_context or await svc.clusters.same_server(rec.context, pol.fleet_context)
        if not fleet:
            raise Tampered(f"the fleet context `{_shown(rec.context)}`, whose API server is not the fleet's")
    elif rec.context != pol.context_of(rec.cell):
        raise Tampered(f"the kube context `{_shown(rec.context)}`, which is not {_shown(rec.cell)}'s")
    return lever


async def check(svc: Services, rec: LeverRequest) -> Checked:
    """``rec`` held to its lever's bounds. Tampered when it names anything else; a KubeError,
    UnknownCell or LeverRefusal when the cell can't be read to tell (nothing is written then either)."""
    lever = await where(svc, rec)
    pol = svc.policy.levers
    try:
        target = Target.parse(rec.target, lever.kind.namespaced, lever.kind.kind)
        lever.accepts(pol, target, params_of(lever, rec.params))
    except LeverRefusal as e:
        raise Tampered(f"a target or params {lever.name} refuses ({_shown(str(e))})") from None
    # A LeverRefusal from here on is the cell's answer (its Kind not served), not the record's.
    ctx = await for_record(svc, rec)
    stored = rec.plan.get("object_path")
    try:
        path = await lever.object_of(ctx, stored if isinstance(stored, str) or stored is None else str(stored))
    except LeverRefusal as e:
        raise Tampered(_shown(str(e))) from None
    fields: Writes = {**lever.writes(ctx, path), _REQUEST: rec.id, _INCIDENT: rec.incident}
    changes = rec.plan.get("changes")
    if not isinstance(changes, dict) or _REQUEST not in changes:
        raise Tampered("no provenance annotation (every lever writes its request id on the object)")
    for pointer, value in changes.items():
        writes, expect = _expected(fields, pointer)
        if not writes:
            raise Tampered(f"the field `{_shown(pointer)}`")
        if not _holds(expect, value):
            raise Tampered(f"the value `{_shown(value)}` at `{_shown(pointer)}`")
    for pointer, before in rec.pre_state.items():
        if _expected(fields, pointer)[0]:
            continue
        # The marker of a map holding one of its fields (did the annotations or labels exist?).
        if not any(p.startswith(pointer + "/") for p in changes) or before not in (ABSENT, PRESENT):
            raise Tampered(f"the field `{_shown(pointer)}` (as it was before)")
    return Checked(lever, ctx, path, tuple({*changes, *rec.pre_state}))


def within(checked: Checked, ops: list[Any]) -> None:
    """The patch built from the record touches only the fields it was checked for (or inside them)."""
    for op in ops:
        path = op.get("path") if isinstance(op, dict) else None
        if not isinstance(path, str) or not any(path == f or path.startswith(f + "/") for f in checked.fields):
            raise Tampered(f"a patch of `{_shown(path)}`")


def why(rec: LeverRequest, t: Tampered) -> str:
    lever = rec.lever if rec.lever in LEVERS else "its lever"
    return f"its stored record names {t.what}: {literal(lever)} never writes that"


async def refuse(
    svc: Services, rec: LeverRequest, t: Tampered, during: str, actor: str = SYSTEM_ACTOR, post: bool = True
) -> str:
    """Audit and post the refusal (`post=False`: the caller posts the message as its outcome); returns
    the message (the same words the channel gets)."""
    doing = {"undo": "not undone", "settle": "not settled", "apply": "not applied"}[during]
    message = (
        f"{literal(rec.label)}: {doing}: {why(rec, t)}. Nothing was sent to the cluster. Whoever can write "
        f"Firebreak's Redis may have altered this record: compare it with the audit log (`firebreak audit verify`) "
        f"and check {literal(rec.target)} by hand."
    )
    await svc.audit.append(
        ACTION,
        actor=actor,
        incident=rec.incident,
        detail={**rec.ids(), "during": during, "reason": t.what, "state": rec.state},
    )
    log.warning("lever_record_refused", request=rec.id, during=during, reason=t.what)
    if post and await announce(svc, rec.incident, message):
        log.warning("lever_record_refused_not_posted", request=rec.id)
    return message
