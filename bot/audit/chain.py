"""The hash-chained audit log (docs/security-model.md: "Audit log").

Each entry carries the previous entry's hash; ``hash`` is the SHA-256 of the
entry's canonical JSON (sorted keys, compact separators, UTF-8) without the
``hash`` field. Redis Lua has no SHA-256, so the hash is computed here and the
append is a compare-and-set on the chain head: the write lands only if nobody
appended since we read the head, otherwise we re-read and try again.

Entries live in a Redis hash by seq (Keys.AUDIT_ENTRIES), so any one is a single O(1) read.
The same script appends the entry's seq to its incident's index, so `export --incident`
reads only that incident's entries, each checked against its hash and its place in the
chain, at a cost per line that does not grow with the history. `verify` streams the chain
in pages (the next one in flight while this one is checked) and, for entries stored as the
appender wrote them, hashes the stored bytes instead of re-serialising each entry.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hashlib
import json
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any, Protocol

import orjson
import structlog
from pydantic import BaseModel
from redis.exceptions import WatchError

from bot.clock import Clock, iso
from bot.redact import scrub
from bot.store import Keys, Redis, script, text

GENESIS_HASH = "0" * 64

# One script, so the entry, the head and the incident index move together. All keys share
# the {audit} hash tag: the script stays single-slot on Redis Cluster.
#   KEYS[1] chain head "<seq> <hash>"      ARGV[1] the head seq the caller read (compare-and-set)
#   KEYS[2] the entries (hash seq -> canonical JSON)
#                                          ARGV[2] the new head "<seq> <hash>"
#   KEYS[3] indexed-after marker           ARGV[3] the entry's canonical JSON
#   KEYS[4] open intents (hash)            ARGV[4] the request whose intent this entry closes, or ''
#   KEYS[5] the old list layout            ARGV[5] '1': append only while that intent is open (a repair)
#   KEYS[6] the seq up to which the old list has moved into KEYS[2]
#   KEYS[7] the incident's index (list of seqs); passed only when the entry has an incident
# Returns 1 when appended, 0 when another writer moved the head (re-read it and retry), -1 when a
# repair found its intent already closed (nothing written).
_APPEND = """
local head = redis.call('GET', KEYS[1])
local cur = 0
if head then cur = tonumber(string.match(head, '^(%d+)')) end
-- [upgrade] The old list layout. A long one has not been migrated yet (the migration runs at start,
-- and entries, such as the audit of an earlier migration, may come first): append to it as the
-- older release did, the migration moves it all. A short one is what a replica of the older
-- release, still running while the new one rolls out, pushed after the migration: its entries
-- take their places in the hash first.
local old_len = redis.call('LLEN', KEYS[5])
local legacy = old_len > DRAIN_MAX
if old_len > 0 and not legacy then
  local old = redis.call('LRANGE', KEYS[5], 0, -1)
  local moved = tonumber(redis.call('GET', KEYS[6]) or '0')
  for i, raw in ipairs(old) do redis.call('HSET', KEYS[2], moved + i, raw) end
  redis.call('DEL', KEYS[5])
  redis.call('SET', KEYS[6], moved + #old)
end
if cur ~= tonumber(ARGV[1]) then return 0 end
-- [intent] A repair writes only while the intent is open: the request's own entry (or another
-- replica's repair) may have closed it since the repair read it.
if ARGV[5] == '1' and redis.call('HEXISTS', KEYS[4], ARGV[4]) == 0 then return -1 end
if legacy then
  redis.call('RPUSH', KEYS[5], ARGV[3])
else
  redis.call('HSET', KEYS[2], cur + 1, ARGV[3])
  redis.call('SET', KEYS[6], cur + 1)
end
redis.call('SET', KEYS[1], ARGV[2])
-- The first indexing append records where the index starts; older entries wait for `audit reindex`.
redis.call('SET', KEYS[3], string.format('%d', cur), 'NX')
if KEYS[7] then redis.call('RPUSH', KEYS[7], string.format('%d', cur + 1)) end
-- [intent] The entry closes its request's intent in this same script, so a crash leaves the
-- intent or the entry, never neither (bot/core/dispatch.py writes the intent first).
if ARGV[4] ~= '' then redis.call('HDEL', KEYS[4], ARGV[4], ARGV[4] .. '|notes') end
return 1
"""

DRAIN_MAX = 1000  # an old list this short is moved by the append itself; a longer one waits for the migration
_APPEND = _APPEND.replace("DRAIN_MAX", str(DRAIN_MAX))

PAGE = 2000  # entries per verify page (about 1 MB); the next page is read while this one is checked


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


def hash_ok(e: dict[str, Any], raw: bytes | None = None) -> bool:
    """Is ``e.hash`` the entry_hash of ``e``? ``raw``: the bytes ``e`` was parsed from.

    The fast path, for bytes stored as the appender wrote them: when ``raw`` is exactly the
    canonical JSON of ``e`` (orjson, sorted keys: the same bytes as ``canonical`` except for some
    float spellings, which then take the slow path), the canonical body without ``hash`` is
    ``raw`` with its ``,"hash":"…"`` member cut out, and hashing that needs no re-serialising.
    Anything else (other bytes, a float orjson spells differently) is checked the reference way.
    """
    try:
        return _hash_ok(e, raw)
    except UnicodeEncodeError:  # a lone surrogate no appender could have written: not this entry's hash
        return False


def _hash_ok(e: dict[str, Any], raw: bytes | None) -> bool:
    digest = e.get("hash")
    if raw is not None and isinstance(digest, str) and len(digest) == 64 and digest.isascii():
        member = b',"hash":"' + digest.encode() + b'"'
        body = raw.replace(member, b"", 1)
        try:
            same = orjson.dumps(e, option=orjson.OPT_SORT_KEYS) == raw
        except (TypeError, orjson.JSONEncodeError):  # an int orjson can't hold: the reference way
            same = False
        if same and len(body) == len(raw) - len(member) and hashlib.sha256(body).hexdigest() == digest:
            return True
    return digest == entry_hash(e)


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cycle collector off for one long read in a short-lived process (`firebreak audit
    verify`, `export`): each page is thousands of fresh entry dicts, none in a cycle, and the
    collector's passes over them were 10-25% of verify's time. Memory stays what the pages hold
    (reference counting frees them). Not for the long-running bot."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class ChainChecker:
    """Checks a chain one entry at a time in constant memory: it keeps only the last
    good hash and seq, so a chain of any length can be streamed through it."""

    def __init__(self) -> None:
        self.prev = GENESIS_HASH
        self.last = 0  # seq of the last good entry

    def feed(self, e: dict[str, Any], raw: bytes | None = None) -> int | None:
        """The seq to report if ``e`` breaks the chain, else None (``raw``: its stored bytes)."""
        expected_seq = self.last + 1
        seq = e.get("seq")
        if seq != expected_seq or e.get("prev_hash") != self.prev or not hash_ok(e, raw):
            return seq if isinstance(seq, int) else expected_seq
        self.prev = e["hash"]
        self.last = expected_seq
        return None

    def feed_page(self, entries: list[dict[str, Any]], rows: list[bytes | None], start: int, stop: int) -> int | None:
        """``feed`` over ``entries[start:stop]`` (``rows``: their stored bytes), the first break's
        seq or None. The common case (canonical bytes, linked, hash right) runs in one tight loop
        with what ``hash_ok``'s fast path checks; the first entry it can't pass that way, and any
        after it, go through ``feed``, so the verdicts are ``feed``'s own."""
        prev, expected = self.prev, self.last + 1
        dumps, sort, sha256 = orjson.dumps, orjson.OPT_SORT_KEYS, hashlib.sha256
        i = start
        while i < stop:
            e, raw = entries[i], rows[i]
            digest = e.get("hash")
            if (
                raw is None
                or e.get("seq") != expected
                or e.get("prev_hash") != prev
                or type(digest) is not str
                or not digest.isascii()
            ):
                break
            member = b',"hash":"' + digest.encode() + b'"'
            body = raw.replace(member, b"", 1)
            if len(digest) != 64 or len(body) != len(raw) - len(member) or sha256(body).hexdigest() != digest:
                break
            try:
                if dumps(e, option=sort) != raw:
                    break
            except (TypeError, orjson.JSONEncodeError):
                break
            prev, expected, i = digest, expected + 1, i + 1
        self.prev, self.last = prev, expected - 1
        for j in range(i, stop):
            bad = self.feed(entries[j], rows[j])
            if bad is not None:
                return bad
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
    """An entry `export --incident` was to print is not what the chain holds there: the index
    points at another entry, or the entry does not match its hash or its place in the chain.
    The log was edited (`firebreak audit verify` names where)."""

    def __init__(self, seq: int, why: str = "is not the one the incident index recorded") -> None:
        super().__init__(f"the log entry at seq {seq} {why}")
        self.seq = seq


class OldLayout(Exception):
    """The log is still in the list an older release wrote: `firebreak migrate` moves it."""

    def __init__(self, n: int) -> None:
        super().__init__(
            f"{n} audit entries are still in the list layout of an older release: run `firebreak migrate`"
            " (if it has nothing to migrate, a replica of that release wrote them since: the bot's next"
            " entry moves them)"
        )


def _parse(raw: str | bytes) -> dict[str, Any]:
    try:
        e = orjson.loads(raw)
    except orjson.JSONDecodeError:
        try:  # what orjson refuses and json reads (NaN, very large numbers): parsed as before
            e = json.loads(raw)
        except json.JSONDecodeError:
            e = None
    if not isinstance(e, dict):
        # A mangled entry still takes its place in the chain so verify can name it.
        return {"seq": None, "corrupt": raw}
    return e


_SLICE = 250  # entries checked between two yields to the event loop in verify


def _parse_page(rows: list[bytes | None]) -> list[dict[str, Any]]:
    """A page's entries as `_parse` gives them; one orjson call per row when every row is a JSON
    object (the common case: a function call per entry was a tenth of verify's time)."""
    loads = orjson.loads
    try:
        entries = [loads(raw) if raw is not None else _MISSING for raw in rows]
    except orjson.JSONDecodeError:
        entries = []
    if len(entries) == len(rows) and all(type(e) is dict for e in entries):
        return entries
    return [_parse(raw) if raw is not None else _MISSING for raw in rows]


def _raw(value: str | bytes) -> bytes:
    return value.encode() if isinstance(value, str) else value


_MISSING: dict[str, Any] = {"seq": None, "missing": True}  # no entry stored at that seq


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
        assert entry is not None  # only append_if_open can find its intent closed
        return entry

    async def append_if_open(
        self, action: str, *, actor: str, incident: str | None, detail: dict[str, Any], request_id: str
    ) -> AuditEntry | None:
        """[intent] Append only while ``request_id``'s intent is open, closing it in the same script
        (the repair of an orphaned intent, bot/core/intent_store.py). None: closed meanwhile, nothing
        written."""
        async with self._turn:
            return await self._append_once(action, actor, incident, scrub(detail), request_id, request_id, True)

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
            keys = [
                Keys.AUDIT_HEAD,
                Keys.AUDIT_ENTRIES,
                Keys.AUDIT_INDEXED_AFTER,
                Keys.AUDIT_INTENTS,
                Keys.AUDIT_LOG,
                Keys.AUDIT_LOG_MOVED,
            ]
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

    async def _old_layout(self) -> None:
        """Refuse to read a log an older release wrote as a list: it must be migrated first."""
        if n := int(await self._r.llen(Keys.AUDIT_LOG)):
            raise OldLayout(n)

    async def _rows(self, lo: int, n: int) -> list[str | None]:
        """The stored entries at seqs lo .. lo+n-1 (None where there is none)."""
        if n <= 0:
            return []
        return [text(v) for v in await self._r.hmget(Keys.AUDIT_ENTRIES, list(range(lo, lo + n)))]

    async def entries(self, incident: str | None = None, batch: int = 500) -> AsyncIterator[dict[str, Any]]:
        """Entries oldest first, streamed in pages; one incident's come from its index."""
        await self._old_layout()
        if incident is not None:
            async for e in self._incident_entries(incident, batch):
                yield e
            return
        async for e in self._scan(None, batch):
            yield e

    async def _scan(self, incident: str | None, batch: int, stop: int | None = None) -> AsyncIterator[dict[str, Any]]:
        """The entries at seqs 1..``stop`` (all when None: up to the head and any stored past it),
        filtered to ``incident`` when set."""
        lo = 1
        while stop is None or lo <= stop:
            n = batch if stop is None else min(batch, stop - lo + 1)
            rows = await self._rows(lo, n)
            if stop is None and not any(rows) and lo > _head(text(await self._r.get(Keys.AUDIT_HEAD)))[0]:
                return
            for raw in rows:
                if raw is None:
                    continue
                e = _parse(raw)
                if incident is None or e.get("incident") == incident:
                    yield e
            lo += n

    async def unindexed(self) -> int:
        """How many of the oldest entries predate the per-incident index (0 after `audit reindex`)."""
        async with self._r.pipeline(transaction=True) as p:
            p.get(Keys.AUDIT_INDEXED_AFTER)
            p.hlen(Keys.AUDIT_ENTRIES)
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
            seqs: list[int] = []
            garbage = None
            for item in map(str, page):
                if not item.isdigit():  # the index is in Redis too: whatever is there is checked
                    garbage = item
                    break
                if int(item) > last:  # a concurrent reindex prepends older seqs and shifts the pages
                    seqs.append(int(item))
            # Each entry with the next one, and the head, in one read: per line O(1), whatever the
            # length of the log (a hash read by field, not a list walked to a position).
            async with self._r.pipeline(transaction=True) as p:
                p.hmget(Keys.AUDIT_ENTRIES, [x for s in seqs for x in (s, s + 1)] or [0])
                p.get(Keys.AUDIT_HEAD)
                rows, raw_head = await p.execute()
            head = _head(text(raw_head))
            for i, s in enumerate(seqs):
                if s <= last:
                    continue  # the index lists a seq twice, or out of order: each entry once, in order
                yield self._checked(incident, s, rows[2 * i], rows[2 * i + 1], head)
                last = s
            if garbage is not None:
                raise AuditIndexError(last, f"is followed in {incident}'s index by {garbage[:20]!r}, not a seq")

    @staticmethod
    def _checked(
        incident: str, seq: int, raw: str | None, raw_next: str | None, head: tuple[int, str]
    ) -> dict[str, Any]:
        """The entry at ``seq`` if it is genuinely the chain's and ``incident``'s, else AuditIndexError.

        Genuine here: it is the entry stored at that seq, of that incident, it matches its own hash,
        and the chain links to it (the next entry's prev_hash, or the head, is its hash). A rewrite
        of every entry from it to the head passes these local checks: that is what `audit verify
        --pubkey` (the whole chain against signed checkpoints) is for."""
        e = _parse(raw) if raw is not None else {}
        if e.get("seq") != seq or e.get("incident") != incident:
            raise AuditIndexError(seq)
        if not hash_ok(e, _raw(raw) if raw is not None else None):
            raise AuditIndexError(seq, "does not match its hash")
        if seq < head[0]:
            linked = raw_next is not None and _parse(raw_next).get("prev_hash") == e["hash"]
        else:
            linked = seq == head[0] and head[1] == e["hash"]
        if not linked:
            raise AuditIndexError(seq, "is not the one the chain links to (the next entry or the head)")
        return e

    async def reindex(self, batch: int = 1000) -> int:
        """Index the entries written before the per-incident index existed; returns how many
        it read. It walks from the newest unindexed entry back to the first and lowers the
        marker in the same transaction as each page's index writes, so a crash or a second
        operator resumes where it stopped instead of indexing twice. Appends go on meanwhile:
        they index their own entries."""
        await self._old_layout()
        await self._r.set(Keys.AUDIT_INDEXED_AFTER, await self.unindexed(), nx=True)
        read = 0
        while True:
            hi = int(await self._r.get(Keys.AUDIT_INDEXED_AFTER) or 0)
            if hi == 0:
                return read
            lo = max(0, hi - batch)
            chunk = await self._rows(lo + 1, hi - lo)
            newest_first: dict[str, list[int]] = {}
            for pos in range(len(chunk) - 1, -1, -1):
                raw = chunk[pos]
                e = _parse(raw) if raw is not None else _MISSING
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

    async def count(self) -> int:
        """How many entries the chain holds."""
        return int(await self._r.hlen(Keys.AUDIT_ENTRIES))

    async def head(self) -> tuple[int, str]:
        """(seq, hash) the appender recorded last: (0, GENESIS_HASH) for an empty chain."""
        return _head(text(await self._r.get(Keys.AUDIT_HEAD)))

    async def since(self, start: int) -> list[dict[str, Any]]:
        """The entries after the first ``start``, oldest first."""
        end = _head(text(await self._r.get(Keys.AUDIT_HEAD)))[0]
        return [_parse(raw) for raw in await self._rows(start + 1, max(0, end - start)) if raw is not None]

    async def _page(self, lo: int, n: int) -> tuple[list[bytes | None], tuple[int, str], int]:
        """Entries lo .. lo+n-1 as stored (bytes, None where none is), the head and the count."""
        # One transaction: when the page holds the head, it is the head its last entry must match,
        # even while other replicas keep appending. (hiredis parses the reply: a pure-Python parse
        # of thousands of replies a page cost more than checking them.)
        async with self._r.pipeline(transaction=True) as p:
            # The fields as bytes: redis-py's encoder passes them through (ints take repr + encode).
            p.hmget(Keys.AUDIT_ENTRIES, [b"%d" % seq for seq in range(lo, lo + n)])
            p.get(Keys.AUDIT_HEAD)
            p.hlen(Keys.AUDIT_ENTRIES)
            rows, raw_head, stored = await p.execute()
        return [_raw(v) if v is not None else None for v in rows], _head(text(raw_head)), int(stored)

    async def verify(self, batch: int = PAGE, signed: Signed | None = None) -> int | None:
        """The seq of the first bad entry, or None. Streams the chain page by page through a
        ChainChecker, so memory stays flat however long the chain is; the next page is read
        while this one is checked. ``signed``: also ask it of each page (signed checkpoints,
        bot/audit/sign.py) in the same pass; the earlier of the two breaks is the one named."""
        await self._old_layout()

        def page(lo: int) -> asyncio.Task[tuple[list[bytes | None], tuple[int, str], int]]:
            return asyncio.create_task(self._page(lo, batch))

        checker = ChainChecker()
        # What the scan found so far. The verdict is the least of them once the scan reaches
        # that seq, as a scan entry by entry names it: a break that claims a later seq than its
        # place (an entry rewritten to say seq 99) waits for what the scan finds before 99.
        found: list[int] = []
        broken = False  # the chain broke: nothing after the break is fed to the checker
        lo = 1
        ahead = page(lo)
        try:
            while True:
                rows, head, stored = await ahead
                ahead = page(lo + batch)
                await asyncio.sleep(0)  # let it send its request: Redis reads the next page meanwhile
                within = rows[: max(0, head[0] - lo + 1)]  # entries at or before the head
                entries = _parse_page(within)
                events: list[tuple[int, int]] = []  # (the seq where it was found, the seq it names)
                if signed is not None and entries and (bad := signed.first_bad(lo, entries)) is not None:
                    events.append((bad, bad))
                if not broken:
                    # In slices, yielding between them: the next page's reply is read off the socket
                    # meanwhile (it is larger than the socket's buffer, so Redis waits for the reads).
                    for start in range(0, len(entries), _SLICE):
                        await asyncio.sleep(0)
                        stop = min(start + _SLICE, len(entries))
                        if (bad := checker.feed_page(entries, within, start, stop)) is not None:
                            broken = True
                            events.append((checker.last + 1, bad))
                            break
                for at in sorted({at for at, _ in events}):
                    if found and min(found) <= at:
                        return min(found)
                    found += [named for where, named in events if where == at]
                if found and min(found) <= lo + len(within) - 1:
                    return min(found)
                if len(within) < len(rows):
                    # Past the head: the chain must end where the appender says, with nothing
                    # stored beyond it (an entry added past the head, or a stray field).
                    seq = lo + len(within)
                    if found and min(found) <= seq:
                        return min(found)
                    end = checker.finish(head) if checker.last == seq - 1 else None
                    if end is None and stored > head[0]:
                        end = head[0] + 1
                    if signed is not None and (cut := signed.short(head[0])) is not None:
                        found.append(cut)
                    found += [end] if end is not None else []
                    return min(found) if found else None
                lo += batch
        finally:
            await asyncio.gather(ahead, return_exceptions=True)  # not left in flight on the connection


class Signed(Protocol):
    """What verify asks of each page besides the chain (bot/audit/sign.py Expected)."""

    def first_bad(self, lo: int, entries: list[dict[str, Any]]) -> int | None: ...

    def short(self, last: int) -> int | None: ...
