"""Shared steps for the core tests: who is who, the raw incident hash, the CLI in a child process.

Open an incident with ``app.declare`` (tests/support/harness.py); the core tests' usual one is
``app.declare(TITLE, sev=3, user=IC)``.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.harness import RunningApp, audit_entries, dump

REPO = Path(__file__).resolve().parents[2]
IC, OPS, BOB, CAROL = "UIC", "UOPS", "UBOB", "UCAROL"
TITLE = "GPU hang in us-east"  # the incident most core tests declare (its channel: inc-20261130-1-gpu-hang-in-us-east)


async def raw_incident(app: RunningApp, inc: str = "INC-1") -> dict[str, str]:
    return await app.services.redis.hgetall(f"fb:inc:{{{inc}}}")


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    """`python -m bot …` in a child process with a clean, explicit environment."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "REDIS_", "FIREBREAK_"))}
    return subprocess.run(
        [sys.executable, "-m", "bot", *args],
        cwd=REPO,
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def jsonl(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


async def cli(redis_url: str, *args: str) -> tuple[int, str, str]:
    """`python -m bot <args>` with REDIS_URL, as an operator runs it: exit code, stdout, stderr."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "REDIS_", "FIREBREAK_", "LOG_"))}
    env["REDIS_URL"] = redis_url
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        *args,
        cwd=REPO,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def nowhere(app: RunningApp, secret: str) -> None:
    """``secret`` is in no call Firebreak made to Slack, no reply, no audit entry, no Redis key."""
    assert secret not in dump([(c.method, c.args) for c in app.slack.calls]), "sent to Slack"
    assert secret not in dump([r.body for r in app.slack.responses]), "replied"
    assert secret not in dump(await audit_entries(app)), "audited"
    r = app.services.redis
    for key in await r.keys("*"):
        kind = await r.type(key)
        read = {
            "string": r.get,
            "list": lambda k: r.lrange(k, 0, -1),
            "hash": r.hgetall,
            "zset": lambda k: r.zrange(k, 0, -1),
            "set": r.smembers,
            "stream": lambda k: r.xrange(k),
        }.get(kind)
        if read is not None:
            assert secret not in dump(await read(key)), key
