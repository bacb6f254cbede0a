"""The incident's own node names, for the public-granularity check (bot/comms/update.py).

Read from the incident's node-quarantine lever requests (any state: a node named
in the incident is private even if its quarantine was refused or undone), so a
node is refused in a public update even when no policy pattern knows its naming.
"""

from __future__ import annotations

from bot.core.services import Services
from bot.incidents.models import Incident
from levers.store import lever_store

NODE_LEVER = "node-quarantine"


async def quarantined_nodes(svc: Services, inc: Incident) -> list[str]:
    recs = await lever_store(svc).for_incident(inc.id)
    return list(dict.fromkeys(r.target.rpartition("/")[2] for r in recs if r.lever == NODE_LEVER))
