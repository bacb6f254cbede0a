"""What the reliability tests share besides the replicas: a fake cell, an observer on the shared
Redis (reads the stores the way the replicas wrote them), and small waits."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from bot.clock import Clock, SystemClock
from bot.config import load_settings
from bot.core.services import Services
from bot.runtime import build_services
from fbworld.kube import FakeKubeCluster
from tests.support.approvals import text_of  # noqa: F401 - re-exported for the reliability tests

T = TypeVar("T")

CELL = "us-east-3"
CQ_PATH = r"/clusterqueues/research-h100$"
OPS = "U0OPS"


def observer(redis_url: str, slack_api_url: str, policy: Path | None, clock: Clock | None = None) -> Services:
    """The app's own services on the replicas' Redis, serving nothing: the tests read lever records,
    ballots and the audit through the same store code. ``clock``: a ManualClock stands for later."""
    settings = load_settings(
        slack_bot_token="xoxb-observer",
        slack_signing_secret="observer",
        slack_api_url=slack_api_url,
        redis_url=redis_url,
        firebreak_policy_dir=policy,
    )
    return build_services(settings, clock or SystemClock())


async def close(svc: Services) -> None:
    await svc.chat.close()
    await svc.redis.aclose()


async def until(check: Callable[[], Awaitable[T | None] | T | None], timeout: float, what: str) -> T:
    """Poll ``check`` (sync or async) until it returns something truthy; that value."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if asyncio.iscoroutine(got):
            got = await got
        if got:
            return got  # type: ignore[return-value]
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
        await asyncio.sleep(0.05)


def writes(cell: FakeKubeCluster, path: str = CQ_PATH) -> list[Any]:
    """PATCHes that could store something (a dry run's dryRun=All stores nothing)."""
    return [r for r in cell.find_requests("PATCH", path) if r.query.get("dryRun") != "All"]


def has_button(message: dict[str, Any], action_id: str) -> bool:
    history = [message.get("blocks") or []] + [e.get("blocks") or [] for e in message.get("edits", [])]
    return any(el.get("action_id") == action_id for blocks in history for b in blocks for el in b.get("elements", []))
