"""`firebreak serve`: HTTP mode, or Socket Mode when SLACK_APP_TOKEN is set."""

from __future__ import annotations

import asyncio
import gc

from bot import logs
from bot.config import Settings
from bot.runtime import build_runtime
from bot.server import start_local

log = logs.get(__name__)


async def serve(settings: Settings, host: str, port: int) -> None:
    rt = build_runtime(settings)
    # Everything built so far (modules, models, policy) lives as long as the process: keep it
    # out of the cyclic collector's full passes, whose pauses otherwise land in the ack path.
    gc.freeze()
    runner, _ = await start_local(rt.web, host, port)
    # The one long-running worker: durable timers (every capability's jobs and start hooks).
    tasks = [asyncio.create_task(rt.services.scheduler.run())]
    socket_handler = None
    if settings.slack_app_token:
        from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

        socket_handler = AsyncSocketModeHandler(rt.bolt, settings.slack_app_token.get_secret_value())
        await socket_handler.connect_async()
        log.info("socket_mode_connected")
    log.info("serving", host=host, port=port, mode="socket" if socket_handler else "http")
    try:
        await asyncio.Event().wait()
    finally:
        for t in tasks:
            t.cancel()
        if socket_handler:
            await socket_handler.close_async()
        await runner.cleanup()
