"""Comms' Redis access: recording an update, the cadence sync mark, snooze, and the two-step
dedupe marks.

The Lua is in lua.py; each script's result codes are the enums below. The key layout
stays in bot/store/keys.py (``Keys.comms``, ``Keys.dedupe``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from bot.comms import lua
from bot.core.services import Services
from bot.store import Keys, Redis, script

_PENDING = "pending:"  # the prefix lua.MARK_CLAIM writes while a claim holds


class UpdateRecorded(IntEnum):
    """lua.UPDATE_RECORD"""

    RECORDED = 1
    RESOLVED = -2
    MISSING = -3


@dataclass(frozen=True)
class Updated:
    """lua.UPDATE_RECORD: the code, and the next update due it set (None: not active, nothing due)."""

    code: UpdateRecorded
    due: float | None


class Snoozed(IntEnum):
    """lua.SNOOZE"""

    SNOOZED = 1
    DUE_MOVED = 0  # an update or another snooze came first; ``current`` is the due now ("" none)
    NOT_ACTIVE = -2
    MISSING = -3


class MarkClaim(IntEnum):
    """lua.MARK_CLAIM"""

    CLAIMED = 1
    TAKEN = 0  # done, or another process holds an unexpired claim and is posting
    TAKEN_OVER = 2  # claimed over an expired claim: its claimer died mid-post (its post may have landed)


@dataclass(frozen=True)
class Claim:
    """lua.MARK_CLAIM: the code, and for TAKEN_OVER when the dead claimer's claim ran until."""

    code: MarkClaim
    expired_until: float | None = None


class MarkDone(IntEnum):
    """lua.MARK_DONE"""

    DONE = 1
    LOST = 0  # the claim ran out and another process took it: theirs to finish


@dataclass(frozen=True)
class Synced:
    """lua.SYNC_MARK: the due a reminder should be scheduled for ("" none) and the one synced before."""

    changed: bool
    target: str
    previous: str


@dataclass(frozen=True)
class SnoozeResult:
    code: Snoozed
    current: str  # the due now, as the incident hash stores it


def pending(until: float) -> str:
    """The value a claim holds until ``until`` (what MARK_DONE and MARK_RELEASE compare against)."""
    return f"{_PENDING}{until!r}"


class CommsStore:
    """The scripts in lua.py, registered once per app (registering hashes the source)."""

    def __init__(self, redis: Redis) -> None:
        self.r = redis
        self._update = script(redis, lua.UPDATE_RECORD)
        self._sync_mark = script(redis, lua.SYNC_MARK)
        self._snooze = script(redis, lua.SNOOZE)
        self._mark_claim = script(redis, lua.MARK_CLAIM)
        self._mark_done = script(redis, lua.MARK_DONE, deadline=False)  # the post landed
        self._mark_release = script(redis, lua.MARK_RELEASE, deadline=False)

    @classmethod
    def of(cls, svc: Services) -> CommsStore:
        return cls(svc.redis)

    # Cadence ----------------------------------------------------------------------------------

    async def record_update(self, inc_id: str, text: str, now: float, intervals: dict[int, float]) -> Updated:
        """Record an update on the incident; while it is active the next one is due ``intervals``
        minutes (by its SEV as stored) from ``now``."""
        code, due = await self._update(
            keys=[Keys.incident(inc_id)],
            args=[now, text, *(intervals[s] * 60 for s in (1, 2, 3, 4))],
        )
        return Updated(UpdateRecorded(int(code)), float(due) if due else None)

    async def sync_mark(self, inc_id: str) -> Synced:
        """Record the incident's current reminder due as synced; says whether it changed."""
        changed, target, prev = await self._sync_mark(keys=[Keys.incident(inc_id), Keys.comms(inc_id, "cadence")])
        return Synced(bool(int(changed)), str(target), str(prev))

    async def snooze(self, inc_id: str, expected_due: str, new_due: float) -> SnoozeResult:
        """Move the due from ``expected_due`` to ``new_due``, only if it is still ``expected_due``."""
        code, current = await self._snooze(keys=[Keys.incident(inc_id)], args=[expected_due, repr(new_due)])
        return SnoozeResult(Snoozed(int(code)), str(current or ""))

    # Dedupe marks -----------------------------------------------------------------------------

    async def claim_mark(self, key: str, now: float, until: float, keep_s: int) -> Claim:
        code, expired = await self._mark_claim(keys=[key], args=[repr(now), repr(until), keep_s])
        return Claim(MarkClaim(int(code)), float(expired) if expired else None)

    async def done_mark(self, key: str, claim: str, keep_s: int) -> MarkDone:
        """Mark done if ``claim`` (a ``pending(until)`` value) still holds the mark."""
        return MarkDone(int(await self._mark_done(keys=[key], args=[claim, keep_s])))

    async def release_mark(self, key: str, claim: str) -> None:
        """Drop the mark if ``claim`` still holds it (the post failed: the next delivery tries again)."""
        await self._mark_release(keys=[key], args=[claim])

    async def is_done(self, key: str) -> bool:
        """The mark's side effect landed (a pending claim is not done)."""
        v = await self.r.get(key)
        if v is None:
            return False
        return not (v.decode() if isinstance(v, bytes) else v).startswith(_PENDING)


def store(svc: Services) -> CommsStore:
    """The app's comms store."""
    return svc.part(CommsStore.of)
