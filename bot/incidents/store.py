"""Incident persistence in Redis. Transitions that matter go through Lua (lua.py), whose
result codes are the enums below."""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Generic, TypeVar

from redis.typing import EncodableT, FieldT

from bot.core.services import Services
from bot.incidents import lua
from bot.incidents.models import HandoffRecord, Incident, RoleHolder, Status, Tenure
from bot.policy.models import CadencePolicy
from bot.store import Keys, Redis, Write, script, text, write

_JSON_FIELDS = ("cells", "opened_cells", "products", "regions")
_FLOAT_FIELDS = (
    "declared_at",
    "detected_at",
    "mitigated_at",
    "resolved_at",
    "last_update_at",
    "next_update_due",
)


def _encode(inc: Incident) -> dict[FieldT, EncodableT]:
    out: dict[FieldT, EncodableT] = {}
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


class SevRaised(IntEnum):
    """lua.SEV_RAISE"""

    RAISED = 1
    SAME = 0
    LOWER_REFUSED = -1
    RESOLVED = -2
    MISSING = -3


class SevLowered(IntEnum):
    """lua.SEV_LOWER"""

    LOWERED = 1
    SAME = 0
    NOT_LOWER = -1
    OPEN = -2
    MISSING = -3


class StatusSet(IntEnum):
    """lua.STATUS_SET"""

    CHANGED = 1
    SAME = 0
    BACKWARDS = -1
    MISSING = -3


class HandoffAccepted(IntEnum):
    """lua.HANDOFF_ACCEPT"""

    ACCEPTED = 1
    NOT_RECEIVER = -1
    NOT_PENDING = -2  # detail: its status
    MISSING = -3
    RESOLVED = -4
    SUPERSEDED = -5  # the role changed hands since it was posted; detail: who holds it now


class ScopeAdded(IntEnum):
    """lua.SCOPE_ADD"""

    ADDED = 1
    ALREADY = 0
    RESOLVED = -2
    MISSING = -3


class SeatTaken(IntEnum):
    """lua.SEAT_TAKE"""

    TAKEN = 1
    HELD = 0  # detail: who holds it


def _sev_lowered_key(inc_id: str) -> str:
    return f"fb:inc:{{{inc_id}}}:sev-lowered"


E = TypeVar("E", bound=IntEnum)


@dataclass(frozen=True)
class Change(Generic[E]):
    code: E
    before: Any
    detail: Any = None


class IncidentRepo:
    def __init__(self, redis: Redis) -> None:
        self.r = redis
        self._sev = script(redis, lua.SEV_RAISE)
        self._sev_lower = script(redis, lua.SEV_LOWER)
        self._status = script(redis, lua.STATUS_SET)
        self._role = script(redis, lua.ROLE_SET)
        self._accept = script(redis, lua.HANDOFF_ACCEPT)
        self._fail_handoff = script(redis, lua.HANDOFF_FAIL)
        self._handoff_posted = script(redis, lua.HANDOFF_POSTED, deadline=False)  # records a post made
        self._seat_take = script(redis, lua.SEAT_TAKE)
        self._scope_add = script(redis, lua.SCOPE_ADD)

    # Writes go through bot.store.write: deadlined, so none lands after its caller gave up.

    async def next_number(self) -> int:
        (n,) = await write(self.r, ("INCR", Keys.INCIDENT_SEQ))
        return int(n)

    async def create(self, inc: Incident) -> None:
        fields = [x for kv in _encode(inc).items() for x in kv]
        writes: list[Write] = [("HSET", Keys.incident(inc.id), *fields)]
        for role, h in inc.roles.items():
            writes.append(("HSET", Keys.roles(inc.id), role, h.model_dump_json()))
            event = {"role": role, "user": h.user, "event": "assumed", "at": h.since, "by": h.by}
            writes.append(("RPUSH", Keys.tenure(inc.id), json.dumps(event)))
        await write(self.r, *writes)
        # The index lives in its own slot; written after the incident exists.
        await write(self.r, ("SADD", Keys.INCIDENTS_OPEN, inc.id))

    async def bind_channel(self, inc_id: str, channel_id: str) -> None:
        await write(self.r, ("HSET", Keys.incident(inc_id), "channel_id", channel_id))
        await write(self.r, ("SET", Keys.channel(channel_id), inc_id))

    async def set_field(self, inc_id: str, **fields: str) -> None:
        await write(self.r, ("HSET", Keys.incident(inc_id), *(x for kv in fields.items() for x in kv)))

    async def by_channel(self, channel_id: str) -> str | None:
        return text(await self.r.get(Keys.channel(channel_id)))

    async def get(self, inc_id: str) -> Incident | None:
        async with self.r.pipeline(transaction=False) as p:
            p.hgetall(Keys.incident(inc_id))
            p.hgetall(Keys.roles(inc_id))
            raw, roles = await p.execute()
        return _decode(raw, roles) if raw else None

    async def open_ids(self) -> list[str]:
        ids = [str(s) for s in await self.r.smembers(Keys.INCIDENTS_OPEN)]
        return sorted(ids, key=lambda s: int(s.split("-")[1]))

    async def which_open(self, ids: list[str]) -> set[str]:
        """Those of ``ids`` that are open (one SMISMEMBER)."""
        if not ids:
            return set()
        flags = await self.r.smismember(Keys.INCIDENTS_OPEN, list(ids))
        return {i for i, is_open in zip(ids, flags, strict=True) if is_open}

    async def open_with_cell(self, cell: str) -> list[Incident]:
        """The open incidents whose scope names ``cell``, oldest first."""
        found = []
        for inc_id in await self.open_ids():
            inc = await self.get(inc_id)
            if inc is not None and inc.is_open and cell in inc.cells:
                found.append(inc)
        return found

    async def raise_sev(
        self, inc_id: str, sev: int, reason: str, cadence: CadencePolicy | None, now: float
    ) -> Change[SevRaised]:
        """Raise the SEV; while active, the next update due moves in Lua from the stored state
        (``cadence`` None: the due is left alone)."""
        sevs = (1, 2, 3, 4)
        first = [cadence.first_update_minutes.get(s, cadence.interval_minutes[s]) * 60 if cadence else "" for s in sevs]
        every = [cadence.interval_minutes[s] * 60 if cadence else "" for s in sevs]
        code, before = await self._sev(keys=[Keys.incident(inc_id)], args=[sev, reason, repr(now), *first, *every])
        return Change(SevRaised(int(code)), int(before))

    async def lower_sev(self, inc_id: str, sev: int, reason: str, by: str, now: float) -> Change[SevLowered]:
        """Lower the SEV of a resolved incident (the postmortem's `postmortem sev`), kept on its log."""
        code, before = await self._sev_lower(
            keys=[Keys.incident(inc_id), _sev_lowered_key(inc_id)], args=[sev, reason, by, repr(now)]
        )
        return Change(SevLowered(int(code)), int(before))

    async def sev_lowerings(self, inc_id: str) -> list[dict[str, Any]]:
        """Every lowering, oldest first: {from, to, reason, by, at}."""
        return [json.loads(raw) for raw in await self.r.lrange(_sev_lowered_key(inc_id), 0, -1)]

    async def set_status(self, inc: Incident, status: Status, now: float) -> Change[StatusSet]:
        code, before = await self._status(keys=[Keys.incident(inc.id)], args=[status.value, now])
        change = Change(StatusSet(int(code)), before)
        if change.code is StatusSet.CHANGED and status is Status.resolved:
            await write(self.r, ("SREM", Keys.INCIDENTS_OPEN, inc.id))
        return change

    async def add_cell(self, inc_id: str, cell: str) -> ScopeAdded:
        """Widen the incident's scope by ``cell`` (atomic; an open incident only)."""
        return ScopeAdded(int(await self._scope_add(keys=[Keys.incident(inc_id)], args=[cell])))

    async def set_role(self, inc_id: str, role: str, user: str, by: str, now: float) -> bool:
        return bool(await self._role(keys=[Keys.roles(inc_id), Keys.tenure(inc_id)], args=[role, user, by, now]))

    async def take_seat(
        self, inc_id: str, role: str, user: str, now: float, from_user: str | None = None
    ) -> Change[SeatTaken]:
        """``user`` takes ``role`` only while ``from_user`` holds it (None: nobody, an empty IC seat);
        else who holds it now (detail; "" when it is empty)."""
        code, holder = await self._seat_take(
            keys=[Keys.roles(inc_id), Keys.tenure(inc_id)], args=[role, user, now, from_user or ""]
        )
        return Change(SeatTaken(int(code)), None, str(holder))

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

    # Handoffs -----------------------------------------------------------------

    async def create_handoff(self, h: HandoffRecord) -> HandoffRecord:
        (n,) = await write(self.r, ("INCR", Keys.handoff_seq(h.incident)))
        h = h.model_copy(update={"id": f"HO-{n}"})
        await write(self.r, ("HSET", Keys.handoff(h.incident, h.id), "doc", h.model_dump_json()))
        return h

    async def handoffs(self, inc_id: str) -> list[HandoffRecord]:
        n = int(await self.r.get(Keys.handoff_seq(inc_id)) or 0)
        async with self.r.pipeline(transaction=False) as p:  # one round trip, however many handoffs
            for i in range(1, n + 1):
                p.hget(Keys.handoff(inc_id, f"HO-{i}"), "doc")
            raws = await p.execute()
        return [HandoffRecord.model_validate_json(r) for r in raws if r]

    async def pending_handoff(self, inc_id: str, role: str, to_user: str) -> HandoffRecord | None:
        """A handoff of ``role`` to ``to_user`` still waiting for Accept (a repeat would only confuse)."""
        return next(
            (
                h
                for h in await self.handoffs(inc_id)
                if h.status == "pending" and h.role == role and h.to_user == to_user
            ),
            None,
        )

    async def set_handoff_message(self, inc_id: str, hid: str, ts: str) -> str:
        """Record the posted message's ts; returns the handoff's status now (an Accept may have
        landed while the message was being posted)."""
        return str(await self._handoff_posted(keys=[Keys.handoff(inc_id, hid)], args=[ts]))

    async def get_handoff(self, inc_id: str, hid: str) -> HandoffRecord | None:
        raw = await self.r.hget(Keys.handoff(inc_id, hid), "doc")
        return HandoffRecord.model_validate_json(raw) if raw else None

    async def accept_handoff(self, inc_id: str, hid: str, clicker: str, now: float) -> Change[HandoffAccepted]:
        code, role, detail = await self._accept(
            keys=[Keys.handoff(inc_id, hid), Keys.roles(inc_id), Keys.tenure(inc_id), Keys.incident(inc_id)],
            args=[clicker, now],
        )
        return Change(HandoffAccepted(int(code)), role, detail)

    async def fail_handoff(self, inc_id: str, hid: str) -> bool:
        return bool(await self._fail_handoff(keys=[Keys.handoff(inc_id, hid)]))


def repo(svc: Services) -> IncidentRepo:
    """The app's incident store: the one the executor looks incidents up in (bot/runtime.py)."""
    found = svc.incidents
    if not isinstance(found, IncidentRepo):
        raise TypeError(f"the app's incident lookup is a {type(found).__name__}, not an IncidentRepo")
    return found
