"""What the remediation alarm reads in each cell (watch.py, handlers.py), as RBAC rules.

Nothing imports this at run time: deploy/rbac grants the union of these, triage's reads and the
levers' `needs` (tools/deploygen.py), and tests/deploy hold the ClusterRole to exactly that union.
"""

from __future__ import annotations

from levers.base import Access
from levers.catalogue.remediation import NHC

READS: tuple[Access, ...] = (
    Access("", "nodes", ("list",)),  # the watch: each cell's GPU nodes, every poll
    Access(NHC.group, NHC.plural, ("list",)),  # the alarm: the cell's NodeHealthChecks, to offer remediation-pause
)
