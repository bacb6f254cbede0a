"""Ballots in Redis: create, vote, expire, end, revoke (each one Lua script)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field

from bot.approvals import scripts
from bot.store import Keys, Redis

Kind = Literal["lever", "breakglass"]
# pending -> approved | denied | expired; a break-glass grant then -> ended | revoked.
State = Literal["pending", "approved", "denied", "expired", "ended", "revoked"]

_JSON = ("seats", "sev1_seats", "filled", "detail")


class Ballot(BaseModel):
    id: str  # REQ-<n> (a lever request) or BG-<n> (a break-glass grant)
    kind: Kind
    incident: str
    requester: str
    state: State = "pending"
    created_at: float
    expires_at: float
    seats: list[str]
    sev1_seats: list[str] = Field(default_factory=list)
    filled: dict[str, str] = Field(default_factory=dict)  # seat -> who approved it
    digest: str = ""
    grant_seconds: float = 0
    grant_expires_at: float | None = None
    decided_by: str | None = None
    decided_at: float | None = None
    ended_at: float | None = None
    ended_by: str | None = None
    card_channel: str | None = None
    card_ts: str | None = None
    detail: dict[str, Any] = Field(default_factory=dict)  # what the card shows

    def encode(self) -> list[str]:
        out: list[str] = []
        for k, v in self.model_dump().items():
            if v is None:
                continue
            out += [k, json.dumps(v) if k in _JSON else str(v)]
        return out

    @classmethod
    def decode(cls, raw: dict[str, str]) -> "Ballot":
        data: dict[str, Any] = dict(raw)
        for k in _JSON:
            if k in data:
                v = json.loads(data[k])
                # Lua's cjson writes an empty table as {} whatever it was.
                data[k] = [] if v == {} and k in ("seats", "sev1_seats") else v
        return cls.model_validate(data)


@dataclass(frozen=True)
class Vote:
    code: str
    seat: str = ""
    other: str = ""  # filled: who holds the seat's approval; recorded: seats still missing (json)


def ballot_key(inc: str, bid: str) -> str:
    return Keys.approvals(inc, f"ballot:{bid}")


def votes_key(inc: str, bid: str) -> str:
    return Keys.approvals(inc, f"votes:{bid}")


def index_key(inc: str) -> str:
    return Keys.approvals(inc, "ballots")


class Ballots:
    def __init__(self, redis: Redis) -> None:
        self.r = redis
        self._create = redis.register_script(scripts.CREATE)
        self._vote = redis.register_script(scripts.VOTE)
        self._expire = redis.register_script(scripts.EXPIRE)
        self._end = redis.register_script(scripts.END_GRANT)
        self._revoke = redis.register_script(scripts.REVOKE)
        self._card = redis.register_script(scripts.SET_CARD)
        self._close = redis.register_script(scripts.CLOSE)

    async def create(self, b: Ballot) -> bool:
        return bool(await self._create(keys=[ballot_key(b.incident, b.id), index_key(b.incident)],
                                       args=[b.id, *b.encode()]))

    async def get(self, inc: str, bid: str) -> Ballot | None:
        raw = await self.r.hgetall(ballot_key(inc, bid))
        return Ballot.decode(raw) if raw else None

    async def all(self, inc: str) -> list[Ballot]:
        ids = sorted(await self.r.smembers(index_key(inc)))
        async with self.r.pipeline(transaction=False) as p:
            for bid in ids:
                p.hgetall(ballot_key(inc, bid))
            rows = await p.execute()
        return [Ballot.decode(r) for r in rows if r]

    async def vote(self, inc: str, bid: str, voter: str, choice: str, now: float) -> Vote:
        code, a, b = await self._vote(
            keys=[ballot_key(inc, bid), votes_key(inc, bid), Keys.roles(inc), Keys.incident(inc)],
            args=[voter, now, choice],
        )
        return Vote(str(code), str(a), str(b))

    async def expire(self, inc: str, bid: str, now: float) -> int:
        return int(await self._expire(keys=[ballot_key(inc, bid)], args=[now]))

    async def end_grant(self, inc: str, bid: str, now: float) -> int:
        return int(await self._end(keys=[ballot_key(inc, bid)], args=[now]))

    async def revoke(self, inc: str, bid: str, actor: str, now: float, revokers: list[str]) -> tuple[str, str]:
        code, state = await self._revoke(keys=[ballot_key(inc, bid), Keys.roles(inc)],
                                         args=[actor, now, json.dumps(revokers)])
        return str(code), str(state)

    async def close(self, inc: str, bid: str, now: float, actor: str) -> str:
        """At resolve: 'expired' (was pending), 'ended' (was an active grant) or '' (nothing to do)."""
        got = await self._close(keys=[ballot_key(inc, bid)], args=[now, actor])
        return got.decode() if isinstance(got, bytes) else str(got or "")

    async def set_card(self, inc: str, bid: str, channel: str, ts: str) -> None:
        await self._card(keys=[ballot_key(inc, bid)], args=[channel, ts])
