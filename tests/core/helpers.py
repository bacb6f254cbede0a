"""Shared steps for the core tests: declare an incident, find its channel, read replies."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.harness import RunningApp

REPO = Path(__file__).resolve().parents[2]
IC, OPS, BOB, CAROL = "UIC", "UOPS", "UBOB", "UCAROL"


async def declare(app: RunningApp, title: str = "GPU hang in us-east", sev: int = 3, user: str = IC) -> str:
    """Declare; returns the new incident channel id (as Slack created it)."""
    out = await app.run(f"declare {title} --sev {sev} --cell us-east-3", user=user)
    assert "Declared INC-" in out, out
    created = app.slack.calls_to("conversations.create")[-1].args["name"]
    return app.slack.state.find_by_name(created).id


async def raw_incident(app: RunningApp, inc: str = "INC-1") -> dict[str, str]:
    return await app.services.redis.hgetall(f"fb:inc:{{{inc}}}")


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    """`python -m bot …` in a child process with a clean, explicit environment."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "REDIS_", "FIREBREAK_"))}
    return subprocess.run([sys.executable, "-m", "bot", *args], cwd=REPO, env={**base, **(env or {})},
                          capture_output=True, text=True, timeout=timeout)


def jsonl(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]
