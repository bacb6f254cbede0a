"""The hash-chained audit log (README: "Audit log").

Each entry carries the previous entry's hash; ``hash`` is the SHA-256 of the
entry's canonical JSON (sorted keys, compact separators, UTF-8) without the
``hash`` field. Redis Lua has no SHA-256, so the hash is computed here and the
append is a compare-and-set on the chain head: the write lands only if nobody
appended since we read the head, otherwise we re-read and try again.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator, Iterable
from typing import Any

import structlog
from pydantic import BaseModel

from bot.clock import Clock, iso
from bot.redact import scrub
from bot.store import Keys, Redis, text

GENESIS_HASH = "0" * 64

_APPEND = """
local head = redis.call('GET', KEYS[1])
local cur = 0
if head then cur = tonumber(string.match(head, '^(%d+)')) end
if cur ~= tonumber(ARGV[1]) then return 0 end
redis.call('RPUSH', KEYS[2], ARGV[3])
redis.call('SET', KEYS[1], ARGV[2])
return 1
"""


class AuditEntry(BaseModel):
    seq: int
    ts: str
    incident: str | None
    actor: str
    action: str
    detail: dict[str, Any]
    request_id: str | None = None
    prev_hash: str
    hash: str


def canonical(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def entry_hash(entry: dict[str, Any]) -> str:
    body = {k: v for k, v in entry.items() if k != "hash"}
    return hashlib.sha256(canonical(body)).hexdigest()


def verify_entries(entries: Iterable[dict[str, Any]], head: tuple[int, str] | None = None) -> int | None:
    """The seq of the first bad entry, or None when the chain is whole.

    ``head`` is the (seq, hash) the appender recorded last. Links alone cannot show
    a removed or re-hashed *last* entry; the head can.
    """
    prev = GENESIS_HASH
    expected_seq = 1
    for e in entries:
        seq = e.get("seq")
        if seq != expected_seq or e.get("prev_hash") != prev or e.get("hash") != entry_hash(e):
            return seq if isinstance(seq, int) else expected_seq
        prev = e["hash"]
        expected_seq += 1
    last = expected_seq - 1
    if head is not None and head != (last, prev):
        # Entries missing at the end, or added/re-hashed past what the appender wrote.
        return min(head[0], last) + 1 if head[0] != last else last
    return None


class AuditLog:
    def __init__(self, redis: Redis, clock: Clock) -> None:
        self._r = redis
        self._clock = clock
        self._append = redis.register_script(_APPEND)
        # Appends from this process take turns, so the compare-and-set below only ever
        # retries against other replicas (not against our own concurrent requests).
        self._turn = asyncio.Lock()
        self._head: str | None = None  # last head we wrote: a guess the compare-and-set checks

    async def append(
        self,
        action: str,
        *,
        actor: str,
        incident: str | None = None,
        detail: dict[str, Any] | None = None,
        request_id: str | None = None,
    ) -> AuditEntry:
        clean = scrub(detail or {})
        if request_id is None:
            # Entries written while serving a request (lever results, votes) join it by id.
            request_id = structlog.contextvars.get_contextvars().get("request_id")
        async with self._turn:
            return await self._append_once(action, actor, incident, clean, request_id)

    async def _append_once(
        self, action: str, actor: str, incident: str | None, clean: dict[str, Any], request_id: str | None
    ) -> AuditEntry:
        while True:
            head = self._head or await self._r.get(Keys.AUDIT_HEAD)
            seq, prev = (0, GENESIS_HASH) if head is None else (int(head.split()[0]), head.split()[1])
            entry: dict[str, Any] = {
                "seq": seq + 1,
                "ts": iso(self._clock.now()),
                "incident": incident,
                "actor": actor,
                "action": action,
                "detail": clean,
                "request_id": request_id,
                "prev_hash": prev,
            }
            entry["hash"] = entry_hash(entry)
            ok = await self._append(
                keys=[Keys.AUDIT_HEAD, Keys.AUDIT_LOG],
                args=[seq, f"{seq + 1} {entry['hash']}", canonical(entry).decode()],
            )
            if ok:
                self._head = f"{seq + 1} {entry['hash']}"
                return AuditEntry.model_validate(entry)
            self._head = None  # another writer moved the head: read it

    async def entries(self, incident: str | None = None, batch: int = 500) -> AsyncIterator[dict[str, Any]]:
        start = 0
        while True:
            chunk = await self._r.lrange(Keys.AUDIT_LOG, start, start + batch - 1)
            if not chunk:
                return
            for raw in chunk:
                try:
                    e = json.loads(raw)
                except json.JSONDecodeError:
                    # A mangled entry still takes its place in the chain so verify can name it.
                    e = {"seq": None, "corrupt": raw}
                if incident is None or e.get("incident") == incident:
                    yield e
            start += batch

    async def count(self) -> int:
        """How many entries the chain holds."""
        return int(await self._r.llen(Keys.AUDIT_LOG))

    async def since(self, start: int) -> list[dict[str, Any]]:
        """The entries after the first ``start`` (0-based), oldest first."""
        return [json.loads(raw) for raw in await self._r.lrange(Keys.AUDIT_LOG, start, -1)]

    async def verify(self) -> int | None:
        raw = text(await self._r.get(Keys.AUDIT_HEAD))
        head = (int(raw.split()[0]), raw.split()[1]) if raw else (0, GENESIS_HASH)
        return verify_entries([e async for e in self.entries()], head)
