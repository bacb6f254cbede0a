"""Signals' Redis access: the alert groups' hashes (lua.py) and their lock, and the alerts each
incident records (lua.ALERTS_RECORD).

A group (a cell's pages, or a cell's security alerts) feeds at most one open incident. Handling
one delivery's part for a group holds the group's lock, so two replicas or two concurrent
deliveries never both open an incident for one cell: the second waits, then finds the first's
incident bound to the group and joins it.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from enum import IntEnum

from redis.exceptions import RedisError

from bot import logs
from bot.core.services import Services
from bot.signals import lua
from bot.signals.models import AlertRecord
from bot.store import Keys, Redis, script, text, write

log = logs.get(__name__)

# How long (app clock) a lock holds: a little less than the scheduler's lease, so the job the
# scheduler hands out again after a holder died finds it expired.
HOLD_OF_LEASE = 0.9
WAIT_S = 10.0  # how long (real time) a delivery waits for a busy group before its job is retried
POLL_S = 0.02


class Locked(IntEnum):
    """lua.LOCK"""

    LOCKED = 1
    BUSY = 0


class GroupBusy(Exception):
    """The group stayed locked by another delivery for WAIT_S."""


@dataclass(frozen=True)
class GroupState:
    """What lua.LOCK found: the incident fed, a number taken for one being opened, the last one fed."""

    inc: str | None
    number: int | None
    last: str | None


class AlertsRecorded(IntEnum):
    """lua.ALERTS_RECORD"""

    RECORDED = 1
    REPLAYED = 2  # this delivery was recorded before: the same result as then
    RESOLVED = -2
    MISSING = -3


@dataclass(frozen=True)
class Recorded:
    """lua.ALERTS_RECORD: which of the alerts passed in changed the record (0-based positions)."""

    code: AlertsRecorded
    fired: list[int]
    cleared: list[int]


# A delivery's body, as received, until its job is done (longer than a dead job is worth looking into).
DELIVERY_KEEP_S = 14 * 86400
ALERTS_PER_SCRIPT = 1000
# How long a delivery's recorded result is kept (a redelivery of the job comes within minutes).
RECORDED_KEEP_S = 7 * 86400


def group_key(group: str) -> str:
    return f"fb:signals:{{{group}}}"


def delivery_key(delivery: str) -> str:
    return f"fb:signals:delivery:{delivery}"


def _alerts_key(inc_id: str) -> str:
    return f"fb:inc:{{{inc_id}}}:alerts"


def _recorded_key(inc_id: str, delivery: str) -> str:
    return f"fb:inc:{{{inc_id}}}:alerts:delivery:{delivery}"


def _positions(v: object) -> list[int]:
    # Lua's cjson writes an empty list as {}.
    return [int(i) - 1 for i in v] if isinstance(v, list) else []


class SignalsStore:
    def __init__(self, redis: Redis) -> None:
        self.r = redis
        # Deliveries this process handles wait for a group here, in order, rather than each polling
        # Redis; the Redis lock below is what keeps replicas apart.
        self._local: dict[str, asyncio.Lock] = {}
        self._lock = script(redis, lua.LOCK)
        self._unlock = script(redis, lua.UNLOCK, deadline=False)  # a late release only frees our own lock
        self._reserve = script(redis, lua.RESERVE)
        self._bind = script(redis, lua.BIND)
        self._unbind = script(redis, lua.UNBIND)
        self._alerts = script(redis, lua.ALERTS_RECORD)

    @classmethod
    def of(cls, svc: Services) -> SignalsStore:
        return cls(svc.redis)

    async def lock(self, group: str, token: str, now: float, until: float) -> tuple[Locked, GroupState]:
        code, inc, number, last = await self._lock(keys=[group_key(group)], args=[token, repr(now), repr(until)])
        state = GroupState(text(inc) or None, int(number) if number else None, text(last) or None)
        return Locked(int(code)), state

    @asynccontextmanager
    async def locked(self, svc: Services, group: str, token: str) -> AsyncIterator[GroupState]:
        """Hold ``group``'s lock (waiting up to WAIT_S for another holder); GroupBusy if it stays busy."""
        local = self._local.setdefault(group, asyncio.Lock())
        try:
            await asyncio.wait_for(local.acquire(), WAIT_S)
        except TimeoutError:
            raise GroupBusy(group) from None
        try:
            async with self._locked(svc, group, token) as state:
                yield state
        finally:
            local.release()

    @asynccontextmanager
    async def _locked(self, svc: Services, group: str, token: str) -> AsyncIterator[GroupState]:
        give_up = time.monotonic() + WAIT_S
        while True:
            now = svc.clock.now()
            code, state = await self.lock(group, token, now, now + svc.scheduler.lease * HOLD_OF_LEASE)
            if code is Locked.LOCKED:
                break
            if time.monotonic() > give_up:
                raise GroupBusy(group)
            await asyncio.sleep(POLL_S * (1 + random.random()))  # jittered, so waiters do not move in step
        try:
            yield state
        finally:
            try:
                await self._unlock(keys=[group_key(group)], args=[token])
            except RedisError:
                log.warning("alert_group_unlock_failed", group=group)  # it expires on its own

    async def reserve(self, group: str, token: str, number: int) -> bool:
        return bool(await self._reserve(keys=[group_key(group)], args=[token, number]))

    async def bind(self, group: str, token: str, inc_id: str) -> bool:
        return bool(await self._bind(keys=[group_key(group)], args=[token, inc_id]))

    async def unbind(self, group: str, token: str, inc_id: str) -> bool:
        return bool(await self._unbind(keys=[group_key(group)], args=[token, inc_id]))

    # Deliveries ------------------------------------------------------------------------------

    async def save_delivery(self, delivery: str, body: str) -> None:
        """The body as received (checked already), for the delivery's job to read."""
        await write(self.r, ("SET", delivery_key(delivery), body, "EX", DELIVERY_KEEP_S))

    async def delivery(self, delivery: str) -> str | None:
        return text(await self.r.get(delivery_key(delivery)))

    async def drop_delivery(self, delivery: str) -> None:
        await write(self.r, ("DEL", delivery_key(delivery)), deadline=False)  # done: landing late is harmless

    # An incident's alerts (the postmortem reads them) -----------------------------------------

    async def record_alerts(
        self, inc_id: str, delivery: str, received_at: float, alerts: list[AlertRecord]
    ) -> Recorded:
        """Record one delivery's alerts for this incident (lua.ALERTS_RECORD). ``delivery`` names the
        delivery and its part, so a retry of the same part answers as the first time did.

        In chunks of ALERTS_PER_SCRIPT (one script's arguments must fit Lua's stack); a chunk
        whose incident was resolved or is missing ends the recording with that code."""
        code, fired, cleared = AlertsRecorded.RECORDED, [], []
        for start in range(0, len(alerts), ALERTS_PER_SCRIPT):
            chunk = alerts[start : start + ALERTS_PER_SCRIPT]
            raw_code, result = await self._alerts(
                keys=[Keys.incident(inc_id), _alerts_key(inc_id), _recorded_key(inc_id, f"{delivery}/{start}")],
                args=[repr(received_at), RECORDED_KEEP_S, *(a.model_dump_json() for a in chunk)],
            )
            code = AlertsRecorded(int(raw_code))
            if code in (AlertsRecorded.RESOLVED, AlertsRecorded.MISSING):
                break
            got = json.loads(result) if result else {}
            fired += [start + i for i in _positions(got.get("fired"))]
            cleared += [start + i for i in _positions(got.get("cleared"))]
        return Recorded(code, fired, cleared)

    async def delivery_recorded(self, inc_id: str, delivery: str) -> bool:
        """Was this delivery part recorded for the incident before (record_alerts' first chunk)?"""
        return bool(await self.r.exists(_recorded_key(inc_id, f"{delivery}/0")))

    async def alert_records(self, inc_id: str, fingerprints: list[str] | None = None) -> dict[str, AlertRecord]:
        """The incident's alerts by fingerprint (all of them, or those of ``fingerprints`` it has)."""
        if fingerprints is None:
            raw = await self.r.hgetall(_alerts_key(inc_id))
            return {str(fp): AlertRecord.model_validate_json(v) for fp, v in raw.items()}
        if not fingerprints:
            return {}
        vals = await self.r.hmget(_alerts_key(inc_id), fingerprints)
        return {fp: AlertRecord.model_validate_json(v) for fp, v in zip(fingerprints, vals, strict=True) if v}

    # Groups ---------------------------------------------------------------------------------

    async def fed(self, group: str) -> str | None:
        """The incident ``group`` feeds now (a read, without the lock)."""
        return text(await self.r.hget(group_key(group), "inc"))


def store(svc: Services) -> SignalsStore:
    """The app's signals store."""
    return svc.part(SignalsStore.of)


# The two-step marks (bot.comms.system.Once) that post a delivery's messages once, in the slot of
# the incident they are about.
def summary_mark(inc_id: str, delivery: str, group: str) -> str:
    return f"fb:inc:{{{inc_id}}}:alerts:posted:{delivery}:{group}"


def security_mark(inc_id: str, delivery: str, group: str) -> str:
    return f"fb:inc:{{{inc_id}}}:alerts:security:{delivery}:{group}"


def unopened_mark(delivery: str, group: str) -> str:
    """The security channel's line for a delivery whose incident could not be opened: once, whatever
    number each try took (no incident exists to key it by), in the group's slot."""
    return f"{group_key(group)}:unopened:{delivery}"
