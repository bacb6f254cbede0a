"""The postmortem's facts and action items in Redis (the Lua is in lua.py, its result codes below).

What people record for the postmortem (impact start, rework, figures, causes) is one hash per
incident; action items are one hash per incident too, their ids `AI-<n>` from one global counter.
Both carry the incident's hash tag. SEV lowerings live with the incident (bot/incidents keeps its
SEV and their log); ``facts`` reads them from there.

The document (document.py, report.py) reads through ``facts``, ``actions`` and
``resolved_incident_ids`` only.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from enum import IntEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from bot.core.services import Services
from bot.incidents.store import repo
from bot.postmortem import lua
from bot.store import Keys, Redis, script, write

CAUSES = ("detection", "trigger", "root")
Kind = Literal["alert", "runbook", "guardrail", "gameday", "other"]

ACTION_SEQ = "fb:{seq}:action"  # the global counter behind AI-<n>
_SCAN_CHUNK = 500  # incidents read per round trip by resolved_incident_ids


def facts_key(inc_id: str) -> str:
    return f"fb:inc:{{{inc_id}}}:pm:facts"


def actions_key(inc_id: str) -> str:
    return f"fb:inc:{{{inc_id}}}:pm:actions"


def reminded_key(inc_id: str, item: str, round_: int) -> str:
    """The dedupe mark of one reminder round of one item (bot.comms.system.Once)."""
    return f"fb:inc:{{{inc_id}}}:pm:reminded:{item}:{round_}"


# Models ---------------------------------------------------------------------------------------


class ImpactOverride(BaseModel):
    """`postmortem impact <time> <evidence>`: the impact start a person found, and why."""

    at: float
    evidence: str
    by: str
    set_at: float


class Cause(BaseModel):
    """`cause detection|trigger|root <text>`. ``text`` is as typed (a root's `class: <name>` prefix
    included); ``root_class`` is that name, for `cause root` only (None: no class given)."""

    text: str
    by: str
    at: float
    root_class: str | None = None


class SevChange(BaseModel):
    """One `postmortem sev`: SEV ``from_`` (JSON "from") down to ``to``."""

    model_config = ConfigDict(populate_by_name=True)

    from_: int = Field(alias="from")
    to: int
    reason: str
    by: str
    at: float


class PostmortemFacts(BaseModel):
    incident: str
    impact_override: ImpactOverride | None = None
    rework_hours: float | None = None
    requests_failed: int | None = None
    tokens_refunded: int | None = None
    causes: dict[str, Cause] = Field(default_factory=dict)  # keys: "detection" | "trigger" | "root"
    sev_lowered: list[SevChange] = Field(default_factory=list)


class ActionItem(BaseModel):
    id: str  # AI-<n>
    incident: str
    text: str
    owner: str  # Slack user id
    due: str  # YYYY-MM-DD
    verify: str
    kind: Kind = "other"
    state: Literal["open", "done"] = "open"
    created_by: str
    created_at: float
    evidence: str | None = None
    done_by: str | None = None
    done_at: float | None = None
    reminded: list[float] = Field(default_factory=list)

    @property
    def number(self) -> int:
        return int(self.id.split("-", 1)[1])


class _Closing(BaseModel):
    evidence: str
    by: str
    at: float


# Result codes ---------------------------------------------------------------------------------


class FactsSet(IntEnum):
    """lua.FACTS_SET"""

    SET = 1
    MISSING = -3


class ActionAdded(IntEnum):
    """lua.ACTION_ADD"""

    ADDED = 1
    EXISTS = 0
    MISSING = -3


class ActionDone(IntEnum):
    """lua.ACTION_DONE"""

    DONE = 1
    ALREADY = 0
    MISSING = -3


@dataclass(frozen=True)
class Closed:
    code: ActionDone
    item: ActionItem | None  # as it is now (None: no such item)


# The store ------------------------------------------------------------------------------------

_ITEM_FIELDS = ("id", "incident", "text", "owner", "due", "verify", "kind", "created_by", "created_at")


def _items(raw: dict[str, str]) -> list[ActionItem]:
    out = []
    for field, value in raw.items():
        if "|" in field:
            continue
        data = json.loads(value)
        done = raw.get(f"{field}|done")
        if done:
            c = _Closing.model_validate_json(done)
            data.update(state="done", evidence=c.evidence, done_by=c.by, done_at=c.at)
        reminded = raw.get(f"{field}|reminded")
        data["reminded"] = [float(t) for t in reminded.split()] if reminded else []
        out.append(ActionItem.model_validate(data))
    return sorted(out, key=lambda a: a.number)


class PostmortemStore:
    def __init__(self, redis: Redis) -> None:
        self.r = redis
        self._facts_set = script(redis, lua.FACTS_SET)
        self._action_add = script(redis, lua.ACTION_ADD)
        self._action_done = script(redis, lua.ACTION_DONE)
        self._action_reminded = script(redis, lua.ACTION_REMINDED, deadline=False)  # the post landed

    # Facts ------------------------------------------------------------------------------------

    async def set_facts(self, inc_id: str, fields: dict[str, str]) -> tuple[FactsSet, dict[str, str | None]]:
        """Overwrite the given fields (a value "" deletes one) atomically; their previous values."""
        names = list(fields)
        got = await self._facts_set(
            keys=[Keys.incident(inc_id), facts_key(inc_id)], args=[x for n in names for x in (n, fields[n])]
        )
        code = FactsSet(int(got[0]))
        before = {n: (str(v) or None) for n, v in zip(names, got[1:], strict=False)}
        return code, before

    async def raw_facts(self, inc_id: str) -> dict[str, str]:
        return {str(k): str(v) for k, v in (await self.r.hgetall(facts_key(inc_id))).items()}

    # Action items -----------------------------------------------------------------------------

    async def next_action_id(self) -> str:
        (n,) = await write(self.r, ("INCR", ACTION_SEQ))
        return f"AI-{int(n)}"

    async def add_action(self, item: ActionItem) -> ActionAdded:
        doc = item.model_dump_json(include=set(_ITEM_FIELDS))
        code = await self._action_add(
            keys=[Keys.incident(item.incident), actions_key(item.incident)], args=[item.id, doc]
        )
        return ActionAdded(int(code))

    async def actions(self, inc_id: str) -> list[ActionItem]:
        raw = await self.r.hgetall(actions_key(inc_id))
        return _items({str(k): str(v) for k, v in raw.items()})

    async def action(self, inc_id: str, item_id: str) -> ActionItem | None:
        vals = await self.r.hmget(actions_key(inc_id), [item_id, f"{item_id}|done", f"{item_id}|reminded"])
        if not vals[0]:
            return None
        raw = {item_id: str(vals[0])}
        if vals[1]:
            raw[f"{item_id}|done"] = str(vals[1])
        if vals[2]:
            raw[f"{item_id}|reminded"] = str(vals[2])
        return _items(raw)[0]

    async def close_action(self, inc_id: str, item_id: str, evidence: str, by: str, now: float) -> Closed:
        closing = _Closing(evidence=evidence, by=by, at=now).model_dump_json()
        code, _ = await self._action_done(keys=[actions_key(inc_id)], args=[item_id, closing])
        return Closed(ActionDone(int(code)), await self.action(inc_id, item_id))

    async def reminded(self, inc_id: str, item_id: str, at: float) -> None:
        await self._action_reminded(keys=[actions_key(inc_id)], args=[item_id, repr(at)])


def _make(svc: Services) -> PostmortemStore:
    return PostmortemStore(svc.redis)


def store(svc: Services) -> PostmortemStore:
    """The app's postmortem store (its scripts registered once per app)."""
    return svc.part(_make)


# The read API (PM-A's document and report read through these) ------------------------------


async def facts(svc: Services, inc_id: str) -> PostmortemFacts:
    """What people recorded for ``inc_id``'s postmortem (empty fields: nothing recorded)."""
    raw = await store(svc).raw_facts(inc_id)
    f = PostmortemFacts(incident=inc_id)
    if raw.get("impact"):
        f.impact_override = ImpactOverride.model_validate_json(raw["impact"])
    if raw.get("rework_hours"):
        f.rework_hours = float(raw["rework_hours"])
    if raw.get("requests_failed"):
        f.requests_failed = int(raw["requests_failed"])
    if raw.get("tokens_refunded"):
        f.tokens_refunded = int(raw["tokens_refunded"])
    for name in CAUSES:
        if raw.get(f"cause:{name}"):
            f.causes[name] = Cause.model_validate_json(raw[f"cause:{name}"])
    f.sev_lowered = [SevChange.model_validate(d) for d in await repo(svc).sev_lowerings(inc_id)]
    return f


async def actions(svc: Services, inc_id: str) -> list[ActionItem]:
    """``inc_id``'s action items, by number."""
    return await store(svc).actions(inc_id)


async def _every_incident(r: Redis) -> AsyncIterator[list[str]]:
    """Every id the incident counter handed out, in chunks (no index to drift from the incidents)."""
    top = int(await r.get(Keys.INCIDENT_SEQ) or 0)
    for start in range(1, top + 1, _SCAN_CHUNK):
        yield [f"INC-{n}" for n in range(start, min(top, start + _SCAN_CHUNK - 1) + 1)]


async def resolved_incident_ids(svc: Services, since: float | None) -> list[str]:
    """The resolved incidents (resolved at or after ``since`` when given), by number.

    Read from the incidents themselves: one pipelined HMGET per chunk of incidents."""
    r = svc.redis
    out: list[str] = []
    async for ids in _every_incident(r):
        async with r.pipeline(transaction=False) as p:
            for inc_id in ids:
                p.hmget(Keys.incident(inc_id), ["status", "resolved_at"])
            rows = await p.execute()
        for inc_id, (status, resolved_at) in zip(ids, rows, strict=True):
            if status != "resolved" or not resolved_at:
                continue
            if since is None or float(resolved_at) >= since:
                out.append(inc_id)
    return out


async def open_actions(svc: Services) -> list[ActionItem]:
    """Every open action item of every incident (the start-up repair of their reminders)."""
    r = svc.redis
    out: list[ActionItem] = []
    async for ids in _every_incident(r):
        async with r.pipeline(transaction=False) as p:
            for inc_id in ids:
                p.hgetall(actions_key(inc_id))
            rows = await p.execute()
        for raw in rows:
            if raw:
                out += [a for a in _items({str(k): str(v) for k, v in raw.items()}) if a.state == "open"]
    return out
