"""The executor's open intents in Redis: what each request set out to do, written before its
handler runs (bot/core/dispatch.py), read and closed by the repair (bot/core/intents.py).

They live in one hash, ``Keys.AUDIT_INTENTS``, in the audit log's slot: the request's audit entry
closes its intent in the append's own script (bot/audit/chain.py), so a crash leaves the intent or
the entry, never neither. This store is everything else about them.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from bot.audit import AuditEntry, AuditLog
from bot.core.services import Services
from bot.redact import scrub
from bot.store import Keys, Redis, script, write

# Record what an open intent's request has made so far (e.g. the channel a declare created), only
# while the intent is open. KEYS[1] open intents. ARGV: request id, notes JSON. -> 1 noted, 0 not open.
_NOTE = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], ARGV[1] .. '|notes', ARGV[2])
return 1
"""


class Intent(BaseModel):
    """What a request set out to do, recorded before its handler ran. Its audit entry closes it; one
    still open long after ``started_at`` is orphaned (the process died, or lost its store, before
    the entry) and is repaired into an `interrupted` entry."""

    request_id: str
    command: str  # the command name: the entry is `command.<name>`
    args: dict[str, Any]  # as the audit holds them (scrubbed)
    actor: str
    source: str
    incident: str | None
    started_at: float
    notes: dict[str, Any] = {}  # what the request has made so far (note)


class IntentStore:
    def __init__(self, redis: Redis, audit: AuditLog) -> None:
        self._r = redis
        self._audit = audit
        self._note = script(redis, _NOTE, deadline=False)  # records what already happened

    @classmethod
    def of(cls, svc: Services) -> IntentStore:
        return cls(svc.redis, svc.audit)

    async def open(
        self,
        request_id: str,
        *,
        command: str,
        args: dict[str, Any],
        actor: str,
        source: str,
        incident: str | None,
        started_at: float,
    ) -> None:
        """Record what ``request_id`` is about to do. A deadlined write: one that reaches Redis
        after its caller gave up is refused, so no intent outlives a request that never ran."""
        doc = Intent(
            request_id=request_id,
            command=command,
            args=scrub(args),
            actor=actor,
            source=source,
            incident=incident,
            started_at=started_at,
        )
        await write(self._r, ("HSET", Keys.AUDIT_INTENTS, request_id, doc.model_dump_json(exclude={"notes"})))

    async def note(self, request_id: str, **notes: Any) -> bool:
        """Add to what the open intent of ``request_id`` has made so far (False: not open)."""
        raw = await self._r.hget(Keys.AUDIT_INTENTS, f"{request_id}|notes")
        merged = {**(json.loads(raw) if raw else {}), **scrub(notes)}
        return bool(await self._note(keys=[Keys.AUDIT_INTENTS], args=[request_id, json.dumps(merged)]))

    async def open_ones(self) -> list[Intent]:
        """Every open intent, oldest first (in-flight requests, and orphans awaiting repair)."""
        raw = await self._r.hgetall(Keys.AUDIT_INTENTS)
        docs = {str(k): str(v) for k, v in raw.items()}
        out = []
        for field, value in docs.items():
            if "|" in field:
                continue
            notes = docs.get(f"{field}|notes")
            out.append(
                Intent.model_validate_json(value).model_copy(update={"notes": json.loads(notes) if notes else {}})
            )
        return sorted(out, key=lambda i: i.started_at)

    async def close(self, intent: Intent, *, incident: str | None, detail: dict[str, Any]) -> AuditEntry | None:
        """The repair: the orphaned intent becomes its request's entry, `command.<name>`, in one
        script, and only while it is still open (None: closed meanwhile, nothing written)."""
        return await self._audit.append_if_open(
            f"command.{intent.command}",
            actor=intent.actor,
            incident=incident,
            detail=detail,
            request_id=intent.request_id,
        )


def store(svc: Services) -> IntentStore:
    """The app's intent store."""
    return svc.part(IntentStore.of)
