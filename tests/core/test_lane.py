"""The after-ack lane: one request's failure or cancellation never stops a worker."""

from __future__ import annotations

import asyncio

from bot.slack.lane import Lane


async def test_a_cancelled_or_failing_request_leaves_every_worker_running():
    lane = Lane(workers=1)  # one worker: if it died, nothing after the bad jobs would run
    ran: list[str] = []

    async def cancelled() -> None:
        raise asyncio.CancelledError

    async def broken() -> None:
        raise RuntimeError("handler bug")

    async def fine() -> None:
        ran.append("fine")

    for job in (cancelled, broken, fine):
        lane.submit(job)
    await asyncio.wait_for(lane.drain(), 5)
    assert ran == ["fine"]
    await lane.close()
