"""The hash-chained audit log (docs/security-model.md: "Audit log").

Each entry carries the previous entry's hash; ``hash`` is the SHA-256 of the
entry's canonical JSON (sorted keys, compact separators, UTF-8) without the
``hash`` field. Redis Lua has no SHA-256, so the hash is computed here and the
append is a compare-and-set on the chain head: the write lands only if nobody
appended since we read the head, otherwise we re-read and try again.

The same script appends the entry's seq to its incident's index, so `export
--incident` reads only that incident's entries, and `verify` streams the log
page by page: neither grows with the length of the history.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator, Iterable
from typing import Any

import structlog
from pydantic import BaseModel
from redis.exceptions import WatchError

from bot.clock import Clock, iso
from bot.redact import scrub
from bot.store import Keys, Redis, script, text, write

GENESIS_HASH = "0" * 64

# One script, so the entry, the head and the incident index move together. All keys share
# the {audit} hash tag: the script stays single-slot on Redis Cluster.
#   KEYS[1] chain head "<seq> <hash>"      ARGV[1] the head seq the caller read (compare-and-set)
#   KEYS[2] the log (canonical JSON)       ARGV[2] the new head "<seq> <hash>"
#   KEYS[3] indexed-after marker           ARGV[3] the entry's canonical JSON
#   KEYS[4] open intents (hash)            ARGV[4] the request whose intent this entry closes, or ''
#   KEYS[5] the incident's index (list of seqs); passed only when the entry has an incident
#                                          ARGV[5] '1': append only while that intent is open (a repair)
# Returns 1 when appended, 0 when another writer moved the head (re-read it and retry), -1 when a
# repair found its intent already closed (nothing written).
_APPEND = """
local head = redis.call('GET', KEYS[1])
local cur = 0
if head then cur = tonumber(string.match(head, '^(%d+)')) end
if cur ~= tonumber(ARGV[1]) then return 0 end
-- [intent] A repair writes only while the intent is open: the request's own entry (or another
-- replica's repair) may have closed it since the repair read it.
if ARGV[5] == '1' and redis.call('HEXISTS', KEYS[4], ARGV[4]) == 0 then return -1 end
redis.call('RPUSH', KEYS[2], ARGV[3])
redis.call('SET', KEYS[1], ARGV[2])
-- The first indexing append records where the index starts; older entries wait for `audit reindex`.
redis.call('SET', KEYS[3], string.format('%d', cur), 'NX')
if KEYS[5] then redis.call('RPUSH', KEYS[5], string.format('%d', cur + 1)) end
-- [intent] The entry closes its request's intent in this same script, so a crash leaves the
-- intent or the entry, never neither (bot/core/dispatch.py writes the intent first).
if ARGV[4] ~= '' then redis.call('HDEL', KEYS[4], ARGV[4], ARGV[4] .. '|notes') end
return 1
"""

# [intent] Record what an open intent's request has made so far (e.g. the channel a declare
# created), only while the intent is open. KEYS[1] open intents. ARGV: request id, notes JSON.
_NOTE = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], ARGV[1] .. '|notes', ARGV[2])
return 1
"""


class Intent(BaseModel):
    """[intent] What a request set out to do, recorded before its handler ran (bot/core/dispatch.py).
    Its audit entry closes it; one still open long after ``started_at`` is orphaned (the process
    died, or lost its store, before the entry) and is repaired into an `interrupted` entry."""

    request_id: str
    command: str  # the command name: the entry is `command.<name>`
    args: dict[str, Any]  # as the audit holds them (scrubbed)
    actor: str
    source: str
    incident: str | None
    started_at: float
    notes: dict[str, Any] = {}  # what the request has made so far (note_intent)


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


class ChainChecker:
    """Checks a chain one entry at a time in constant memory: it keeps only the last
    good hash and seq, so a chain of any length can be streamed through it."""

    def __init__(self) -> None:
        self.prev = GENESIS_HASH
        self.last = 0  # seq of the last good entry

    def feed(self, e: dict[str, Any]) -> int | None:
        """The seq to report if ``e`` breaks the chain, else None."""
        expected_seq = self.last + 1
        seq = e.get("seq")
        if seq != expected_seq or e.get("prev_hash") != self.prev or e.get("hash") != entry_hash(e):
            return seq if isinstance(seq, int) else expected_seq
        self.prev = e["hash"]
        self.last = expected_seq
        return None

    def finish(self, head: tuple[int, str] | None) -> int | None:
        """After the last entry: does the chain end where the appender says it does?"""
        last = self.last
        if head is not None and head != (last, self.prev):
            # Entries missing at the end, or added/re-hashed past what the appender wrote.
            return min(head[0], last) + 1 if head[0] != last else last
        return None


def verify_entries(entries: Iterable[dict[str, Any]], head: tuple[int, str] | None = None) -> int | None:
    """The seq of the first bad entry, or None when the chain is whole.

    ``head`` is the (seq, hash) the appender recorded last. Links alone cannot show
    a removed or re-hashed *last* entry; the head can.
    """
    checker = ChainChecker()
    for e in entries:
        bad = checker.feed(e)
        if bad is not None:
            return bad
    return checker.finish(head)


class AuditIndexError(Exception):
    """The per-incident index points at an entry that is not the one it recorded: the log
    was edited, trimmed or reordered (`firebreak audit verify` names where)."""

    def __init__(self, seq: int) -> None:
        super().__init__(f"the log entry at seq {seq} is not the one the incident index recorded")
        self.seq = seq


def _parse(raw: str | bytes) -> dict[str, Any]:
    try:
        e = json.loads(raw)
    except json.JSONDecodeError:
        e = None
    if not isinstance(e, dict):
        # A mangled entry still takes its place in the chain so verify can name it.
        return {"seq": None, "corrupt": raw}
    return e


def _head(raw: str | None) -> tuple[int, str]:
    if not raw:
        return (0, GENESIS_HASH)
    seq, digest = raw.split()[:2]
    return (int(seq), digest)


class AuditLog:
    def __init__(self, redis: Redis, clock: Clock) -> None:
        self.redis = redis
        self._r = redis
        self._clock = clock
        self._append = script(redis, _APPEND, deadline=False)  # see bot/store/scripts.py script()
        self._note = script(redis, _NOTE, deadline=False)  # [intent] records what already happened
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
        intent: str | None = None,
    ) -> AuditEntry:
        """Append an entry; ``intent``: the request whose open intent it closes, in the same script."""
        clean = scrub(detail or {})
        if request_id is None:
            # Entries written while serving a request (lever results, votes) join it by id.
            request_id = structlog.contextvars.get_contextvars().get("request_id")
        async with self._turn:
            entry = await self._append_once(action, actor, incident, clean, request_id, intent, False)
        assert entry is not None  # only a repair's append (close_intent) can find its intent closed
        return entry

    async def _append_once(
        self,
        action: str,
        actor: str,
        incident: str | None,
        clean: dict[str, Any],
        request_id: str | None,
        intent: str | None = None,
        only_open: bool = False,
    ) -> AuditEntry | None:
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
            keys = [Keys.AUDIT_HEAD, Keys.AUDIT_LOG, Keys.AUDIT_INDEXED_AFTER, Keys.AUDIT_INTENTS]
            if incident is not None:
                keys.append(Keys.audit_incident(incident))
            ok = await self._append(
                keys=keys,
                args=[
                    seq,
                    f"{seq + 1} {entry['hash']}",
                    canonical(entry).decode(),
                    intent or "",
                    "1" if only_open else "",
                ],
            )
            if ok == -1:  # [intent] a repair whose intent was closed meanwhile: nothing written
                return None
            if ok:
                self._head = f"{seq + 1} {entry['hash']}"
                return AuditEntry.model_validate(entry)
            self._head = None  # another writer moved the head: read it

    async def entries(self, incident: str | None = None, batch: int = 500) -> AsyncIterator[dict[str, Any]]:
        """Entries oldest first, streamed in pages; one incident's come from its index."""
        if incident is not None:
            async for e in self._incident_entries(incident, batch):
                yield e
            return
        async for e in self._scan(None, batch):
            yield e

    async def _scan(self, incident: str | None, batch: int, stop: int | None = None) -> AsyncIterator[dict[str, Any]]:
        """The log's first ``stop`` entries (all when None), filtered to ``incident`` when set."""
        start = 0
        while stop is None or start < stop:
            end = start + batch - 1 if stop is None else min(start + batch, stop) - 1
            chunk = await self._r.lrange(Keys.AUDIT_LOG, start, end)
            if not chunk:
                return
            for raw in chunk:
                e = _parse(raw)
                if incident is None or e.get("incident") == incident:
                    yield e
            start += len(chunk)

    async def unindexed(self) -> int:
        """How many of the oldest entries predate the per-incident index (0 after `audit reindex`)."""
        async with self._r.pipeline(transaction=True) as p:
            p.get(Keys.AUDIT_INDEXED_AFTER)
            p.llen(Keys.AUDIT_LOG)
            marker, length = await p.execute()
        # No marker: no append has run since the index existed, so every entry so far predates it.
        return int(marker) if marker is not None else int(length)

    async def _incident_entries(self, incident: str, batch: int) -> AsyncIterator[dict[str, Any]]:
        unindexed = await self.unindexed()
        # Entries older than the index (a log written before it existed) need a scan, but only of them.
        async for e in self._scan(incident, batch, stop=unindexed):
            yield e
        index = Keys.audit_incident(incident)
        last, pos = unindexed, 0
        while True:
            page = await self._r.lrange(index, pos, pos + batch - 1)
            if not page:
                return
            pos += len(page)
            # A concurrent reindex prepends older seqs and shifts the pages: skip what we have.
            seqs = [s for s in map(int, page) if s > last]
            async with self._r.pipeline(transaction=False) as p:  # one round trip per page
                for s in seqs:
                    p.lindex(Keys.AUDIT_LOG, s - 1)  # seqs run from 1 without gaps
                raws = await p.execute()
            for s, raw in zip(seqs, raws, strict=True):
                e = _parse(raw) if raw is not None else {}
                if e.get("seq") != s or e.get("incident") != incident:
                    raise AuditIndexError(s)
                yield e
                last = s

    async def reindex(self, batch: int = 1000) -> int:
        """Index the entries written before the per-incident index existed; returns how many
        it read. It walks from the newest unindexed entry back to the first and lowers the
        marker in the same transaction as each page's index writes, so a crash or a second
        operator resumes where it stopped instead of indexing twice. Appends go on meanwhile:
        they index their own entries."""
        await self._r.set(Keys.AUDIT_INDEXED_AFTER, await self.unindexed(), nx=True)
        read = 0
        while True:
            hi = int(await self._r.get(Keys.AUDIT_INDEXED_AFTER) or 0)
            if hi == 0:
                return read
            lo = max(0, hi - batch)
            chunk = await self._r.lrange(Keys.AUDIT_LOG, lo, hi - 1)
            newest_first: dict[str, list[int]] = {}
            for pos in range(len(chunk) - 1, -1, -1):
                e = _parse(chunk[pos])
                if e.get("seq") != lo + pos + 1:
                    raise AuditIndexError(lo + pos + 1)  # seqs must equal positions for the index to hold
                if isinstance(e.get("incident"), str):
                    newest_first.setdefault(e["incident"], []).append(lo + pos + 1)
            async with self._r.pipeline(transaction=True) as p:
                await p.watch(Keys.AUDIT_INDEXED_AFTER)
                if int(await p.get(Keys.AUDIT_INDEXED_AFTER) or 0) != hi:
                    continue  # another reindex took this page
                p.multi()  # type: ignore[no-untyped-call]  # redis-py leaves multi() unannotated
                for inc, seqs in newest_first.items():
                    p.lpush(Keys.audit_incident(inc), *seqs)  # LPUSH of newest-first leaves them oldest-first
                p.set(Keys.AUDIT_INDEXED_AFTER, lo)
                try:
                    await p.execute()
                except WatchError:
                    continue
            read += len(chunk)

    # [intent] Write intent first (bot/core/dispatch.py) ------------------------------------------

    async def open_intent(
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

    async def note_intent(self, request_id: str, **notes: Any) -> bool:
        """Add to what the open intent of ``request_id`` has made so far (False: not open)."""
        raw = await self._r.hget(Keys.AUDIT_INTENTS, f"{request_id}|notes")
        merged = {**(json.loads(raw) if raw else {}), **scrub(notes)}
        return bool(await self._note(keys=[Keys.AUDIT_INTENTS], args=[request_id, json.dumps(merged)]))

    async def intents(self) -> list[Intent]:
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

    async def close_intent(self, intent: Intent, *, incident: str | None, detail: dict[str, Any]) -> AuditEntry | None:
        """The repair: the orphaned intent becomes its request's entry, `command.<name>`, in one
        script, and only while it is still open (None: closed meanwhile, nothing written)."""
        async with self._turn:
            return await self._append_once(
                f"command.{intent.command}",
                intent.actor,
                incident,
                scrub(detail),
                intent.request_id,
                intent.request_id,
                True,
            )

    async def count(self) -> int:
        """How many entries the chain holds."""
        return int(await self._r.llen(Keys.AUDIT_LOG))

    async def since(self, start: int) -> list[dict[str, Any]]:
        """The entries after the first ``start`` (0-based), oldest first."""
        return [json.loads(raw) for raw in await self._r.lrange(Keys.AUDIT_LOG, start, -1)]

    async def verify(self, batch: int = 1000) -> int | None:
        """The seq of the first bad entry, or None. Streams the log page by page through a
        ChainChecker, so memory stays flat however long the chain is."""
        checker = ChainChecker()
        start = 0
        while True:
            # The page and the head in one transaction: when the page is the last one, the head
            # is the one its last entry must match, even while other replicas keep appending.
            async with self._r.pipeline(transaction=True) as p:
                p.lrange(Keys.AUDIT_LOG, start, start + batch - 1)
                p.get(Keys.AUDIT_HEAD)
                chunk, raw_head = await p.execute()
            for raw in chunk:
                bad = checker.feed(_parse(raw))
                if bad is not None:
                    return bad
            start += len(chunk)
            if len(chunk) < batch:
                return checker.finish(_head(text(raw_head)))
