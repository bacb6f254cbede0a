"""Open incidents straight into Redis through the incidents store API, fast: the state 10,000
declared incidents leave (record, roles, channel binding, pending reminder), without 10,000 Slack
round trips. Used by tests/reliability/test_scale.py and bench/scale_bench.py."""

from __future__ import annotations

import asyncio
import time

from bot.comms import timers
from bot.core.services import Services
from bot.incidents.models import Incident, RoleHolder
from bot.incidents.store import repo
from bot.store import Keys

CELLS = ("us-east-1", "us-east-2", "us-east-3")


def channel_for(number: int) -> str:
    return f"CSEED{number:07d}"


async def seed_open(svc: Services, n: int, due_in: float = 3600.0, batch: int = 250) -> float:
    """Open INC-1 … INC-n (SEV1-4, one cell each, an IC and an ops lead), each bound to its channel
    ``channel_for(i)`` and with its reminder pending ``due_in`` seconds from now; the incident
    counter is left at n, so the next declare is INC-(n+1). Returns the seconds it took."""
    start = time.perf_counter()
    now = time.time()
    store = repo(svc)

    async def one(i: int) -> None:
        holder = RoleHolder(user="U_IC", since=now, by="U_IC")
        inc = Incident(
            id=f"INC-{i}",
            number=i,
            title=f"Seeded incident {i}",
            sev=1 + i % 4,
            channel_id=channel_for(i),
            channel_name=f"inc-seed-{i}",
            declared_by="U_IC",
            declared_at=now,
            detected_at=now,
            cells=[CELLS[i % len(CELLS)]],
            next_update_due=now + due_in + i % 600,
            roles={"ic": holder, "ops": RoleHolder(user="U0OPS", since=now, by="U_IC")},
        )
        await store.create(inc)
        await store.bind_channel(inc.id, inc.channel_id or "")
        await timers.sync(svc, inc.id)

    for lo in range(1, n + 1, batch):
        await asyncio.gather(*(one(i) for i in range(lo, min(n, lo + batch - 1) + 1)))
    await svc.redis.set(Keys.INCIDENT_SEQ, n)
    return time.perf_counter() - start
