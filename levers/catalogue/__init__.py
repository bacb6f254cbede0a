"""The lever catalogue: every lever Firebreak can pull, listed here by hand, by name."""

from __future__ import annotations

from collections.abc import Mapping

from levers.base import Lever
from levers.catalogue.jobset import JobSetSuspend
from levers.catalogue.keda import KedaPause
from levers.catalogue.killswitch import Killswitch
from levers.catalogue.kueue import KueueHold, KueueHoldDrain
from levers.catalogue.node import NodeQuarantine
from levers.catalogue.remediation import RemediationPause
from levers.catalogue.rollout import RolloutAbort
from levers.catalogue.route import RouteWeight
from levers.catalogue.sandbox import SandboxQuarantine

_ALL: tuple[Lever, ...] = (
    KueueHold(),
    KueueHoldDrain(),
    KedaPause(),
    RolloutAbort(),
    RouteWeight(),
    NodeQuarantine(),
    RemediationPause(),
    JobSetSuspend(),
    Killswitch(),
    SandboxQuarantine(),
)

LEVERS: Mapping[str, Lever] = {lever.name: lever for lever in _ALL}
if len(LEVERS) != len(_ALL):
    raise RuntimeError("two levers in the catalogue share a name")

# Each lever says which API access it uses (Lever.needs): deploy/rbac grants exactly their union.
if undeclared := sorted(lever.name for lever in _ALL if not getattr(lever, "needs", ())):
    raise RuntimeError(f"levers {undeclared} declare no `needs` (the RBAC they use in a cell)")
# What a stored record of it may name (levers/bounds.py): undo and settling refuse anything else.
if no_writes := sorted(lever.name for lever in _ALL if type(lever).writes is Lever.writes):
    raise RuntimeError(f"levers {no_writes} declare no `writes` (the fields their plans set)")
if no_rule := sorted(lever.name for lever in _ALL if not hasattr(lever, "default_rule")):
    raise RuntimeError(f"levers {no_rule} declare no `default_rule` (who pulls them when policy does not say)")
