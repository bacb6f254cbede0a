"""Run the real Firebreak app over HTTP against fakes, for tests and benchmarks."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from aiohttp import web

from bot.clock import Clock, ManualClock
from bot.config import load_settings
from bot.core.services import Services
from bot.runtime import build_runtime
from tests.fakes.slack import FakeSlack, SlackSender

SECRET = "test-signing-secret"
TOKEN = "xoxb-test-token"


@dataclass
class RunningApp:
    url: str
    services: Services
    runner: web.AppRunner
    sender: SlackSender
    slack: FakeSlack

    @property
    def clock(self) -> Any:
        return self.services.clock

    async def stop(self) -> None:
        await self.runner.cleanup()
        await self.services.redis.aclose()


async def start_app(
    slack: FakeSlack, redis_url: str, clock: Clock | None = None, **settings: Any
) -> RunningApp:
    s = load_settings(
        slack_bot_token=TOKEN, slack_signing_secret=SECRET, slack_api_url=slack.api_url, redis_url=redis_url,
        **settings,
    )
    rt = build_runtime(s, clock=clock or ManualClock(), redis=aioredis.from_url(redis_url, decode_responses=True))
    runner = web.AppRunner(rt.web)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    url = f"http://127.0.0.1:{port}"
    return RunningApp(url, rt.services, runner, SlackSender(url, SECRET), slack)
