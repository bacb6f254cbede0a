"""What `changed` reads in each cell (bot/triage/streams.py), as RBAC rules.

Only ROLLOUT_NAMESPACES is used at run time: deploy/rbac grants the union of these and the levers' `needs`, and
tests/deploy hold the ClusterRole to exactly that union and run `changed` under it. A stream that reads
something new adds it here. Discovery (which Argo Rollouts version is served) needs no rule.
"""

from __future__ import annotations

from levers.base import Access

# The lever in whose namespaces (policies/levers.yaml `namespaces`) `changed` reads Rollouts: the ones
# Firebreak may abort. A pod template carries env values, so no template is read anywhere else.
ROLLOUT_NAMESPACES = "rollout-abort"

READS: tuple[Access, ...] = (  # cluster-wide
    Access("", "nodes", ("list",)),  # node layer: GPU nodes' driver and image labels, kernels, new nodes
    Access("", "events", ("list",)),  # Warning events (core/v1)
)
IN_NAMESPACES: tuple[Access, ...] = (  # only in ROLLOUT_NAMESPACES' namespaces (a Role in each)
    Access("argoproj.io", "rollouts", ("list",)),  # rollouts: the Rollouts there
    Access("apps", "replicasets", ("list",)),  # rollouts: their ReplicaSets (label rollouts-pod-template-hash)
)
