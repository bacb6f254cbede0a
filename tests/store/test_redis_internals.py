"""What bot/store/client.py relies on inside redis-py beyond its documented API, checked against the
installed version. pyproject.toml caps redis below the next minor release; before raising the cap,
run this file: a failure names the internal that moved, and client.py must follow it."""

from __future__ import annotations

import inspect

import pytest
import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline
from redis.asyncio.cluster import ClusterPipeline, RedisCluster
from redis.asyncio.sentinel import SentinelConnectionPool, SentinelManagedConnection
from redis.crc import key_slot
from redis.exceptions import ConnectionError as RedisConnectionError

from bot.store import client
from tests.support.ports import free_port


def _params(fn: object) -> list[str]:
    return [p for p in inspect.signature(fn).parameters if p != "self"]  # type: ignore[arg-type]


def test_the_subclassed_constructors_and_overridden_methods_keep_their_signatures() -> None:
    # _Client.pipeline builds a _Pipeline positionally, as Redis.pipeline does.
    assert _params(Pipeline.__init__) == ["connection_pool", "response_callbacks", "transaction", "shard_hint"]
    assert _params(Pipeline.execute) == ["raise_on_error"]
    # _ClusterClient.pipeline builds a _ClusterPipeline as RedisCluster.pipeline does.
    assert _params(ClusterPipeline.__init__) == ["client", "transaction"]
    assert _params(ClusterPipeline.execute) == ["raise_on_error", "allow_redirections"]
    assert _params(RedisCluster.pipeline) == ["transaction", "shard_hint"]
    # _SentinelConnection reconnects through Sentinel before redis-py's own send.
    assert _params(SentinelManagedConnection.send_packed_command) == ["command", "check_health"]
    assert isinstance(inspect.getattr_static(SentinelManagedConnection, "is_connected"), property)
    # _SentinelPool: Sentinel's master discovery first, the blocking pool's bounded wait after it.
    mro = client._SentinelPool.__mro__
    assert mro.index(SentinelConnectionPool) < mro.index(aioredis.BlockingConnectionPool)
    assert "get_connection" in vars(aioredis.BlockingConnectionPool)
    # scripts.py routes a script's keys to one Cluster slot.
    assert key_slot(b"{fb}:a") == key_slot(b"{fb}:b")


async def test_a_pipeline_s_queued_state_is_what_execute_replays(redis_url: str) -> None:
    """_Pipeline.execute copies command_stack and scripts before a try and puts them back for the
    next one: execute() empties them, and a restored stack runs again, scripts loaded again."""
    r = client.connect(redis_url)
    try:
        p = r.pipeline(transaction=False)
        assert isinstance(p, client._Pipeline)
        assert p.watching is False
        script = r.register_script("return redis.call('INCR', KEYS[1])")
        p.get("k")
        await script(keys=["n"], client=p)
        assert [args[0] for args, _options in p.command_stack] == ["GET", "EVALSHA"]
        assert script in p.scripts
        stack, scripts = list(p.command_stack), set(p.scripts)
        assert await Pipeline.execute(p) == [None, 1]
        assert p.command_stack == [] and p.scripts == set()
        await r.script_flush()  # the replay must load the script again
        p.command_stack, p.scripts = list(stack), set(scripts)
        assert await Pipeline.execute(p) == [None, 2]
    finally:
        await r.aclose()


async def test_the_error_wording_client_unsent_reads_is_redis_py_s(redis_url: str) -> None:
    """client._unsent tells an unsent command from an unknown outcome by redis-py's messages."""
    nobody = client.connect(f"redis://127.0.0.1:{free_port()}/0")
    try:
        with pytest.raises(RedisConnectionError) as refused:
            await nobody.get("k")
        assert client._unsent(refused.value), str(refused.value)
    finally:
        await nobody.aclose()
    pool = aioredis.BlockingConnectionPool.from_url(redis_url, max_connections=1, timeout=0.05)
    held = await pool.get_connection()
    try:
        with pytest.raises(RedisConnectionError) as exhausted:
            await pool.get_connection()
        assert client._unsent(exhausted.value), str(exhausted.value)
    finally:
        await pool.release(held)
        await pool.disconnect()
    source = inspect.getsource(SentinelManagedConnection)
    assert "The previous master is now a slave" in source
