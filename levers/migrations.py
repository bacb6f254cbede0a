"""The levers' state migrations (listed in order in bot/runtime.py MIGRATIONS)."""

from __future__ import annotations

from redis.typing import EncodableT

from bot.schema import Migration
from bot.store import Redis, write
from levers import store

_FIELDS = ("created_at", "approved_at", "started_at", "finished_at", "undone_at")
_BATCH = 500


async def _unindexed(r: Redis) -> dict[str, float]:
    """Requests missing from the moved index, with their latest move."""
    out: dict[str, float] = {}
    batch: list[str] = []

    async def flush() -> None:
        async with r.pipeline(transaction=False) as p:
            for key in batch:
                p.zscore(store.MOVED_KEY, store.request_id(key))
                p.hmget(key, list(_FIELDS))
            got = await p.execute()
        for key, score, times in zip(batch, got[::2], got[1::2], strict=True):
            moves = [float(t) for t in times if t not in (None, "null")]
            if score is None and moves:
                out[store.request_id(key)] = max(moves)
        batch.clear()

    async for key in r.scan_iter(match=store.request_key("*"), count=_BATCH):
        batch.append(key.decode() if isinstance(key, bytes) else key)
        if len(batch) >= _BATCH:
            await flush()
    if batch:
        await flush()
    return out


async def _plan_moved_index(r: Redis) -> list[str]:
    n = len(await _unindexed(r))
    return [f"{n} lever request(s) to add to the index by latest move"] if n else []


async def _apply_moved_index(r: Redis) -> int:
    found = await _unindexed(r)
    items = list(found.items())
    for i in range(0, len(items), _BATCH):
        # GT: a request that moved meanwhile (scored by the transition script) keeps its later score.
        args: list[EncodableT] = ["GT", *(x for rid, at in items[i : i + _BATCH] for x in (at, rid))]
        await write(r, ("ZADD", store.MOVED_KEY, *args))
    return len(found)


MOVED_INDEX = Migration(
    name="lever requests: index by latest move (what `changed` reads)",
    plan=_plan_moved_index,
    apply=_apply_moved_index,
)
