"""The lever catalogue: importing this registers every lever in levers.base.LEVERS."""
from __future__ import annotations

from levers.base import LEVERS
from levers.catalogue import jobset, keda, killswitch, kueue, node, rollout, route, sandbox  # noqa: F401
from levers.policy import CATALOGUE

if set(LEVERS) != set(CATALOGUE):
    raise RuntimeError(f"lever registry {sorted(LEVERS)} and levers.policy.CATALOGUE disagree")
