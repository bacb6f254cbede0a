"""remediation-pause: stop a Medik8s NodeHealthCheck from starting new remediations.

"Automation can be the outage": a bad exporter makes NodeHealthCheck cordon and reboot half a cell.
NHC's own brake is `spec.pauseRequests` (free-form entries, one per party that wants it paused).
What a pause does (medik8s/node-healthcheck-operator v0.9.0, controllers/nodehealthcheck_controller.go):
Reconcile zeroes status.observedNodes and healthyNodes first (L179-181) and returns at the pause
(L260-266) before anything else, so no remediation object is created, none is deleted (a node that
heals keeps its SelfNodeRemediation / FenceAgentsRemediation, whose remediator keeps its NoSchedule
taint until the object is deleted), status.unhealthyNodes stays as it was and the counts read 0;
patchStatus then reports phase `Paused`, reason "NHC is paused: <entries>" (L731-733). Remediations
already started are not stopped: their remediators carry on. The lever adds `firebreak:<INC-n>` and its
undo removes only that entry, wherever it sits by then: entries others added (an upgrade operator's,
a person's), before or after, stay.

The list has no list-type marker in the CRD, so a merge patch would replace it whole (and drop an
entry someone added in between). The lever sends a JSON patch instead: `test` the list as read,
then append; when there is no list yet, `test` the resourceVersion (an `add` would replace a list
someone else just created). The undo tests the entry at its index, then removes that index.
"""

from __future__ import annotations

from typing import Any

from bot.chat import quote
from bot.policy.levers import LeverRule
from levers.base import Access, Ctx, Kind, Lever, LeverRefusal, Verified, Writes, awaited
from levers.plan import (
    ABSENT,
    ANNOTATIONS,
    PRESENT,
    Plan,
    is_absent,
    provenance_ops,
    read,
    restore_ops,
    with_provenance,
)
from levers.price import Cost, Price

PAUSES = "/spec/pauseRequests"
SPEC = "/spec"
NHC = Kind("NodeHealthCheck", "remediation.medik8s.io", "v1alpha1", "nodehealthchecks", namespaced=False)


def entry_for(incident: str) -> str:
    return f"firebreak:{incident}"


def _pauses(obj: dict[str, Any]) -> list[str] | None:
    """spec.pauseRequests as read (None: absent)."""
    got = read(obj, PAUSES)
    if is_absent(got) or got is None:
        return None
    if not isinstance(got, list) or not all(isinstance(x, str) for x in got):
        raise LeverRefusal(f"spec.pauseRequests is not a list of strings ({quote(str(got)[:80])}); nothing changed.")
    return got


def _entry(changes: dict[str, Any]) -> str | None:
    """The lever's own entry: the last of the list it set."""
    after = changes.get(PAUSES)
    return after[-1] if isinstance(after, list) and after else None


PAUSED, DISABLED = "Paused", "Disabled"  # api/v1alpha1/nodehealthcheck_types.go PhasePaused, PhaseDisabled
PAUSED_REASON = "NHC is paused: "  # patchStatus (L733): the entries joined by ","
STAYS_FENCED = (
    "the pause does not stop them (their remediator carries on), and while paused NodeHealthCheck does not "
    "delete the remediation object of a node that heals, so its remediator keeps that node out of service "
    "(its NoSchedule taint) until the pause ends"
)


def _names(ns: list[str]) -> str:
    return ", ".join(ns[:5]) + (", …" if len(ns) > 5 else "") if ns else "none"


def _status(obj: dict[str, Any]) -> dict[str, Any]:
    raw = obj.get("status")
    return raw if isinstance(raw, dict) else {}


def paused_by(obj: dict[str, Any]) -> list[str] | None:
    """Who has the NodeHealthCheck paused now (spec.pauseRequests, else a `Paused` phase with its
    entries unknown: []); None when it is not paused."""
    spec = obj.get("spec")
    got = spec.get("pauseRequests") if isinstance(spec, dict) else None
    if isinstance(got, list) and got:
        return [str(x) for x in got]
    return [] if _status(obj).get("phase") == PAUSED else None


def _unhealthy(obj: dict[str, Any]) -> list[dict[str, Any]] | None:
    """status.unhealthyNodes as entries with a name (None: not such a list)."""
    got = _status(obj).get("unhealthyNodes", [])
    if not isinstance(got, list) or not all(isinstance(u, dict) and u.get("name") for u in got):
        return None
    return got


def held_back(name: str, obj: dict[str, Any]) -> Price:
    """What the pause holds back, from the NodeHealthCheck's status read before the pause: the nodes it
    watches (none is remediated automatically while paused), the nodes under remediation (not stopped;
    one that heals stays fenced until the pause ends) and the unhealthy nodes no remediation was started
    for yet. Only what the status reports; nothing guessed. A NodeHealthCheck already paused reports 0
    nodes (Reconcile zeroes the counts and returns at the pause, v0.9.0 L179-181, L260-266): that 0 is
    never given as a count."""
    raw = obj.get("status")
    watched = f"nodes NodeHealthCheck {name} watches, none remediated automatically while paused"
    going_what = "nodes under remediation (not stopped; one that heals stays fenced until the pause ends)"
    waiting = "unhealthy nodes with no remediation started yet, held back"
    if not isinstance(raw, dict) or not raw:
        why = "the NodeHealthCheck has no status (its controller has not reported)"
        return Price(costs=tuple(Cost(what=w, unit="nodes", value=None, how=why) for w in (watched, going_what)))
    already = paused_by(obj)
    observed, healthy = raw.get("observedNodes"), raw.get("healthyNodes")
    if already is not None:
        by = f" by {quote(', '.join(already))}" if already else ""
        why = f"already paused{by}: NodeHealthCheck reports 0 nodes while paused, so how many it watches is not known"
        costs = [Cost(what=watched, unit="nodes", value=None, how=why)]
    elif isinstance(observed, int):
        state = f"{healthy} healthy now" if isinstance(healthy, int) else "status.healthyNodes not reported"
        costs = [Cost(what=watched, unit="nodes", value=float(observed), how=state)]
    else:
        costs = [Cost(what=watched, unit="nodes", value=None, how="status.observedNodes is not a count")]
    unhealthy = _unhealthy(obj)
    if unhealthy is None:
        why = f"status.unhealthyNodes is not a list of nodes ({quote(str(raw.get('unhealthyNodes'))[:60])})"
        return Price(costs=(*costs, Cost(what=going_what, unit="nodes", value=None, how=why)))
    going = [str(u["name"]) for u in unhealthy if u.get("remediations")]
    held = [str(u["name"]) for u in unhealthy if not u.get("remediations")]
    # While paused, status.unhealthyNodes is left as it was when the pause began.
    then = " (as of the earlier pause)" if already is not None else ""
    costs.append(Cost(what=going_what, unit="nodes", value=float(len(going)), how=_names(going) + then))
    if held:
        costs.append(Cost(what=waiting, unit="nodes", value=float(len(held)), how=_names(held) + then))
    return Price(costs=tuple(costs))


def _remediation(u: dict[str, Any]) -> str:
    """`gpu-1 (SelfNodeRemediation medik8s/gpu-1-x7k2p)`: the node and its remediation objects."""
    objs = []
    for r in u.get("remediations") or []:
        res = r.get("resource") if isinstance(r, dict) else None
        if isinstance(res, dict):
            where = f"{res['namespace']}/" if res.get("namespace") else ""
            objs.append(f"{res.get('kind', '?')} {where}{res.get('name', '?')}")
    return f"{u['name']} ({', '.join(objs)})" if objs else str(u["name"])


def _status_notes(obj: dict[str, Any]) -> list[str]:
    """What the NodeHealthCheck's own status says it watches and which nodes are under remediation,
    and what the pause does to each (only what it reports)."""
    status = _status(obj)
    notes = []
    already = paused_by(obj)
    if already is not None:
        by = f" by {quote(', '.join(already))}" if already else ""
        notes.append(
            f"NodeHealthCheck is already paused{by}: while paused it reports 0 nodes watched and keeps "
            "status.unhealthyNodes as it was when that pause began, so what it says of its nodes is as of then."
        )
    elif isinstance(status.get("observedNodes"), int):
        healthy = status.get("healthyNodes")
        phase = f"; phase {quote(str(status['phase']))}" if status.get("phase") else ""
        counts = f", {healthy} healthy" if isinstance(healthy, int) else ""
        notes.append(f"NodeHealthCheck status: watches {status['observedNodes']} node(s){counts}{phase}.")
    unhealthy = _unhealthy(obj) or []
    going = [u for u in unhealthy if u.get("remediations")]
    healed = [str(u["name"]) for u in going if u.get("conditionsHealthyTimestamp")]
    held = [str(u["name"]) for u in unhealthy if not u.get("remediations")]
    if going:
        shown = ", ".join(_remediation(u) for u in going[:5]) + (", …" if len(going) > 5 else "")
        notes.append(f"Under remediation now ({len(going)}): {quote(shown)}; {STAYS_FENCED}.")
    if healed:
        # conditionsHealthyTimestamp: healthy again, its objects already deleted and waiting on the
        # remediator's finalizer (v0.9.0 L295-296): the pause does not hold that back.
        notes.append(
            f"Healthy again, remediation object already being deleted ({len(healed)}): {quote(_names(healed))}: "
            "the pause does not hold that back."
        )
    if held:
        notes.append(
            f"Unhealthy with no remediation started ({len(held)}): {quote(_names(held))}: none starts while paused."
        )
    return notes


class RemediationPause(Lever):
    name = "remediation-pause"
    default_rule = LeverRule(roles=["ops"])
    kind = NHC
    # Read, the JSON patch (apply, the conflict re-read, the fence) and undo's JSON patch.
    needs = (Access.on(NHC, "get", "patch"),)
    summary = "add firebreak:<INC-n> to a NodeHealthCheck's spec.pauseRequests: no new automatic remediation starts"

    def writes(self, ctx: Ctx, path: str) -> Writes:
        """spec.pauseRequests with its own entry last (the others are the object's, as read)."""
        entry = entry_for(ctx.incident)
        return {
            PAUSES: lambda v: isinstance(v, list) and bool(v) and all(isinstance(x, str) for x in v) and v[-1] == entry
        }

    async def plan(self, ctx: Ctx, obj: dict[str, Any]) -> Plan:
        entry = entry_for(ctx.incident)
        notes: list[str] = []
        spec = read(obj, SPEC)
        no_spec = is_absent(spec) or not isinstance(spec, dict)
        current = None if no_spec else _pauses(obj)
        if current is not None and entry in current:
            raise LeverRefusal(
                f"NodeHealthCheck {ctx.target} is already paused by {ctx.incident} (`{entry}` is in "
                f"spec.pauseRequests: {quote(', '.join(current))}); nothing to do."
            )
        changes: dict[str, Any] = {PAUSES: [*(current or []), entry]}
        # Whether spec itself existed: undo removes a spec only the lever created.
        pre: dict[str, Any] = {
            PAUSES: ABSENT if current is None else list(current),
            SPEC: ABSENT if no_spec else PRESENT,
        }
        with_provenance(obj, changes, pre, ctx.req_id, ctx.incident)
        ops: list[dict[str, Any]] = []
        if no_spec:
            # Nothing guessed: without a spec Firebreak can't say which nodes it watches or how it remediates.
            notes.append(
                f"NodeHealthCheck {ctx.target} has no spec: which nodes it watches (spec.selector) and how it "
                "remediates could not be read; the pause adds spec.pauseRequests only."
            )
            ops += [
                {"op": "test", "path": "/metadata/resourceVersion", "value": obj["metadata"]["resourceVersion"]},
                {"op": "add", "path": SPEC, "value": {"pauseRequests": [entry]}},
            ]
        elif current is None:
            ops += [
                {"op": "test", "path": "/metadata/resourceVersion", "value": obj["metadata"]["resourceVersion"]},
                {"op": "add", "path": PAUSES, "value": [entry]},
            ]
        else:
            ops += [
                {"op": "test", "path": PAUSES, "value": current},
                {"op": "add", "path": PAUSES + "/-", "value": entry},
            ]
        ops += provenance_ops(pre, ctx.req_id, ctx.incident)
        call = self.json_patch_call(ctx, ops)
        notes += _status_notes(obj)
        others = f" (with {quote(', '.join(current))})" if current else ""
        return Plan([call], changes, pre, f"spec.pauseRequests +{entry}{others}", notes=notes)

    async def price(self, ctx: Ctx, obj: dict[str, Any], plan: Plan) -> Price:
        """The nodes the NodeHealthCheck watches, those under remediation (not stopped) and the unhealthy
        ones no remediation started for yet, which the pause holds back (held_back)."""
        return held_back(ctx.target.name, obj)

    async def verify(self, ctx: Ctx, plan: Plan, after: dict[str, Any]) -> Verified:
        """The entry landed, then NodeHealthCheck's own word: phase `Paused` with the entry in its reason
        (patchStatus, v0.9.0 L731-733), within rollout_verify_seconds."""
        entry = _entry(plan.changes)
        now = read(after, PAUSES)
        if not isinstance(now, list) or entry not in now:
            return Verified(False, f"read back: spec.pauseRequests has no {entry}")
        wrote = f"spec.pauseRequests is {quote(', '.join(now))}"
        if not _status(after).get("lastUpdateTime"):
            # patchStatus stamps lastUpdateTime on every status it writes: none means no operator has
            # reconciled this NodeHealthCheck, so it has started nothing, and it reads the pause first.
            return Verified(
                True,
                f"{wrote}; no NodeHealthCheck operator has reported on it yet (no status.lastUpdateTime): "
                "it starts no remediation before it does, and then finds it paused",
            )
        seconds = ctx.policy.rollout_verify_seconds
        obj: dict[str, Any] | None = None
        phase: Any = None
        reason = ""

        async def paused() -> Verified | None:
            nonlocal obj, phase, reason
            obj = after if obj is None else await ctx.kube.get(self.path(ctx))  # read-back first
            status = _status(obj)
            phase, reason = status.get("phase"), str(status.get("reason") or "")
            if phase == PAUSED and entry in reason.removeprefix(PAUSED_REASON).split(","):
                return Verified(
                    True, f"{wrote}; NodeHealthCheck reports phase Paused ({quote(reason)}): no new remediation starts"
                )
            if phase == DISABLED:
                # Disabled wins over Paused in patchStatus (L728-730): it remediates nothing either way.
                return Verified(
                    True, f"{wrote}; NodeHealthCheck reports phase Disabled ({quote(reason)}): it remediates nothing"
                )
            return None

        if done := await awaited(seconds, paused):
            return done
        seen = f"phase {quote(str(phase))} ({quote(reason)})" if phase else "no phase"
        return Verified(
            False,
            f"{wrote}, but after {seconds:g}s NodeHealthCheck reports {seen}, not Paused by {entry}: is its operator "
            f"running? Check `kubectl --context {ctx.context} get nodehealthcheck {ctx.target.name} "
            "-o jsonpath='{.status.phase}'`",
        )

    def undo_ops(self, changes: dict[str, Any], pre_state: dict[str, Any], current: dict[str, Any]) -> list[Any]:
        entry = _entry(changes)
        if entry is None:  # not a plan of this lever's shape: restore field by field
            return super().undo_ops(changes, pre_state, current)
        ops: list[Any] = []
        now = read(current, PAUSES)
        if isinstance(now, list) and entry in now:
            if now == [entry] and is_absent(pre_state.get(PAUSES, ABSENT)):
                spec = read(current, SPEC)
                if is_absent(pre_state.get(SPEC, ABSENT)) and spec == {"pauseRequests": [entry]}:
                    ops += [{"op": "test", "path": SPEC, "value": spec}, {"op": "remove", "path": SPEC}]
                else:
                    ops += [{"op": "test", "path": PAUSES, "value": now}, {"op": "remove", "path": PAUSES}]
            else:
                # Only our entry, at the index it has now: entries added before or since stay. A list that
                # moved between this read and the patch fails the test (undo re-reads once).
                i = now.index(entry)
                at = f"{PAUSES}/{i}"
                ops += [{"op": "test", "path": at, "value": entry}, {"op": "remove", "path": at}]
        rest = {p: v for p, v in changes.items() if p != PAUSES}
        return ops + restore_ops(rest, pre_state, current)

    def not_restored(self, changes: dict[str, Any], pre_state: dict[str, Any], obj: dict[str, Any]) -> list[str]:
        entry = _entry(changes)
        if entry is None:
            return super().not_restored(changes, pre_state, obj)
        now = read(obj, PAUSES)
        left = [PAUSES] if isinstance(now, list) and entry in now else []
        return left + [
            p for p in changes if p.startswith(ANNOTATIONS + "/") and read(obj, p) != pre_state.get(p, ABSENT)
        ]
