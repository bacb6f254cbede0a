"""Ballots in Redis: create, vote, expire, end, revoke, close (each one Lua script, lua.py),
and the break-glass id sequence. Each script's result codes are the enums below."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum, StrEnum
from typing import Any, Literal

from pydantic import BaseModel, Field

from bot.approvals import lua
from bot.core.services import Services
from bot.store import Keys, Redis, script, write

Kind = Literal["lever", "breakglass", "undo"]  # undo: a node return over a failing check (undo_side.py)
# pending -> approved | denied | expired; a break-glass grant then -> ended | revoked.
State = Literal["pending", "approved", "denied", "expired", "ended", "revoked"]

_JSON = ("seats", "sev1_seats", "filled", "detail")


class Ballot(BaseModel):
    id: str  # REQ-<n> (a lever request, or an undo's own id from the same sequence) or BG-<n> (a grant)
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
    def decode(cls, raw: dict[str, str]) -> Ballot:
        data: dict[str, Any] = dict(raw)
        for k in _JSON:
            if k in data:
                v = json.loads(data[k])
                # Lua's cjson writes an empty table as {} whatever it was.
                data[k] = [] if v == {} and k in ("seats", "sev1_seats") else v
        return cls.model_validate(data)


class VoteCode(StrEnum):
    """lua.VOTE"""

    MISSING = "missing"
    ELSEWHERE = "elsewhere"  # seat: the card's channel; pressed on another message (or no card yet)
    DECIDED = "decided"  # seat: the state it was decided to
    EXPIRED = "expired"  # this call expired it
    SELF = "self"
    VOTED = "voted"
    NOROLE = "norole"  # seat: the required seats (json)
    FILLED = "filled"  # seat: the seat, other: who holds its approval
    RECORDED = "recorded"  # seat: the seat, other: the seats still missing (json)
    APPROVED = "approved"  # seat: the seat that decided it
    DENIED = "denied"  # seat: the denier's seat


class Expired(IntEnum):
    """lua.EXPIRE"""

    EXPIRED = 1  # this call expired it
    NOT_DUE = 0  # not pending, or its window is not over yet
    MISSING = -1


class GrantEnded(IntEnum):
    """lua.END_GRANT"""

    ENDED = 1  # this call ended the grant
    NOT_DUE = 0  # not active, or its time is not up yet
    MISSING = -1


class Revoked(StrEnum):
    """lua.REVOKE"""

    REVOKED = "revoked"
    MISSING = "missing"
    NOT_LIVE = "notlive"
    NOT_ALLOWED = "notallowed"


class Closed(StrEnum):
    """lua.CLOSE"""

    EXPIRED = "expired"  # was pending
    ENDED = "ended"  # was an active grant
    NOTHING = ""  # already decided, or a lever past its vote


@dataclass(frozen=True)
class Vote:
    code: VoteCode
    seat: str = ""
    other: str = ""  # filled: who holds the seat's approval; recorded: seats still missing (json)


def ballot_key(inc: str, bid: str) -> str:
    return Keys.approvals(inc, f"ballot:{bid}")


def votes_key(inc: str, bid: str) -> str:
    return Keys.approvals(inc, f"votes:{bid}")


def index_key(inc: str) -> str:
    return Keys.approvals(inc, "ballots")


def _text(v: Any) -> str:
    """A string from Redis (bytes when the client does not decode responses)."""
    return v.decode() if isinstance(v, bytes) else str(v or "")


def _strs(raw: Mapping[Any, Any]) -> dict[str, str]:
    return {_text(k): _text(v) for k, v in raw.items()}


class Ballots:
    def __init__(self, redis: Redis) -> None:
        self.r = redis
        self._create = script(redis, lua.CREATE)
        self._vote = script(redis, lua.VOTE)
        self._expire = script(redis, lua.EXPIRE)
        self._end = script(redis, lua.END_GRANT)
        self._revoke = script(redis, lua.REVOKE)
        self._card = script(redis, lua.SET_CARD, deadline=False)  # records a post made
        self._close = script(redis, lua.CLOSE)

    async def next_grant_id(self) -> str:
        """A new break-glass id, BG-<n> (one global sequence)."""
        (n,) = await write(self.r, ("INCR", Keys.GRANT_SEQ))  # deadlined: bot/store/scripts.py write()
        return f"BG-{n}"

    async def create(self, b: Ballot) -> bool:
        """False: a ballot with this id exists already (nothing was written)."""
        return bool(
            await self._create(keys=[ballot_key(b.incident, b.id), index_key(b.incident)], args=[b.id, *b.encode()])
        )

    async def get(self, inc: str, bid: str) -> Ballot | None:
        raw = await self.r.hgetall(ballot_key(inc, bid))
        return Ballot.decode(_strs(raw)) if raw else None

    async def all(self, inc: str) -> list[Ballot]:
        ids = sorted(_text(i) for i in await self.r.smembers(index_key(inc)))
        async with self.r.pipeline(transaction=False) as p:
            for bid in ids:
                p.hgetall(ballot_key(inc, bid))
            rows = await p.execute()
        return [Ballot.decode(_strs(r)) for r in rows if r]

    async def vote(
        self,
        inc: str,
        bid: str,
        voter: str,
        choice: str,
        now: float,
        pressed_on: tuple[str | None, str | None],
        eligible: list[str] | None = None,
    ) -> Vote:
        """``pressed_on``: the (channel, ts) of the message the button was on; only the ballot's own
        card counts. ``eligible``: the only seats the voter may fill (their eligibility, checked
        just before); None or empty: none (fail closed: a vote nobody checked fills no seat)."""
        channel, ts = pressed_on
        code, a, b = await self._vote(
            keys=[ballot_key(inc, bid), votes_key(inc, bid), Keys.roles(inc), Keys.incident(inc)],
            args=[voter, now, choice, json.dumps(eligible) if eligible is not None else "", channel or "", ts or ""],
        )
        return Vote(VoteCode(_text(code)), _text(a), _text(b))

    async def expire(self, inc: str, bid: str, now: float) -> Expired:
        return Expired(int(await self._expire(keys=[ballot_key(inc, bid)], args=[now])))

    async def end_grant(self, inc: str, bid: str, now: float) -> GrantEnded:
        return GrantEnded(int(await self._end(keys=[ballot_key(inc, bid)], args=[now])))

    async def revoke(self, inc: str, bid: str, actor: str, now: float, revokers: list[str]) -> tuple[Revoked, str]:
        """The code and the state the ballot was in (the state it stays in when not revoked)."""
        code, state = await self._revoke(
            keys=[ballot_key(inc, bid), Keys.roles(inc)], args=[actor, now, json.dumps(revokers)]
        )
        return Revoked(_text(code)), _text(state)

    async def close(self, inc: str, bid: str, now: float, actor: str) -> Closed:
        """At resolve: EXPIRED (was pending), ENDED (was an active grant) or NOTHING."""
        return Closed(_text(await self._close(keys=[ballot_key(inc, bid)], args=[now, actor])))

    async def set_card(self, inc: str, bid: str, channel: str, ts: str) -> None:
        await self._card(keys=[ballot_key(inc, bid)], args=[channel, ts])


def _ballots(svc: Services) -> Ballots:
    return Ballots(svc.redis)


def ballots(svc: Services) -> Ballots:
    """The app's ballot store (one per app: it holds the registered scripts)."""
    return svc.part(_ballots)
