"""Redis connection and key layout.

Every key of one incident shares the hash tag ``{INC-n}`` so multi-key Lua
scripts and transactions stay legal on Redis Cluster. Global keys (counters,
the audit chain, channel index) carry their own tags.
"""

from __future__ import annotations

import redis.asyncio as aioredis

from bot import logs

log = logs.get(__name__)

Redis = aioredis.Redis


def connect(url: str | None) -> Redis:
    """A real Redis when ``url`` is set, else an embedded in-memory store."""
    if url:
        # A blocking pool: a burst of requests waits for a connection instead of failing
        # (redis-py's default pool raises "Too many connections" past 100 at once).
        pool = aioredis.BlockingConnectionPool.from_url(url, decode_responses=True, max_connections=64, timeout=20)
        return aioredis.Redis.from_pool(pool)
    # Imported lazily: only the no-Redis mode needs it.
    import fakeredis

    log.warning(
        "embedded_store",
        message="REDIS_URL is not set: using an embedded in-memory store. "
        "ALL INCIDENT STATE AND THE AUDIT LOG DIE WITH THIS PROCESS.",
    )
    return fakeredis.FakeAsyncRedis(decode_responses=True)


def text(value: bytes | str | None) -> str | None:
    """A reply as text (the client decodes responses; the type says it may not)."""
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else value


async def ping(r: Redis) -> bool:
    try:
        return bool(await r.ping())
    except Exception:  # noqa: BLE001 - readiness reports any failure as "not ready"
        return False


class Keys:
    """The key layout in one place."""

    @staticmethod
    def incident(inc: str) -> str:
        return f"fb:inc:{{{inc}}}"

    @staticmethod
    def roles(inc: str) -> str:
        return f"fb:inc:{{{inc}}}:roles"

    @staticmethod
    def tenure(inc: str) -> str:
        return f"fb:inc:{{{inc}}}:tenure"

    @staticmethod
    def handoff(inc: str, hid: str) -> str:
        return f"fb:inc:{{{inc}}}:handoff:{hid}"

    @staticmethod
    def handoff_seq(inc: str) -> str:
        return f"fb:inc:{{{inc}}}:handoff-seq"

    INCIDENT_SEQ = "fb:{seq}:incident"
    REQUEST_SEQ = "fb:{seq}:request"
    INCIDENTS_OPEN = "fb:{idx}:open"

    @staticmethod
    def channel(channel_id: str) -> str:
        return f"fb:{{idx}}:chan:{channel_id}"

    AUDIT_LOG = "fb:{audit}:log"
    AUDIT_HEAD = "fb:{audit}:head"

    @staticmethod
    def dedupe(kind: str, key: str) -> str:
        return f"fb:{{dedupe}}:{kind}:{key}"

    @staticmethod
    def sched(part: str) -> str:  # the scheduler's keys (bot/scheduler/scripts.py), one slot
        return f"fb:{{sched}}:{part}"

    @staticmethod
    def comms(inc: str, part: str) -> str:  # cadence bookkeeping and reminder dedupe (bot/comms)
        return f"fb:inc:{{{inc}}}:comms:{part}"

    @staticmethod
    def approvals(inc: str, part: str) -> str:  # ballots, votes and grant index (bot/approvals)
        return f"fb:inc:{{{inc}}}:appr:{part}"

    @staticmethod
    def levers(part: str) -> str:  # lever requests (req:REQ-n), per-incident index, budgets, route steps (levers/)
        return f"fb:{{levers}}:{part}"

    GRANT_SEQ = "fb:{seq}:grant"  # break-glass ids BG-<n>
