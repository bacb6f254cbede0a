"""Which cell (kube context) a lever acts on, and whether that makes it fleet-wide."""

from __future__ import annotations

from dataclasses import dataclass

from bot.core.request import IncidentView
from bot.policy.levers import LeversPolicy
from levers.base import Lever, LeverRefusal, Target, rule_of


@dataclass(frozen=True)
class Scope:
    cell: str  # the cell's name, or "fleet"
    context: str

    @property
    def fleet(self) -> bool:
        return self.cell == "fleet"

    @property
    def label(self) -> str:
        return "fleet" if self.fleet else self.cell


def resolve(policy: LeversPolicy, lever: Lever, cell: str | None, inc: IncidentView | None) -> Scope:
    """--cell wins; else the fleet context for fleet levers; else the incident's only cell."""
    if cell is None and lever.fleet_default:
        cell = policy.fleet_context
    if cell is None:
        cells = inc.cells if inc is not None else []
        if len(cells) != 1:
            listed = f" (this incident's cells: {', '.join(cells)})" if cells else ""
            raise LeverRefusal(f"Say which cell: add `--cell <cell>`{listed}.")
        cell = cells[0]
    if cell in (policy.fleet_context, "fleet"):
        return Scope("fleet", policy.fleet_context)
    return Scope(cell, policy.context_of(cell))


def scope_name(policy: LeversPolicy, lever: Lever, cell: str | None, inc: IncidentView | None) -> str:
    """For grant lookups before anything else is known: the cell name or "fleet"."""
    try:
        return resolve(policy, lever, cell, inc).cell
    except LeverRefusal:
        return cell or "fleet"


def approval_reasons(policy: LeversPolicy, lever: Lever, scope: Scope, target: Target) -> list[str]:
    rule = rule_of(policy, lever)
    reasons = []
    if rule.needs_approval:
        reasons.append(rule.why or f"policy: {lever.name} needs a second person")
    if scope.fleet:
        reasons.append(f"acts on the fleet context `{policy.fleet_context}`")
    elif str(target) in policy.fleet_targets:
        reasons.append(f"{target} is fleet-wide (policy fleet_targets)")
    return reasons
