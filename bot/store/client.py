"""Connections to Redis: one server, a Sentinel-watched master, or a Cluster (target.py).

A stalled Redis (a SIGSTOPped host, a partition) must cost a person a few seconds, not
minutes, and must never apply a command after they were told it failed. So: every call is
bounded (connect, socket and pool timeouts), calls fail at once while another call is finding
out whether Redis is back (`_Gate`), and every write is a Lua script that carries a deadline
Redis itself checks (scripts.py).

One Redis: nothing is retried (its outage is not a failover: the person is told, and tries
again). Sentinel and Cluster: a call that failed on the connection is retried until the new
master answers or ``failover_s`` is spent, when that is safe: the command was never sent, or it
is a read, or it is a script (every script carries an operation key that makes a second run
return the first one's reply, scripts.py). Other writes are not retried after they were sent.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline
from redis.asyncio.cluster import ClusterNode, ClusterPipeline, RedisCluster
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import (
    MasterNotFoundError,
    Sentinel,
    SentinelConnectionPool,
    SentinelManagedConnection,
    SentinelManagedSSLConnection,
)
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisClusterException, RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.maint_notifications import MaintNotificationsConfig

from bot import logs
from bot.store.target import Target, parse

log = logs.get(__name__)

Redis = aioredis.Redis
T = TypeVar("T")

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
RETRY_PAUSE_S = 0.2  # between a failover's retries: Sentinel answers with the new master within ~1 s
# A write's deadline is this much before its caller gives up: room for the reply's trip back and
# for the error in the measured clock offset (_RedisClock).
DEADLINE_MARGIN_S = 0.5
CLOCK_REFRESH_S = 60.0

# Retried after an unknown outcome: they change nothing (EVALSHA: see the module docstring).
_SAFE = frozenset(
    [
        "GET",
        "MGET",
        "HGET",
        "HMGET",
        "HGETALL",
        "HEXISTS",
        "HLEN",
        "HKEYS",
        "HVALS",
        "LRANGE",
        "LINDEX",
        "LLEN",
        "SMEMBERS",
        "SISMEMBER",
        "SCARD",
        "ZRANGE",
        "ZRANGEBYSCORE",
        "ZREVRANGE",
        "ZREVRANGEBYSCORE",
        "ZSCORE",
        "ZCARD",
        "ZCOUNT",
        "ZRANK",
        "EXISTS",
        "TYPE",
        "TTL",
        "PTTL",
        "SCAN",
        "HSCAN",
        "SSCAN",
        "ZSCAN",
        "XRANGE",
        "XREVRANGE",
        "XLEN",
        "PING",
        "TIME",
        "INFO",
        "WAIT",
        "EVALSHA",
        "EVAL",
        "SCRIPT",
        "COMMAND",
        "CLUSTER",
    ]
)


class StoreUnreachable(RedisConnectionError):
    """Failed at once, unsent: Redis did not answer the last call, and another is checking."""


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
    refreshed every CLOCK_REFRESH_S, and after a failover (another server's clock); a slow
    measurement does not replace a good one."""

    def __init__(self) -> None:
        self.offset: float | None = None
        self.error = float("inf")
        self.measured = float("-inf")

    def stale(self) -> None:
        self.offset, self.error, self.measured = None, float("inf"), float("-inf")

    async def now(self, r: Any) -> float:
        if time.monotonic() - self.measured > CLOCK_REFRESH_S:
            t0 = time.time()
            sec, usec = await r.time()
            t1 = time.time()
            self.measured = time.monotonic()
            error = (t1 - t0) / 2
            if self.offset is None or error <= max(self.error, DEADLINE_MARGIN_S / 4):
                self.offset, self.error = sec + usec / 1e6 - (t0 + t1) / 2, error
        return time.time() + (self.offset or 0.0)


@dataclass
class Options:
    """What connect() decided for one client; scripts.py reads it through options()."""

    target: Target
    command_timeout: float
    gate: _Gate = field(default_factory=_Gate)
    clock: _RedisClock = field(default_factory=_RedisClock)

    @property
    def failover_s(self) -> float:
        return self.target.failover_s

    @property
    def wait_replicas(self) -> int:
        return self.target.wait_replicas

    @property
    def wait_ms(self) -> int:
        return self.target.wait_ms


def options(r: object) -> Options | None:
    """The options of a client made by connect (None: the embedded store or a bare client)."""
    o = getattr(r, "fb", None)
    return o if isinstance(o, Options) else None


def _unsent(exc: Exception) -> bool:
    """Did the command surely not run? (it never left, or the server refused it unread)"""
    if isinstance(exc, (StoreUnreachable, MasterNotFoundError)):
        return True
    text = str(exc)
    # redis-py's own wording: a failed connect, an exhausted pool, a demoted master's READONLY.
    return "connecting to" in text or text.startswith("No connection available") or "now a slave" in text


def _safe(args: tuple[Any, ...]) -> bool:
    return bool(args) and str(args[0]).split(" ", 1)[0].upper() in _SAFE


async def _call(o: Options, safe: bool, attempt: Callable[[], Awaitable[T]]) -> T:
    started = time.monotonic()
    give_up = started + o.failover_s
    tries = 0
    while True:
        tries += 1
        try:
            async with o.gate.call():
                result = await attempt()
        except (RedisConnectionError, RedisTimeoutError) as exc:
            if o.failover_s <= 0 or time.monotonic() >= give_up or not (safe or _unsent(exc)):
                raise
            o.clock.stale()  # the next server may keep another time
            await asyncio.sleep(RETRY_PAUSE_S)
            continue
        if tries > 1:
            log.info("store_failover_recovered", tries=tries, seconds=round(time.monotonic() - started, 3))
        return result


class _Pipeline(Pipeline):
    # command_stack, scripts and watching are redis-py's pipeline state, not its API: redis is capped
    # below the next minor in pyproject.toml and tests/store/test_redis_internals.py checks them.
    fb: Options

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        stack, scripts = list(self.command_stack), set(self.scripts)
        safe = not self.watching and all(_safe(args) for args, _ in stack)
        first = True

        async def attempt() -> list[Any]:
            nonlocal first
            if not first:  # execute() emptied them
                self.command_stack, self.scripts = list(stack), set(scripts)
            first = False
            return await Pipeline.execute(self, raise_on_error)

        return await _call(self.fb, safe, attempt)


class _Client(aioredis.Redis):
    """One server or a Sentinel-watched master: every call passes the gate (and the retry)."""

    fb: Options

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        run = super().execute_command
        return await _call(self.fb, _safe(args), lambda: run(*args, **options))

    def pipeline(self, transaction: bool = True, shard_hint: str | None = None) -> Pipeline:
        p = _Pipeline(self.connection_pool, self.response_callbacks, transaction, shard_hint)
        p.fb = self.fb
        return p


class _ClusterPipeline(ClusterPipeline):
    fb: Options

    async def execute(self, raise_on_error: bool = True, allow_redirections: bool = True) -> list[Any]:
        # Not retried across a failover (only reads are pipelined here; the caller tries again).
        async with self.fb.gate.call():
            return await super().execute(raise_on_error, allow_redirections)


class _ClusterClient(RedisCluster):
    fb: Options

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        run = super().execute_command
        return await _call(self.fb, _safe(args), lambda: run(*args, **kwargs))

    def pipeline(self, transaction: Any | None = None, shard_hint: Any | None = None) -> ClusterPipeline:
        p = _ClusterPipeline(self, transaction)  # type: ignore[abstract]  # as redis-py builds it
        p.fb = self.fb
        return p


class _SentinelPool(SentinelConnectionPool, aioredis.BlockingConnectionPool):
    """Sentinel's master discovery with the blocking pool's bounded wait."""


class _SentinelConnection(SentinelManagedConnection):
    """A connection that always reconnects through Sentinel.

    redis-py (8.x) reconnects a dropped connection inside send_packed_command with
    connect_check_health, straight to the address it last had. A pipeline keeps its connection
    while it loads scripts, so after a failover its retries went to the dead master until
    failover_s ran out (seen about once in five kills, bench/redis_bench.py). connect() asks
    Sentinel for the master first."""

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        if not self.is_connected:
            await self.connect()
        await super().send_packed_command(command, check_health)


class _SentinelSSLConnection(_SentinelConnection, SentinelManagedSSLConnection):
    pass


def connect(url: str | None, command_timeout: float = COMMAND_TIMEOUT_S, ca_file: Path | None = None) -> Redis:
    """A real Redis when ``url`` is set, else an embedded in-memory store."""
    if not url:
        # Imported lazily: only the no-Redis mode needs it.
        import fakeredis

        log.warning(
            "embedded_store",
            message="REDIS_URL is not set: using an embedded in-memory store. "
            "ALL INCIDENT STATE AND THE AUDIT LOG DIE WITH THIS PROCESS.",
        )
        return fakeredis.FakeAsyncRedis(decode_responses=True)
    target = parse(url)
    common: dict[str, Any] = {
        "decode_responses": True,
        "socket_connect_timeout": CONNECT_TIMEOUT_S,
        "socket_timeout": command_timeout,
        # No retry inside redis-py: it would resend a write whose outcome is unknown. Ours (_call)
        # retries only what is safe, and only across a failover.
        "retry": Retry(NoBackoff(), 0),
    }
    # redis-py 8 defaults maintenance notifications (a Redis Enterprise/Cloud feature) to "auto", and
    # while they are on its pool skips the check that replaces a dead pooled connection on checkout:
    # after a Redis restart the first command then fails on a socket the old server closed, and the
    # gate opens for every request behind it (tests/approvals/test_redis_restart.py).
    pooled: dict[str, Any] = {"maint_notifications_config": MaintNotificationsConfig(enabled=False)}
    tls: dict[str, Any] = {"ssl_ca_certs": str(ca_file)} if ca_file and target.tls else {}
    client: Any
    if target.kind == "single":
        # A blocking pool: a burst of requests waits (briefly) for a connection instead of failing
        # (redis-py's default pool raises "Too many connections" past 100 at once).
        pool = aioredis.BlockingConnectionPool.from_url(
            url,
            max_connections=MAX_CONNECTIONS,
            timeout=POOL_WAIT_S,
            health_check_interval=HEALTH_CHECK_S,
            **common,
            **pooled,
            **tls,
        )
        client = _Client.from_pool(pool)
    elif target.kind == "sentinel":
        secure = {"ssl": True, **tls} if target.tls else {}
        asking = {"socket_connect_timeout": CONNECT_TIMEOUT_S, "socket_timeout": CONNECT_TIMEOUT_S}
        sentinels = Sentinel(list(target.nodes), sentinel_kwargs={**asking, **secure})
        client = sentinels.master_for(
            target.master,
            redis_class=_Client,
            connection_pool_class=_SentinelPool,
            connection_class=_SentinelSSLConnection if target.tls else _SentinelConnection,
            db=target.db,
            username=target.username,
            password=target.password,
            max_connections=MAX_CONNECTIONS,
            timeout=POOL_WAIT_S,
            health_check_interval=HEALTH_CHECK_S,
            check_connection=True,  # PING a new connection: a master that just died is found before a write
            **common,
            **pooled,
            **secure,
        )
    else:
        client = _ClusterClient(
            startup_nodes=[ClusterNode(h, p) for h, p in target.nodes],
            username=target.username,
            password=target.password,
            max_connections=MAX_CONNECTIONS,
            ssl=target.tls,
            **common,
            **tls,
        )
    client.fb = Options(target=target, command_timeout=command_timeout)
    log.debug("store_connect", target=str(target))
    return cast(Redis, client)


async def ping(r: Redis, timeout: float = READY_TIMEOUT_S) -> bool:
    """Does Redis answer within ``timeout``? (readiness: a stalled Redis is "not ready" quickly)"""
    try:
        return bool(await asyncio.wait_for(r.ping(), timeout))
    except (RedisError, RedisClusterException, TimeoutError, OSError):
        # What redis-py raises for a store that is down, slow, refusing or without a master (Sentinel)
        # or slot owner (Cluster); anything else is a bug and propagates.
        return False


def text(value: bytes | str | None) -> str | None:
    """A reply as text (the client decodes responses; the type says it may not)."""
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else value
