"""Lever requests (REQ-<n>) in Redis: one hash per request, every state change a Lua compare-and-set.

States: planned (dry-run; terminal), pending_approval, approved, denied,
expired, stale (target changed after approval), executing, done, failed,
undoing, undone. `executing` and `undoing` are in flight: the same script keeps
them in one index, so a restart finds what a dead process left half-way.
"""
from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field

from bot.store import Keys, Redis
from levers.lua import Lua

STATES = ("planned", "pending_approval", "approved", "denied", "expired", "stale",
          "executing", "done", "failed", "undoing", "undone")
OPEN_STATES = ("pending_approval", "approved", "executing", "done", "undoing")
IN_FLIGHT = ("executing", "undoing")

_TRANSITION = Lua("""
local cur = redis.call('HGET', KEYS[1], 'state')
if not cur then return 0 end
local n = tonumber(ARGV[1])
local ok = false
for i = 2, n + 1 do if ARGV[i] == cur then ok = true end end
if not ok then return 0 end
local to = ARGV[n + 2]
redis.call('HSET', KEYS[1], 'state', to)
for i = n + 3, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
local id = string.match(KEYS[1], 'req:(.*)$')
if to == 'executing' or to == 'undoing' then redis.call('SADD', KEYS[2], id) else redis.call('SREM', KEYS[2], id) end
return 1
""")
_IN_FLIGHT_KEY = Keys.levers("in-flight")


class LeverRequest(BaseModel):
    id: str
    incident: str
    lever: str
    target: str
    cell: str  # cell name, or "fleet"
    context: str  # the kube context it acts on
    params: dict[str, Any] = Field(default_factory=dict)
    requester: str
    state: str
    dry_run: bool = False
    plan: dict[str, Any] = Field(default_factory=dict)  # method, path, content_type, body, kubectl, calls, changes
    pre_state: dict[str, Any] = Field(default_factory=dict)
    digest: str = ""
    needs_approval: list[str] = Field(default_factory=list)
    grant_id: str | None = None
    budget_override: bool = False  # a budget breach that the approval covers
    notes: list[str] = Field(default_factory=list)
    created_at: float
    approved_by: str | None = None
    approved_at: float | None = None
    started_at: float | None = None
    finished_at: float | None = None
    undone_by: str | None = None
    undone_at: float | None = None
    result: dict[str, Any] = Field(default_factory=dict)  # ok, message, resource_version, verified, reason

    @property
    def label(self) -> str:
        where = "fleet" if self.cell == "fleet" else self.cell
        return f"{self.id} {self.lever} {self.target} ({where})"


def _encode(fields: dict[str, Any]) -> dict[str, str]:
    return {k: (v if k == "state" else json.dumps(v)) for k, v in fields.items()}


def _decode(raw: dict[str, str]) -> dict[str, Any]:
    return {k: (v if k == "state" else json.loads(v)) for k, v in raw.items()}


async def next_id(r: Redis) -> str:
    return f"REQ-{await r.incr(Keys.REQUEST_SEQ)}"


async def create(r: Redis, rec: LeverRequest) -> None:
    async with r.pipeline(transaction=True) as p:
        p.hset(Keys.levers(f"req:{rec.id}"), mapping=_encode(rec.model_dump()))
        p.zadd(Keys.levers(f"inc:{rec.incident}"), {rec.id: rec.created_at})
        await p.execute()


async def get_request(r: Redis, req_id: str) -> LeverRequest | None:
    raw = await r.hgetall(Keys.levers(f"req:{req_id}"))
    return LeverRequest.model_validate(_decode(raw)) if raw else None


async def _get_many(r: Redis, ids: list[str]) -> list[LeverRequest]:
    """Several records in one round trip (missing ones left out)."""
    if not ids:
        return []
    async with r.pipeline(transaction=False) as p:
        for i in ids:
            p.hgetall(Keys.levers(f"req:{i}"))
        raws = await p.execute()
    return [LeverRequest.model_validate(_decode(raw)) for raw in raws if raw]


async def transition(r: Redis, req_id: str, from_states: set[str], to_state: str, **fields: Any) -> bool:
    """Atomically move req_id to to_state if it is in one of from_states; set fields with it."""
    if to_state not in STATES:
        raise ValueError(f"unknown lever request state {to_state!r}")
    src = sorted(from_states)
    flat: list[str] = []
    for k, v in _encode(fields).items():
        flat += [k, v]
    return bool(await _TRANSITION.on(r)(keys=[Keys.levers(f"req:{req_id}"), _IN_FLIGHT_KEY],
                                        args=[len(src), *src, to_state, *flat]))


async def in_flight(r: Redis) -> list[LeverRequest]:
    """Requests some process was executing or undoing (it may have died since)."""
    out = await _get_many(r, sorted(await r.smembers(_IN_FLIGHT_KEY)))
    return [x for x in out if x.state in IN_FLIGHT]


async def for_incident(r: Redis, incident: str) -> list[LeverRequest]:
    return await _get_many(r, await r.zrange(Keys.levers(f"inc:{incident}"), 0, -1))
