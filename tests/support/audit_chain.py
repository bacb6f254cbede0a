"""Long audit histories, written fast (tests/audit/test_audit_scale.py, bench/audit_bench.py).

Entries are made with the real `entry_hash`/`canonical` and RPUSHed in big pipelines
with the head, instead of one Lua append each: 10^6 entries take seconds, not minutes.
`indexed=False` writes the history as Firebreak did before the per-incident index
existed (no index, no marker); `indexed=True` writes exactly what the append script
would have written. `legacy=True` writes the list layout of schema 1 and before (one
Redis list, entry n at position n-1), which `firebreak migrate` moves to the hash by seq.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import redis.asyncio as aioredis

from bot.audit.chain import GENESIS_HASH, canonical, entry_hash
from bot.store import Keys

ACTIONS = ("command.update", "command.status", "lever.done", "command.remind", "command.sev")


def every_hundredth(target: str = "INC-1", others: int = 500) -> Callable[[int], str | None]:
    """1% of entries belong to ``target``; the rest spread over ``others`` incidents, 1 in 10 to none."""

    def incident_of(seq: int) -> str | None:
        if seq % 100 == 0:
            return target
        if seq % 10 == 3:
            return None
        return f"INC-{2 + seq % others}"

    return incident_of


def make_entry(seq: int, prev: str, incident: str | None) -> dict[str, Any]:
    """An entry the size and shape of a real one (a command with args, a result, a channel)."""
    e: dict[str, Any] = {
        "seq": seq,
        "ts": f"2026-11-30T03:{(seq // 60) % 60:02d}:{seq % 60:02d}Z",
        "incident": incident,
        "actor": f"U{1000 + seq % 37}",
        "action": ACTIONS[seq % len(ACTIONS)],
        "detail": {
            "args": {"text": f"Chat API p99 back under 400 ms after rollback #{seq}; watching error budget"},
            "channel": f"C0{seq % 91:04d}",
            "result": "ok",
            "source": "slash",
        },
        "request_id": f"req-{seq:08x}",
        "prev_hash": prev,
    }
    e["hash"] = entry_hash(e)
    return e


async def extend_chain(
    r: aioredis.Redis,
    upto: int,
    incident_of: Callable[[int], str | None],
    *,
    indexed: bool = True,
    legacy: bool = False,
    batch: int = 10_000,
) -> None:
    """Append entries until the chain holds ``upto`` (continuing from the current head)."""
    head = await r.get(Keys.AUDIT_HEAD)
    if isinstance(head, bytes):
        head = head.decode()
    seq, prev = (0, GENESIS_HASH) if not head else (int(head.split()[0]), head.split()[1])
    if indexed:
        await r.set(Keys.AUDIT_INDEXED_AFTER, seq, nx=True)
    while seq < upto:
        rows: list[bytes] = []
        index: dict[str, list[int]] = {}
        for s in range(seq + 1, min(seq + batch, upto) + 1):
            inc = incident_of(s)
            e = make_entry(s, prev, inc)
            rows.append(canonical(e))
            prev = e["hash"]
            if inc is not None:
                index.setdefault(inc, []).append(s)
        seq += len(rows)
        async with r.pipeline(transaction=True) as p:
            if legacy:
                p.rpush(Keys.AUDIT_LOG, *rows)
            else:
                p.hset(Keys.AUDIT_ENTRIES, mapping=dict(zip(range(seq - len(rows) + 1, seq + 1), rows, strict=True)))
                p.set(Keys.AUDIT_LOG_MOVED, seq)
            if indexed:
                for inc, seqs in index.items():
                    p.rpush(Keys.audit_incident(inc), *seqs)
            p.set(Keys.AUDIT_HEAD, f"{seq} {prev}")
            await p.execute()


async def stored(r: aioredis.Redis) -> list[dict[str, Any]]:
    """Every stored entry, by seq (the hash's fields), as a forger would read them."""
    raw = await r.hgetall(Keys.AUDIT_ENTRIES)
    return [json.loads(raw[k]) for k in sorted(raw, key=int)]


async def entry_at(r: aioredis.Redis, seq: int) -> dict[str, Any]:
    return dict(json.loads(await r.hget(Keys.AUDIT_ENTRIES, seq)))


async def put(r: aioredis.Redis, seq: int, entry: dict[str, Any] | bytes | str) -> None:
    """Store ``entry`` at ``seq`` directly in Redis (as canonical JSON when it is a dict)."""
    await r.hset(Keys.AUDIT_ENTRIES, seq, canonical(entry) if isinstance(entry, dict) else entry)


async def replace_all(r: aioredis.Redis, entries: list[dict[str, Any]]) -> None:
    """Replace the whole log with ``entries`` at seqs 1..n, and the head with the last one's."""
    async with r.pipeline(transaction=True) as p:
        p.delete(Keys.AUDIT_ENTRIES)
        if entries:
            p.hset(Keys.AUDIT_ENTRIES, mapping={i: canonical(e) for i, e in enumerate(entries, 1)})
        p.set(Keys.AUDIT_HEAD, f"{len(entries)} {entries[-1]['hash']}" if entries else "0 " + GENESIS_HASH)
        await p.execute()
