"""The levers' Redis: lever requests, the node-quarantine budgets and route-weight step bookkeeping.

Requests: one hash per REQ (levers.requests.LeverRequest), a per-incident index,
an index by latest move, and every state change one Lua compare-and-set
(lua.TRANSITION) that also keeps the in-flight and moved indexes. Budgets: a rate
per cell per hour (a sorted set: member request, score time) and the quarantine
floor (a sorted set of nodes: +inf while a write is in flight, then when it landed;
a hash of which request owns each place), reserved together in one script
(lua.RESERVE). Route steps: per incident, each backend's baseline weight and when
it was last stepped.
Each script's result codes are the enums below.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Literal

from redis.typing import EncodableT

from bot.core.services import Services
from bot.store import Keys, Redis, script, write
from levers import lua
from levers.requests import IN_FLIGHT, STATES, LeverRequest, LeverState

_IN_FLIGHT_KEY = Keys.levers("in-flight")
MOVED_KEY = Keys.levers("moved")  # every request, scored by its latest move (lua.TRANSITION)


class Moved(IntEnum):
    """lua.TRANSITION"""

    MOVED = 1
    NOT_FROM = 0  # missing, or in none of the states it may move from


class Reserved(IntEnum):
    """lua.RESERVE"""

    OK = 1
    RATE = -1  # detail: quarantines in the window
    FLOOR = -2  # detail: quarantined before, after this one, GPU nodes in total


class FloorMoved(IntEnum):
    """lua.FLOOR"""

    MOVED = 1
    NOT_OWNER = 0  # another request holds that node's place (or nobody does)


@dataclass(frozen=True)
class Reservation:
    code: Reserved
    detail: tuple[int, ...] = ()


def _text(v: bytes | str) -> str:
    return v.decode() if isinstance(v, bytes) else v


def _encode(fields: dict[str, Any]) -> dict[EncodableT, EncodableT]:
    return {k: (LeverState(v).value if k == "state" else json.dumps(v)) for k, v in fields.items()}


def _decode(raw: dict[bytes | str, bytes | str]) -> LeverRequest:
    data = {_text(k): _text(v) for k, v in raw.items()}
    return LeverRequest.model_validate({k: (v if k == "state" else json.loads(v)) for k, v in data.items()})


def _request(req_id: str) -> str:
    return Keys.levers(f"req:{req_id}")


request_key = _request  # the migrations scan these (levers/migrations.py)


def request_id(key: str) -> str:
    """REQ-n from its hash's key."""
    return key.rsplit("req:", 1)[1]


def _by_incident(incident: str) -> str:
    return Keys.levers(f"inc:{incident}")


def _rate(cell: str) -> str:
    return Keys.levers(f"quarantines:{cell}")


def _floor(cell: str) -> list[str]:
    return [Keys.levers(f"quarantined:{cell}"), Keys.levers(f"quarantined-by:{cell}")]


def _route(incident: str) -> str:
    return Keys.levers(f"route:{incident}")


class LeverStore:
    def __init__(self, redis: Redis) -> None:
        self.r = redis
        self._transition = script(redis, lua.TRANSITION)
        self._reserve = script(redis, lua.RESERVE)
        self._floor = script(redis, lua.FLOOR)

    @classmethod
    def of(cls, svc: Services) -> LeverStore:
        return cls(svc.redis)

    # Requests ---------------------------------------------------------------------------------

    async def next_id(self) -> str:
        (n,) = await write(self.r, ("INCR", Keys.REQUEST_SEQ))  # deadlined: bot/store/scripts.py write()
        return f"REQ-{n}"

    async def create(self, rec: LeverRequest) -> None:
        if rec.state not in STATES:
            raise ValueError(f"lever request state {rec.state!r} is not one the store holds")
        fields = [x for kv in _encode(rec.model_dump()).items() for x in kv]
        await write(
            self.r,
            ("HSET", _request(rec.id), *fields),
            ("ZADD", _by_incident(rec.incident), rec.created_at, rec.id),
            ("ZADD", MOVED_KEY, rec.created_at, rec.id),
        )

    async def get(self, req_id: str) -> LeverRequest | None:
        raw = await self.r.hgetall(_request(req_id))
        return _decode(raw) if raw else None

    async def _get_many(self, ids: Iterable[bytes | str]) -> list[LeverRequest]:
        """Several records in one round trip (missing ones left out)."""
        keys = [_request(_text(i)) for i in ids]
        if not keys:
            return []
        async with self.r.pipeline(transaction=False) as p:
            for key in keys:
                p.hgetall(key)
            raws = await p.execute()
        return [_decode(raw) for raw in raws if raw]

    async def transition(self, req_id: str, from_states: set[LeverState], to_state: LeverState, **fields: Any) -> bool:
        """Atomically move req_id to to_state if it is in one of from_states; set fields with it."""
        if to_state not in STATES or not from_states <= set(STATES):
            raise ValueError(
                f"lever request state {to_state!r} (from {sorted(from_states)}) is not one the store holds"
            )
        src = sorted(LeverState(s).value for s in from_states)  # a plain string must name a member too
        flat: list[EncodableT] = []
        for k, v in _encode(fields).items():
            flat += [k, v]
        code = await self._transition(
            keys=[_request(req_id), _IN_FLIGHT_KEY, MOVED_KEY], args=[len(src), *src, LeverState(to_state).value, *flat]
        )
        return Moved(int(code)) is Moved.MOVED

    async def in_flight(self) -> list[LeverRequest]:
        """Requests some process was executing or undoing (it may have died since)."""
        out = await self._get_many(sorted(_text(i) for i in await self.r.smembers(_IN_FLIGHT_KEY)))
        return [x for x in out if x.state in IN_FLIGHT]

    async def for_incident(self, incident: str) -> list[LeverRequest]:
        # Plain members: without withscores, zrange gives no (member, score) pairs.
        ids = [m for m in await self.r.zrange(_by_incident(incident), 0, -1) if isinstance(m, (bytes, str))]
        return await self._get_many(ids)

    async def moved_since(self, since: float) -> list[LeverRequest]:
        """Every request whose latest move (created, approved, started, finished, undone) is at or
        after ``since``: one range read, however many incidents are open."""
        ids = [m for m in await self.r.zrangebyscore(MOVED_KEY, since, "+inf") if isinstance(m, (bytes, str))]
        return await self._get_many(ids)

    # Node-quarantine budgets ------------------------------------------------------------------

    async def quarantines_since(self, cell: str, since: float) -> int:
        """The cell's quarantines (rate reservations) from ``since`` on."""
        return int(await self.r.zcount(_rate(cell), since, "+inf"))

    async def reserve_quarantine(
        self,
        cell: str,
        req_id: str,
        node: str,
        *,
        now: float,
        limit: int,
        window: float,
        total: int,
        max_fraction: float,
        listed_at: float,
        override: bool,
        listed: list[str],
    ) -> Reservation:
        """Take the hour's slot and the node's floor place together, or neither (lua.RESERVE)."""
        got = await self._reserve(
            keys=[_rate(cell), *_floor(cell)],
            args=[now, limit, window, req_id, node, total, max_fraction, listed_at, int(override), *listed],
        )
        return Reservation(Reserved(int(got[0])), tuple(int(x) for x in got[1:]))

    async def move_floor(
        self, cell: str, node: str, req_id: str, how: Literal["landed", "free"], now: float
    ) -> FloorMoved:
        """The floor place ``req_id`` holds: landed (scored now) or given up (lua.FLOOR)."""
        return FloorMoved(int(await self._floor(keys=_floor(cell), args=[node, req_id, how, now])))

    async def release_rate(self, cell: str, req_id: str) -> None:
        await write(self.r, ("ZREM", _rate(cell), req_id))

    # Route-weight steps -----------------------------------------------------------------------

    async def route_baseline(self, incident: str, field: str) -> int | None:
        """The backend's weight when this incident first stepped it (None: not stepped yet)."""
        stored = await self.r.hget(_route(incident), f"{field}:baseline")
        return int(stored) if stored is not None else None

    async def route_last_step(self, incident: str, field: str) -> float | None:
        last = await self.r.hget(_route(incident), f"{field}:last")
        return float(last) if last is not None else None

    async def route_stepped(self, incident: str, field: str, baseline: int, now: float) -> None:
        """A step landed: keep the first baseline, remember when."""
        await write(
            self.r,
            ("HSETNX", _route(incident), f"{field}:baseline", baseline),
            ("HSET", _route(incident), f"{field}:last", now),
        )


def lever_store(svc: Services) -> LeverStore:
    """The app's lever store (one per app: it holds the registered scripts)."""
    return svc.part(LeverStore.of)
