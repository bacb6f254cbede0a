"""Which cell (kube context) a lever acts on, whether that makes it fleet-wide, and whether the
incident may reach it.

Fleet-wide is a property of the cluster, not of a context's name or of how its URL is spelled
(docs/security-model.md, "Scope, private incidents and resolve"): a context that reaches the fleet
context's cluster (the same kube-system namespace uid, read once per context: levers/kube.py) is the
fleet too (for approvals and break-glass scope). A lever on a cell acts only inside the incident's
scope (same section): its cells, widened only by the IC's `/incident scope add <cell>`.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.clusters import KubeError, UnknownCell
from bot.core.request import IncidentView
from bot.core.services import Services
from bot.policy.levers import LeversPolicy
from levers.base import Access, Lever, LeverRefusal, Target, rule_of

FLEET = "fleet"
# Reading a cluster's identity (levers/kube.py IDENTITY_PATH): deploy/rbac grants exactly this.
READS = (Access("", "namespaces", ("get",), names=("kube-system",), cluster=True),)


@dataclass(frozen=True)
class Scope:
    cell: str  # the cell's name, or "fleet"
    context: str
    # Named as a cell, but its context reaches the fleet context's API server.
    alias: str | None = None

    @property
    def fleet(self) -> bool:
        return self.cell == FLEET

    @property
    def label(self) -> str:
        return FLEET if self.fleet else self.cell


class OutOfScope(LeverRefusal):
    """A cell the incident's scope does not name."""


def resolve(policy: LeversPolicy, lever: Lever, cell: str | None, inc: IncidentView | None) -> Scope:
    """By name only: --cell wins; else the fleet context for fleet levers; else the incident's only cell."""
    if cell is None and lever.fleet_default:
        cell = policy.fleet_context
    if cell is None:
        cells = inc.cells if inc is not None else []
        if len(cells) != 1:
            listed = f" (this incident's cells: {', '.join(cells)})" if cells else ""
            raise LeverRefusal(f"Say which cell: add `--cell <cell>`{listed}.")
        cell = cells[0]
    if cell in (policy.fleet_context, FLEET):
        return Scope(FLEET, policy.fleet_context)
    return Scope(cell, policy.context_of(cell))


async def by_server(svc: Services, scope: Scope, identify: bool = True) -> Scope:
    """``scope`` made fleet-wide when its context reaches the fleet context's cluster (by identity; by URL
    alone when ``identify`` is False)."""
    if scope.fleet:
        return scope
    fleet = svc.policy.levers.fleet_context
    if await svc.clusters.same_server(scope.context, fleet, identify):
        return Scope(FLEET, scope.context, alias=scope.cell)
    return scope


def out_of_scope(cell: str, inc: IncidentView) -> str:
    where = ", ".join(inc.cells) or "no cells yet"
    return (
        f"{cell} is not in {inc.id}'s scope ({where}). The IC can widen it: "
        f"`/incident scope add {cell}`; nothing changed."
    )


async def place(svc: Services, lever: Lever, cell: str | None, inc: IncidentView | None) -> Scope:
    """Where the lever acts, checked: LeverRefusal when no cell is named, UnknownCell when the
    kubeconfig has no such context, OutOfScope when the incident does not cover the cell. The fleet
    (and any context on its API server) keeps its own rule: it always needs approval."""
    named = resolve(svc.policy.levers, lever, cell, inc)
    # A cell outside the incident is not read at all, not even for its identity: it is the fleet only if
    # its URL says so, else refused as out of scope (widened, the next pull reads who it is).
    in_scope = named.fleet or inc is None or named.cell in inc.cells
    scope = await by_server(svc, named, identify=in_scope)
    if scope.fleet or inc is None or scope.cell in inc.cells:
        return scope
    known = await svc.clusters.contexts()
    if known is not None and scope.context not in known:
        raise UnknownCell(scope.context, known)  # a typo is said as such, not as a scope question
    raise OutOfScope(out_of_scope(scope.cell, inc))


async def scope_name(svc: Services, lever: Lever, cell: str | None, inc: IncidentView | None) -> str:
    """For grant lookups before anything else is known: the cell name or "fleet"."""
    try:
        scope = resolve(svc.policy.levers, lever, cell, inc)
    except LeverRefusal:
        return cell or FLEET
    # By URL only: this runs before the role check, and a person without a role reaches no API server.
    # A respelled fleet context named as a cell is found by place() (the request's cell is "fleet"), and
    # a fleet request always waits for approval, whose run checks the requester again on that cell.
    try:
        return (await by_server(svc, scope, identify=False)).cell
    except KubeError:  # an unreadable kubeconfig: the pull itself says so, with its reason
        return scope.cell


async def known_cells(svc: Services) -> list[str] | None:
    """KNOWN_CELLS: the policy's cells and the kubeconfig's contexts, the fleet context left out
    (None: no kubeconfig and no cells in the policy)."""
    pol = svc.policy.levers
    contexts = await svc.clusters.contexts()
    if contexts is None and not pol.cells:
        return None
    return [c for c in [*pol.cells, *(contexts or [])] if c not in (pol.fleet_context, FLEET)]


def approval_reasons(policy: LeversPolicy, lever: Lever, scope: Scope, target: Target) -> list[str]:
    rule = rule_of(policy, lever)
    reasons = []
    if rule.needs_approval:
        reasons.append(rule.why or f"policy: {lever.name} needs a second person")
    if scope.alias is not None:
        reasons.append(
            f"`{scope.context}` points at the fleet context's API server (`{policy.fleet_context}`): fleet-wide"
        )
    elif scope.fleet:
        reasons.append(f"acts on the fleet context `{policy.fleet_context}`")
    elif str(target) in policy.fleet_targets:
        reasons.append(f"{target} is fleet-wide (policy fleet_targets)")
    return reasons
