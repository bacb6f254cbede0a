"""What `changed` reads in each cell (bot/triage/streams.py), as RBAC rules.

Nothing imports this at run time: deploy/rbac grants the union of these and the levers' `needs`, and
tests/deploy hold the ClusterRole to exactly that union and run `changed` under it. A stream that reads
something new adds it here. Discovery (which Argo Rollouts version is served) needs no rule.
"""

from __future__ import annotations

from levers.base import Access

READS: tuple[Access, ...] = (
    Access("argoproj.io", "rollouts", ("list",)),  # rollouts: every namespace's Rollouts
    Access("apps", "replicasets", ("list",)),  # rollouts: their ReplicaSets (label rollouts-pod-template-hash)
    Access("", "nodes", ("list",)),  # node layer: GPU nodes' driver and image labels, kernels, new nodes
    Access("", "events", ("list",)),  # Warning events (core/v1)
)
