"""The remediation alarm's Redis access: one watch per cell (lua.py), its keys in the cell's slot.

Every decision is one script: which nodes went out since the last listing, how many in the last
hour, whether one went out again within the policy's window, and whether the cell's burst has
alarmed already. Two replicas reading the same listing at once record it once: the second finds
the nodes out already, so exactly one of them gets ALARM.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum

from bot.core.services import Services
from bot.signals.remediation import lua
from bot.store import Redis, script, text

KEEP_S = 7 * 86400  # a cell no longer listed is forgotten after this


class Observed(IntEnum):
    """lua.OBSERVE"""

    NOTHING_NEW = 0  # no node went out since the last listing
    COUNTED = 1  # some did; below the rate, no repeat
    ALARM = 2  # a new burst: this caller posts it
    IN_BURST = 3  # the cell's burst alarmed already: counted in `more`, not posted again


@dataclass(frozen=True)
class Observation:
    code: Observed
    count: int  # nodes that went out in the last hour
    burst: int
    more: int
    repeats: list[str]
    reason: str


@dataclass(frozen=True)
class Pending:
    """A burst's alarm not posted yet, taken (lua.CLAIM) by this process to post."""

    cell: str
    burst: int
    at: float
    count: int
    reason: str  # "rate" | "repeat"
    repeats: list[str]
    more: int
    number: int | None  # the incident number taken for an incident being opened
    incident: str | None  # the incident it goes to


def _keys(cell: str) -> list[str]:
    base = f"fb:ralarm:{{{cell}}}"
    return [f"{base}:state", f"{base}:out", f"{base}:last", f"{base}:events"]


def _names(raw: str | None) -> list[str]:
    got = json.loads(raw or "[]")
    return [str(x) for x in got] if isinstance(got, list) else []  # cjson writes an empty list as {}


class AlarmStore:
    def __init__(self, redis: Redis) -> None:
        self.r = redis
        self._observe = script(redis, lua.OBSERVE)
        self._claim = script(redis, lua.CLAIM)
        self._note = script(redis, lua.NOTE)
        self._posted = script(redis, lua.POSTED, deadline=False)  # the post landed: record it even late
        self._release = script(redis, lua.RELEASE)

    @classmethod
    def of(cls, svc: Services) -> AlarmStore:
        return cls(svc.redis)

    async def observe(
        self,
        cell: str,
        out: Sequence[tuple[str, float | None]],
        *,
        now: float,
        window: float,
        per_window: int,
        same_node: float,
        quiet: float,
        claim_until: float,
    ) -> Observation:
        nodes = json.dumps([[name, -1 if since is None else since] for name, since in out])
        args: list[str | int] = [
            repr(now),
            repr(window),
            per_window,
            repr(same_node),
            repr(quiet),
            KEEP_S,
            repr(claim_until),
            nodes,
        ]
        code, count, burst, more, repeats, reason = await self._observe(keys=_keys(cell), args=args)
        return Observation(
            Observed(int(code)), int(count), int(burst), int(more), _names(text(repeats)), text(reason) or ""
        )

    async def claim(self, cell: str, now: float, until: float) -> Pending | None:
        got = await self._claim(keys=_keys(cell)[:1], args=[repr(now), repr(until)])
        if int(got[0]) == 0:
            return None
        burst, at, count, reason, repeats, more, number, incident = (text(x) or "" for x in got[1:])
        return Pending(
            cell=cell,
            burst=int(burst),
            at=float(at),
            count=int(count),
            reason=reason,
            repeats=_names(repeats),
            more=int(more or 0),
            number=int(number) if number else None,
            incident=incident or None,
        )

    async def note(self, cell: str, burst: int, field: str, value: str) -> bool:
        return bool(await self._note(keys=_keys(cell)[:1], args=[burst, field, value]))

    async def posted(self, cell: str, burst: int) -> bool:
        return bool(await self._posted(keys=_keys(cell)[:1], args=[burst]))

    async def release(self, cell: str, burst: int) -> None:
        await self._release(keys=_keys(cell)[:1], args=[burst])

    async def recent(self, cell: str, since: float) -> list[str]:
        """The nodes that went out since ``since`` (oldest first; a node twice, twice)."""
        members = await self.r.zrangebyscore(_keys(cell)[3], repr(since), "+inf")
        return [(m.decode() if isinstance(m, bytes) else str(m)).rpartition("|")[0] for m in members]


def store(svc: Services) -> AlarmStore:
    """The app's remediation-alarm store."""
    return svc.part(AlarmStore.of)
