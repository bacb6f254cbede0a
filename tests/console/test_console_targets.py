"""`firebreak console` stays a console (issue 35 item 6): an exported REDIS_URL or KUBECONFIG (the
docs tell operators to export REDIS_URL for `audit verify`) must not join it to production. Only
`--redis URL` and `--kubeconfig FILE --real-clusters` do, and with a real Redis it runs no scheduler
and no start hooks: production's due jobs stay production's.

"Production" here is a real Redis holding a due job and a separate demo fleet (Kubernetes API
emulators with their own kubeconfig and token) that records every request it gets.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import NamedTuple

import pytest
import redis.asyncio as aioredis

from bot.clock import SystemClock
from bot.comms import timers
from bot.policy import load_policy
from bot.scheduler import Scheduler
from bot.store import Keys
from fbworld.fleet import DemoFleet, demo_fleet, demo_unavailable
from levers.catalogue import LEVERS
from tests.support.core import REPO

SCRIPT = """\
/incident declare Queue stuck --sev 2 --cell us-east-3
/incident role ops @bob
as @bob
/incident lever kueue-hold research-h100
"""


class Ran(NamedTuple):
    returncode: int
    stdout: str
    stderr: str


async def console(tmp_path: Path, *flags: str, env: dict[str, str]) -> Ran:
    """`python -m bot console --script …` in a child process with exactly ``env`` for its settings.
    Awaited, not run blocking: "production" (the clusters) answers from this test's event loop."""
    script = tmp_path / "session.txt"
    script.write_text(SCRIPT)
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SLACK_", "REDIS_", "FIREBREAK_", "KUBECONFIG", "PROMETHEUS_"))
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "console",
        "--script",
        str(script),
        "--user",
        "alice",
        *flags,
        cwd=REPO,
        env={**base, **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return Ran(proc.returncode, out.decode(), err.decode())


@pytest.fixture
async def production() -> AsyncIterator[DemoFleet]:
    if missing := demo_unavailable():
        pytest.fail(missing)  # a missing tool fails the test, never skips it (.ci/run installs openssl)
    with tempfile.TemporaryDirectory(prefix="fb-prod-") as workdir:
        async with demo_fleet(load_policy(None, levers=LEVERS), Path(workdir), prometheus=False) as fleet:
            for cluster in fleet.clusters.values():
                cluster.record_requests = True  # every request the "production" clusters get
            yield fleet


async def due_job(redis_url: str) -> dict:
    """Production's scheduler state with a reminder that fell due a minute ago."""
    r = aioredis.from_url(redis_url, decode_responses=True)
    try:
        await Scheduler(r, SystemClock()).schedule(timers.REMIND, "INC-7", time.time() - 60, {"incident": "INC-7"})
        return await scheduler_state(r)
    finally:
        await r.aclose()


async def scheduler_state(r: aioredis.Redis) -> dict:
    return {
        "due": await r.zrange(Keys.sched("due"), 0, -1, withscores=True),
        "jobs": await r.hgetall(Keys.sched("jobs")),
        "inflight": await r.zrange(Keys.sched("inflight"), 0, -1),
        "dead": await r.zrange(Keys.sched("dead"), 0, -1),
    }


def hold(fleet: DemoFleet) -> str | None:
    queue = fleet.clusters["us-east-3"].get("clusterqueues", "research-h100")
    assert queue is not None
    return queue["spec"].get("stopPolicy")


async def test_exported_redis_url_and_kubeconfig_are_ignored(tmp_path, redis_url, production):
    before = await due_job(redis_url)
    out = await console(tmp_path, env={"REDIS_URL": redis_url, "KUBECONFIG": str(production.kubeconfig)})
    text = out.stdout + out.stderr
    assert out.returncode == 0, text
    assert "EMBEDDED IN-MEMORY STORE" in out.stdout and "DEMO FLEET" in out.stdout
    # The banner says why the exported variables were not used, and how to ask for them.
    assert "REDIS_URL is set but not used" in out.stderr and "--redis" in out.stderr
    assert "KUBECONFIG is set but not used" in out.stderr and "--real-clusters" in out.stderr
    assert "applied and verified" in out.stdout  # the lever ran, on the console's own demo fleet
    # Production: its due job neither run nor claimed nor touched, nothing else written, and its
    # clusters never asked anything.
    r = aioredis.from_url(redis_url, decode_responses=True)
    try:
        assert await scheduler_state(r) == before
        assert sorted(await r.keys("*")) == sorted(Keys.sched(p) for p in ("due", "jobs", "members"))
    finally:
        await r.aclose()
    assert hold(production) == "None"  # Kueue's "not held"
    assert not [req for c in production.clusters.values() for req in c.requests]


async def test_the_flags_join_a_real_redis_and_real_clusters_with_no_scheduler(tmp_path, redis_url, production):
    before = await due_job(redis_url)
    out = await console(
        tmp_path,
        "--redis",
        redis_url,
        "--kubeconfig",
        str(production.kubeconfig),
        "--real-clusters",
        # What is exported is beside the point once the flags say where to go.
        env={"REDIS_URL": "redis://127.0.0.1:1/0", "KUBECONFIG": str(tmp_path / "nowhere")},
    )
    text = out.stdout + out.stderr
    assert out.returncode == 0, text
    assert "State: Redis at --redis" in out.stdout and "no scheduler" in out.stdout
    assert "REAL CLUSTERS" in out.stdout
    assert "applied and verified" in out.stdout
    assert hold(production) == "Hold"  # the lever acted on the clusters --kubeconfig names
    r = aioredis.from_url(redis_url, decode_responses=True)
    try:
        assert await r.exists("fb:inc:{INC-1}")  # the incident lives in that Redis
        # No scheduler: production's due job is still production's, unclaimed.
        after = await scheduler_state(r)
        assert after["inflight"] == before["inflight"] == [] and after["dead"] == []
        assert set(before["due"]) <= set(after["due"])
        assert all(after["jobs"][k] == v for k, v in before["jobs"].items())
    finally:
        await r.aclose()


async def test_kubeconfig_without_real_clusters_is_refused(tmp_path):
    out = await console(tmp_path, "--kubeconfig", str(tmp_path / "cells.yaml"), env={})
    assert out.returncode == 2
    assert "--real-clusters" in out.stderr and "Traceback" not in out.stderr
    out = await console(tmp_path, "--real-clusters", env={})
    assert out.returncode == 2
    assert "--kubeconfig FILE" in out.stderr and "Traceback" not in out.stderr


async def test_a_drill_is_refused_with_redis_or_real_clusters(tmp_path):
    out = await console(tmp_path, "--drill", "xid-storm", "--redis", "redis://127.0.0.1:1/0", env={})
    assert out.returncode == 2
    assert "--drill" in out.stderr and "--redis" in out.stderr and "Traceback" not in out.stderr
