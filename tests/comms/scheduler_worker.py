"""One Firebreak process running only the production scheduler loop, until stdin closes.

    python -m tests.comms.scheduler_worker REDIS_URL SLACK_API_URL

Prints "ready" once the loop runs. Used by the multi-process test on the real clock.
"""

from __future__ import annotations

import asyncio
import sys

from bot import logs
from bot.clock import SystemClock
from bot.config import load_settings
from bot.runtime import build_services


async def main(redis_url: str, slack_url: str) -> None:
    logs.configure(level="ERROR")
    settings = load_settings(
        slack_bot_token="xoxb-worker", slack_signing_secret="worker", slack_api_url=slack_url, redis_url=redis_url
    )
    svc = build_services(settings, SystemClock())
    loop = asyncio.create_task(svc.scheduler.run())
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    loop.cancel()
    await asyncio.gather(loop, return_exceptions=True)
    await svc.chat.close()
    await svc.redis.aclose()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
