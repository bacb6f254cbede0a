"""remediation-pause: stop a Medik8s NodeHealthCheck from starting new remediations.

"Automation can be the outage": a bad exporter makes NodeHealthCheck cordon and reboot half a cell.
NHC's own brake is `spec.pauseRequests` (free-form entries, one per party that wants it paused):
while the list is not empty no new remediation starts and the running ones finish. The lever adds
`firebreak:<INC-n>` and its undo removes only that entry, wherever it sits by then: entries others
added (an upgrade operator's, a person's), before or after, stay.

The list has no list-type marker in the CRD, so a merge patch would replace it whole (and drop an
entry someone added in between). The lever sends a JSON patch instead: `test` the list as read,
then append; when there is no list yet, `test` the resourceVersion (an `add` would replace a list
someone else just created). The undo tests the entry at its index, then removes that index.
"""

from __future__ import annotations

from typing import Any

from bot.chat import quote
from bot.policy.levers import LeverRule
from levers.base import Access, Ctx, Kind, Lever, LeverRefusal, Verified
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


def held_back(name: str, obj: dict[str, Any]) -> Price:
    """What the pause holds back, from the NHC's own status: the nodes it watches (none is remediated
    automatically while paused), the remediations in flight (they finish) and the unhealthy nodes no
    remediation was started for yet. Only what the status reports; nothing guessed."""
    raw = obj.get("status")
    watched = f"nodes NodeHealthCheck {name} watches, none remediated automatically while paused"
    flight = "remediations in flight (they finish)"
    waiting = "unhealthy nodes with no remediation started yet, held back"
    if not isinstance(raw, dict) or not raw:
        why = "the NodeHealthCheck has no status (its controller has not reported)"
        return Price(costs=tuple(Cost(what=w, unit="nodes", value=None, how=why) for w in (watched, flight)))
    observed, healthy = raw.get("observedNodes"), raw.get("healthyNodes")
    if isinstance(observed, int):
        state = f"{healthy} healthy now" if isinstance(healthy, int) else "status.healthyNodes not reported"
        costs = [Cost(what=watched, unit="nodes", value=float(observed), how=state)]
    else:
        costs = [Cost(what=watched, unit="nodes", value=None, how="status.observedNodes is not a count")]
    unhealthy = raw.get("unhealthyNodes", [])
    if not isinstance(unhealthy, list) or not all(isinstance(u, dict) and u.get("name") for u in unhealthy):
        why = f"status.unhealthyNodes is not a list of nodes ({quote(str(unhealthy)[:60])})"
        return Price(costs=(*costs, Cost(what=flight, unit="nodes", value=None, how=why)))
    going = [str(u["name"]) for u in unhealthy if u.get("remediations")]
    held = [str(u["name"]) for u in unhealthy if not u.get("remediations")]

    def names(ns: list[str]) -> str:
        return ", ".join(ns[:5]) + (", …" if len(ns) > 5 else "") if ns else "none"

    costs.append(Cost(what=flight, unit="nodes", value=float(len(going)), how=names(going)))
    if held:
        costs.append(Cost(what=waiting, unit="nodes", value=float(len(held)), how=names(held)))
    return Price(costs=tuple(costs))


def _status_note(obj: dict[str, Any]) -> str | None:
    """What the NHC's own status says it watches and is remediating now (only what it reports)."""
    raw = obj.get("status")
    status: dict[str, Any] = raw if isinstance(raw, dict) else {}
    parts = []
    if isinstance(status.get("observedNodes"), int):
        healthy = status.get("healthyNodes")
        parts.append(
            f"watches {status['observedNodes']} node(s)" + (f", {healthy} healthy" if isinstance(healthy, int) else "")
        )
    unhealthy = [str(u["name"]) for u in status.get("unhealthyNodes") or [] if isinstance(u, dict) and u.get("name")]
    if unhealthy:
        shown = ", ".join(unhealthy[:5]) + (", …" if len(unhealthy) > 5 else "")
        parts.append(f"{len(unhealthy)} being remediated now keep going ({quote(shown)})")
    if status.get("phase"):
        parts.append(f"phase {quote(str(status['phase']))}")
    return "NodeHealthCheck status: " + "; ".join(parts) if parts else None


class RemediationPause(Lever):
    name = "remediation-pause"
    default_rule = LeverRule(roles=["ops"])
    kind = NHC
    # Read, the JSON patch (apply, the conflict re-read, the fence) and undo's JSON patch.
    needs = (Access.on(NHC, "get", "patch"),)
    summary = "add firebreak:<INC-n> to a NodeHealthCheck's spec.pauseRequests: no new automatic remediation starts"

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
        if (status := _status_note(obj)) is not None:
            notes.append(status)
        others = f" (with {quote(', '.join(current))})" if current else ""
        return Plan([call], changes, pre, f"spec.pauseRequests +{entry}{others}", notes=notes)

    async def price(self, ctx: Ctx, obj: dict[str, Any], plan: Plan) -> Price:
        return held_back(ctx.target.name, obj)

    async def verify(self, ctx: Ctx, plan: Plan, after: dict[str, Any]) -> Verified:
        entry = _entry(plan.changes)
        now = read(after, PAUSES)
        if not isinstance(now, list) or entry not in now:
            return Verified(False, f"read back: spec.pauseRequests has no {entry}")
        return Verified(True, f"paused: spec.pauseRequests is {quote(', '.join(now))}; running remediations finish")

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
