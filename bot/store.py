"""Redis connection and key layout.

Every key of one incident shares the hash tag ``{INC-n}`` so multi-key Lua
scripts and transactions stay legal on Redis Cluster. Global keys (counters,
the audit chain, channel index) carry their own tags.

A stalled Redis (a SIGSTOPped host, a partition) must cost a person a few
seconds, not minutes, and must never apply a command after they were told it
failed. So: every call is bounded (connect, socket and pool timeouts), nothing
is retried automatically, calls fail at once while another call is finding out
whether Redis is back (`_Gate`), and every write is a Lua script that carries a
deadline Redis itself checks (`script`, `write`): a write that reaches Redis
after its caller gave up is refused there, not applied late.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.typing import EncodableT, KeyT

from bot import logs

log = logs.get(__name__)

Redis = aioredis.Redis

# Slack wants the ack within 3 s (it is sent before any Redis call) and the person should hear
# the result within a few seconds: one stalled call costs at most COMMAND_TIMEOUT_S, and the
# calls after it fail at once (_Gate), so a command's answer comes within ~2 s of a stall.
CONNECT_TIMEOUT_S = 1.0
COMMAND_TIMEOUT_S = 2.0
POOL_WAIT_S = 2.0  # a burst waits this long for one of MAX_CONNECTIONS, then is told "unreachable"
MAX_CONNECTIONS = 64
HEALTH_CHECK_S = 10  # a connection idle this long is PINGed before use: a dead one is noticed before a write
READY_TIMEOUT_S = 0.5  # /readyz
GATE_OPEN_S = 1.0  # after a call failed, how long every call fails at once (_Gate)
# A write's deadline is this much before its caller gives up: room for the reply's trip back and
# for the error in the measured clock offset (_RedisClock).
DEADLINE_MARGIN_S = 0.5
CLOCK_REFRESH_S = 60.0


class StoreUnreachable(RedisConnectionError):
    """Failed at once, unsent: Redis did not answer the last call, and another is checking."""


class DeadlinePassed(RedisError):
    """Redis refused a write that reached it after its caller had given up: nothing was applied."""


class _Gate:
    """Fails calls at once while Redis is known unreachable. Without it, each request of a burst
    would wait out its own timeout in turn behind the lane's few workers. For GATE_OPEN_S after a
    failure every call fails at once (so a request hears within one timeout, not two); then one
    call at a time (the probe) finds out whether Redis is back, and its success reopens the way."""

    def __init__(self) -> None:
        self.down = False
        self.probing = False
        self.retry_at = 0.0

    @asynccontextmanager
    async def call(self) -> AsyncIterator[None]:
        probe = False
        if self.down:
            if self.probing or time.monotonic() < self.retry_at:
                raise StoreUnreachable("Redis did not answer a call just now; failing fast until it does")
            self.probing = probe = True
        try:
            yield
        except (RedisConnectionError, RedisTimeoutError):
            # Not logged here: each caller logs its failure with its request id.
            self.down, self.retry_at = True, time.monotonic() + GATE_OPEN_S
            raise
        except RedisError:
            self.down = False  # Redis answered, with an error
            raise
        else:
            self.down = False
        finally:
            if probe:
                self.probing = False


class _RedisClock:
    """Redis's clock as seen from here: deadlines are checked against Redis's TIME, so they are
    written in it. The offset is measured with TIME (error at most half the round trip) and
    refreshed every CLOCK_REFRESH_S; a slow measurement does not replace a good one."""

    def __init__(self) -> None:
        self.offset: float | None = None
        self.error = float("inf")
        self.measured = float("-inf")

    async def now(self, r: Redis) -> float:
        if time.monotonic() - self.measured > CLOCK_REFRESH_S:
            t0 = time.time()
            sec, usec = await r.time()
            t1 = time.time()
            self.measured = time.monotonic()
            error = (t1 - t0) / 2
            if self.offset is None or error <= max(self.error, DEADLINE_MARGIN_S / 4):
                self.offset, self.error = sec + usec / 1e6 - (t0 + t1) / 2, error
        return time.time() + (self.offset or 0.0)


class _Pipeline(Pipeline):
    gate: _Gate

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        async with self.gate.call():
            return await super().execute(raise_on_error)


class _Client(aioredis.Redis):
    """The real-Redis client: every call passes the gate."""

    gate: _Gate
    clock: _RedisClock
    command_timeout: float

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        async with self.gate.call():
            return await super().execute_command(*args, **options)

    def pipeline(self, transaction: bool = True, shard_hint: str | None = None) -> Pipeline:
        p = _Pipeline(self.connection_pool, self.response_callbacks, transaction, shard_hint)
        p.gate = self.gate
        return p


def connect(url: str | None, command_timeout: float = COMMAND_TIMEOUT_S) -> Redis:
    """A real Redis when ``url`` is set, else an embedded in-memory store."""
    if url:
        # A blocking pool: a burst of requests waits (briefly) for a connection instead of failing
        # (redis-py's default pool raises "Too many connections" past 100 at once).
        pool = aioredis.BlockingConnectionPool.from_url(
            url,
            decode_responses=True,
            max_connections=MAX_CONNECTIONS,
            timeout=POOL_WAIT_S,
            socket_connect_timeout=CONNECT_TIMEOUT_S,
            socket_timeout=command_timeout,
            health_check_interval=HEALTH_CHECK_S,
            # No automatic retry: after a timeout the first attempt's outcome is unknown, and a
            # second one could apply a write twice. The person is told, and tries again.
            retry=Retry(NoBackoff(), 0),
        )
        client = _Client.from_pool(pool)
        assert isinstance(client, _Client)  # from_pool builds the class it is called on
        client.gate, client.clock, client.command_timeout = _Gate(), _RedisClock(), command_timeout
        return client
    # Imported lazily: only the no-Redis mode needs it.
    import fakeredis

    log.warning(
        "embedded_store",
        message="REDIS_URL is not set: using an embedded in-memory store. "
        "ALL INCIDENT STATE AND THE AUDIT LOG DIE WITH THIS PROCESS.",
    )
    return fakeredis.FakeAsyncRedis(decode_responses=True)


# Deadlined writes ---------------------------------------------------------------------------

# Put before every state-changing script: the last ARGV is the deadline (Redis time, seconds);
# the script body sees ARGV without it. Redis runs a script whole or not at all, so a refused
# one changed nothing.
_PRELUDE = """local fb_deadline = tonumber(ARGV[#ARGV])
local ARGV = {unpack(ARGV, 1, #ARGV - 1)}
local fb_now = redis.call('TIME')
if tonumber(fb_now[1]) + tonumber(fb_now[2]) / 1000000 > fb_deadline then
  return redis.error_reply('FB_DEADLINE reached Redis after its caller gave up; not applied')
end
"""
_DEADLINE_CODE = "FB_DEADLINE"


async def _deadline(r: Redis) -> float:
    """When a write sent now must have run by, in Redis's clock: before its caller gives up."""
    if isinstance(r, _Client):
        return await r.clock.now(r) + r.command_timeout - DEADLINE_MARGIN_S
    # The embedded store runs in this process, on this clock, and cannot stall apart from it
    # (a client not made by connect, as in one store's tests, is taken to share this clock).
    return time.time() + COMMAND_TIMEOUT_S - DEADLINE_MARGIN_S


class Script:
    """A Lua script registered through ``script``; called like redis-py's registered scripts:
    ``await s(keys=[...], args=[...])``."""

    def __init__(self, r: Redis, source: str, deadline: bool) -> None:
        self._r = r
        self._guarded = deadline
        self._script = r.register_script(_PRELUDE + source if deadline else source)

    async def __call__(self, keys: Sequence[KeyT] | None = None, args: Iterable[EncodableT] | None = None) -> Any:
        if not self._guarded:
            return await self._script(keys=keys, args=args)
        deadline = await _deadline(self._r)
        try:
            return await self._script(keys=keys, args=[*(args or ()), repr(deadline)])
        except ResponseError as e:
            if str(e).startswith(_DEADLINE_CODE):
                log.warning("store_write_refused_late")
                raise DeadlinePassed(str(e)) from None
            raise


def script(r: Redis, source: str, deadline: bool = True) -> Script:
    """Register a Lua script that writes. Redis refuses it (DeadlinePassed, nothing applied) when
    it runs after its caller's timeout, e.g. when its bytes waited in a stalled Redis's socket
    buffer: a command is never applied after the person was told it failed. Plain commands go
    through ``write``.

    ``deadline=False`` only for a write that records what already happened outside Redis (a post
    made, a job done, the audit entry of a request): landing late then only brings Redis up to
    date, while refusing it would leave a stale "pending" behind (a reminder posted twice)."""
    return Script(r, source, deadline)


# Plain single-key commands applied together, atomically, under the same deadline. Each command
# is ARGV: its name, how many arguments follow its key, the arguments; its key is the next KEYS.
_WRITE = """
local out, i, k = {}, 1, 1
while i <= #ARGV do
  local n = tonumber(ARGV[i + 1])
  out[k] = redis.call(ARGV[i], KEYS[k], unpack(ARGV, i + 2, i + 1 + n))
  i, k = i + 2 + n, k + 1
end
return out
"""


Write = tuple[str, str, *tuple[EncodableT, ...]]  # (command, key, *args)


async def write(r: Redis, *commands: Write, deadline: bool = True) -> list[Any]:
    """Run ``(name, key, *args)`` commands as one script, under ``script``'s deadline rule; their
    replies in order. All keys must share a hash slot (Redis Cluster), as in a MULTI."""
    keys: list[KeyT] = []
    args: list[EncodableT] = []
    for name, key, *rest in commands:
        keys.append(key)
        args += [name, len(rest), *rest]
    return list(await script(r, _WRITE, deadline)(keys=keys, args=args))


def text(value: bytes | str | None) -> str | None:
    """A reply as text (the client decodes responses; the type says it may not)."""
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else value


async def ping(r: Redis, timeout: float = READY_TIMEOUT_S) -> bool:
    """Does Redis answer within ``timeout``? (readiness: a stalled Redis is "not ready" quickly)"""
    try:
        return bool(await asyncio.wait_for(r.ping(), timeout))
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
    # Entries with a seq above this number are in the per-incident index; the ones at or
    # below it predate the index until `firebreak audit reindex` lowers it to 0.
    AUDIT_INDEXED_AFTER = "fb:{audit}:indexed-after"

    @staticmethod
    def audit_incident(inc: str) -> str:  # the seqs of one incident's audit entries, in order
        return f"fb:{{audit}}:inc:{inc}"

    # Open intents (write intent first, bot/core/dispatch.py): request id -> what it is doing, and
    # "<id>|notes" -> what it made so far. In the {audit} slot: the audit append closes an intent
    # in the same script. The hash is also the index: the repair reads it whole (it stays small).
    AUDIT_INTENTS = "fb:{audit}:intents"

    @staticmethod
    def dedupe(kind: str, key: str) -> str:
        return f"fb:{{dedupe}}:{kind}:{key}"

    @staticmethod
    def inbound(digest: str) -> str:  # a signed Slack request already received (bot/slack/store.py)
        # No hash tag: only ever used alone, so these spread over a cluster's slots.
        return f"fb:inbound:{digest}"

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
