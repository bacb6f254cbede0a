"""Incident persistence in Redis. Transitions that matter go through Lua."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from bot.incidents import scripts
from bot.incidents.models import HandoffRecord, Incident, RoleHolder, Status, Tenure
from bot.policy.models import CadencePolicy
from bot.store import Keys, Redis

_JSON_FIELDS = ("cells", "products", "regions")
_FLOAT_FIELDS = (
    "declared_at", "detected_at", "mitigated_at", "resolved_at", "last_update_at", "next_update_due",
)


def _encode(inc: Incident) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in inc.model_dump(exclude={"roles"}).items():
        if v is None:
            continue
        if k in _JSON_FIELDS:
            out[k] = json.dumps(v)
        elif isinstance(v, Status):
            out[k] = v.value
        else:
            out[k] = str(v)
    return out


def _decode(raw: dict[str, str], roles: dict[str, str]) -> Incident:
    data: dict[str, Any] = dict(raw)
    for k in _JSON_FIELDS:
        if k in data:
            data[k] = json.loads(data[k])
    for k in _FLOAT_FIELDS:
        if data.get(k) in (None, ""):
            data.pop(k, None)
    data["roles"] = {r: RoleHolder.model_validate_json(v) for r, v in roles.items()}
    return Incident.model_validate(data)


@dataclass(frozen=True)
class Change:
    code: int
    before: Any
    detail: Any = None


class IncidentRepo:
    def __init__(self, redis: Redis) -> None:
        self.r = redis
        self._sev = redis.register_script(scripts.SEV_RAISE)
        self._status = redis.register_script(scripts.STATUS_SET)
        self._role = redis.register_script(scripts.ROLE_SET)
        self._update = redis.register_script(scripts.UPDATE_RECORD)
        self._accept = redis.register_script(scripts.HANDOFF_ACCEPT)
        self._fail_handoff = redis.register_script(scripts.HANDOFF_FAIL)
        self._handoff_posted = redis.register_script(scripts.HANDOFF_POSTED)

    async def next_number(self) -> int:
        return int(await self.r.incr(Keys.INCIDENT_SEQ))

    async def create(self, inc: Incident) -> None:
        async with self.r.pipeline(transaction=True) as p:
            p.hset(Keys.incident(inc.id), mapping=_encode(inc))
            for role, h in inc.roles.items():
                p.hset(Keys.roles(inc.id), role, h.model_dump_json())
                p.rpush(
                    Keys.tenure(inc.id),
                    json.dumps({"role": role, "user": h.user, "event": "assumed", "at": h.since, "by": h.by}),
                )
            await p.execute()
        # The index lives in its own slot; written after the incident exists.
        await self.r.sadd(Keys.INCIDENTS_OPEN, inc.id)

    async def bind_channel(self, inc_id: str, channel_id: str) -> None:
        await self.r.hset(Keys.incident(inc_id), "channel_id", channel_id)
        await self.r.set(Keys.channel(channel_id), inc_id)

    async def set_field(self, inc_id: str, **fields: str) -> None:
        await self.r.hset(Keys.incident(inc_id), mapping=fields)

    async def by_channel(self, channel_id: str) -> str | None:
        return await self.r.get(Keys.channel(channel_id))

    async def get(self, inc_id: str) -> Incident | None:
        async with self.r.pipeline(transaction=False) as p:
            p.hgetall(Keys.incident(inc_id))
            p.hgetall(Keys.roles(inc_id))
            raw, roles = await p.execute()
        return _decode(raw, roles) if raw else None

    async def open_ids(self) -> list[str]:
        return sorted(await self.r.smembers(Keys.INCIDENTS_OPEN), key=lambda s: int(s.split("-")[1]))

    async def raise_sev(
        self, inc_id: str, sev: int, reason: str, cadence: CadencePolicy | None, now: float
    ) -> Change:
        """Raise the SEV; while active, the next update due moves in Lua from the stored state
        (``cadence`` None: the due is left alone)."""
        sevs = (1, 2, 3, 4)
        first = [cadence.first_update_minutes.get(s, cadence.interval_minutes[s]) * 60 if cadence else ""
                 for s in sevs]
        every = [cadence.interval_minutes[s] * 60 if cadence else "" for s in sevs]
        code, before = await self._sev(keys=[Keys.incident(inc_id)], args=[sev, reason, repr(now), *first, *every])
        return Change(int(code), int(before))

    async def set_status(self, inc: Incident, status: Status, now: float) -> Change:
        code, before = await self._status(keys=[Keys.incident(inc.id)], args=[status.value, now])
        if int(code) == 1 and status is Status.resolved:
            await self.r.srem(Keys.INCIDENTS_OPEN, inc.id)
        return Change(int(code), before)

    async def set_role(self, inc_id: str, role: str, user: str, by: str, now: float) -> bool:
        return bool(await self._role(keys=[Keys.roles(inc_id), Keys.tenure(inc_id)], args=[role, user, by, now]))

    async def tenure(self, inc_id: str) -> list[Tenure]:
        """Fold the assumed/renounced events into one record per stint."""
        out: list[Tenure] = []
        for raw in await self.r.lrange(Keys.tenure(inc_id), 0, -1):
            ev = json.loads(raw)
            if ev["event"] == "assumed":
                out.append(Tenure(role=ev["role"], user=ev["user"], assumed_at=ev["at"], assumed_by=ev["by"]))
            else:
                for t in reversed(out):
                    if t.role == ev["role"] and t.user == ev["user"] and t.renounced_at is None:
                        t.renounced_at, t.renounced_by = ev["at"], ev["by"]
                        break
        return out

    async def record_update(self, inc_id: str, text: str, now: float, intervals: dict[int, float]) -> Change:
        code, due = await self._update(
            keys=[Keys.incident(inc_id)],
            args=[now, text, *(intervals[s] * 60 for s in (1, 2, 3, 4))],
        )
        return Change(int(code), float(due) if due else None)

    # Handoffs -----------------------------------------------------------------

    async def create_handoff(self, h: HandoffRecord) -> HandoffRecord:
        n = await self.r.incr(Keys.handoff_seq(h.incident))
        h = h.model_copy(update={"id": f"HO-{n}"})
        await self.r.hset(Keys.handoff(h.incident, h.id), "doc", h.model_dump_json())
        return h

    async def handoffs(self, inc_id: str) -> list[HandoffRecord]:
        n = int(await self.r.get(Keys.handoff_seq(inc_id)) or 0)
        raws = [await self.r.hget(Keys.handoff(inc_id, f"HO-{i}"), "doc") for i in range(1, n + 1)]
        return [HandoffRecord.model_validate_json(r) for r in raws if r]

    async def pending_handoff(self, inc_id: str, role: str, to_user: str) -> HandoffRecord | None:
        """A handoff of ``role`` to ``to_user`` still waiting for Accept (a repeat would only confuse)."""
        return next((h for h in await self.handoffs(inc_id)
                     if h.status == "pending" and h.role == role and h.to_user == to_user), None)

    async def set_handoff_message(self, inc_id: str, hid: str, ts: str) -> str:
        """Record the posted message's ts; returns the handoff's status now (an Accept may have
        landed while the message was being posted)."""
        return str(await self._handoff_posted(keys=[Keys.handoff(inc_id, hid)], args=[ts]))

    async def get_handoff(self, inc_id: str, hid: str) -> HandoffRecord | None:
        raw = await self.r.hget(Keys.handoff(inc_id, hid), "doc")
        return HandoffRecord.model_validate_json(raw) if raw else None

    async def accept_handoff(self, inc_id: str, hid: str, clicker: str, now: float) -> Change:
        code, role, detail = await self._accept(
            keys=[Keys.handoff(inc_id, hid), Keys.roles(inc_id), Keys.tenure(inc_id), Keys.incident(inc_id)],
            args=[clicker, now],
        )
        return Change(int(code), role, detail)

    async def fail_handoff(self, inc_id: str, hid: str) -> bool:
        return bool(await self._fail_handoff(keys=[Keys.handoff(inc_id, hid)]))
