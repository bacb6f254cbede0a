"""The state's schema version (bot/schema.py) against a real Redis: several replicas starting
together migrate once, and a store written by a newer release is refused by `serve` and
`migrate`. The levers' migration: tests/levers/test_migrations.py."""

from __future__ import annotations

import asyncio
import os
import sys

import pytest

from bot import schema
from bot.runtime import MIGRATIONS
from bot.store import connect
from tests.support.core import REPO, cli


async def test_replicas_starting_together_migrate_once(redis_url):
    applied: list[int] = []

    async def plan(r) -> list[str]:
        return ["one thing"]

    def step(n: int) -> schema.Migration:
        async def apply(r) -> int:
            applied.append(n)
            await asyncio.sleep(0.3)  # long enough for every other replica to find the lock taken
            return 1

        return schema.Migration(name=f"step {n}", plan=plan, apply=apply)

    steps = (step(1), step(2))
    clients = [connect(redis_url) for _ in range(5)]
    try:
        ran = await asyncio.gather(*(schema.ensure(c, steps) for c in clients))
        assert applied == [1, 2]
        assert sorted(map(len, ran)) == [0, 0, 0, 0, 2]
        assert await schema.version(clients[0]) == 2
        assert await clients[0].exists(schema.LOCK_KEY) == 0
        # A later release adds a step: only that one runs.
        assert await schema.ensure(clients[0], (*steps, step(3))) == ["step 3"]
        assert applied == [1, 2, 3]
    finally:
        for c in clients:
            await c.aclose()


async def test_a_store_from_a_newer_release_is_refused(redis_url):
    newer = len(MIGRATIONS) + 1
    r = connect(redis_url)
    await r.set(schema.VERSION_KEY, newer)
    try:
        with pytest.raises(schema.SchemaTooNew, match=f"schema version {newer}"):
            await schema.ensure(r, MIGRATIONS)
        assert int(await r.get(schema.VERSION_KEY)) == newer  # left as it was
    finally:
        await r.aclose()
    rc, _, err = await cli(redis_url, "migrate", "--dry-run")
    assert rc == 2, err
    assert err.startswith(f"firebreak: the state in Redis is schema version {newer}, and this Firebreak knows"), err

    # `firebreak serve` stops with the same one line and exit code 2, before it serves.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "REDIS_", "FIREBREAK_", "LOG_"))}
    env.update(
        SLACK_BOT_TOKEN="xoxb-x", SLACK_SIGNING_SECRET="s", REDIS_URL=redis_url, SLACK_API_URL="http://127.0.0.1:9/"
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", "serve", "--port", "0", cwd=REPO, env=env, stderr=asyncio.subprocess.PIPE
    )
    _, stderr = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 2, stderr.decode()[-2000:]
    last = stderr.decode().strip().splitlines()[-1]
    assert last.startswith(f"firebreak: the state in Redis is schema version {newer}"), last
    assert '"event": "serving"' not in stderr.decode()


async def test_a_holder_whose_lock_expired_does_not_move_the_version(redis_url):
    """A slow migration outlives its lock and another process migrates meanwhile: the slow one's
    version write is refused (never backwards), and it says so."""
    r = connect(redis_url)

    async def plan(_r) -> list[str]:
        return []

    async def overtaken(_r) -> int:
        await r.set(schema.LOCK_KEY, "another-process")  # our lock expired; another took it
        await r.set(schema.VERSION_KEY, 2)  # and finished both steps
        return 1

    async def never(_r) -> int:
        raise AssertionError("not reached")

    steps = (schema.Migration("slow", plan, overtaken), schema.Migration("second", plan, never))
    try:
        with pytest.raises(schema.MigrationTimeout, match="lost"):
            await schema.ensure(r, steps)
        assert await schema.version(r) == 2
        assert await r.get(schema.LOCK_KEY) == "another-process"  # not released by us
    finally:
        await r.aclose()
