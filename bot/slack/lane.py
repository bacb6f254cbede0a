"""After-ack work, run by a fixed number of workers in arrival order.

Bolt would start one task per request, so a burst (an alert storm, fifty
people typing at once) puts every request's Redis and Slack work in front
of the next request's ack on the one event loop. A few workers keep the
ack path short under load, and keep bursts of Slack calls under its rate
limits. The queue lives in memory like Bolt's tasks did: the request was
acknowledged, and a crash before it ran loses it either way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from bot import logs

log = logs.get(__name__)

WORKERS = 8
DRAIN_S = 10.0  # at shutdown, how long queued work may still run


class Lane:
    def __init__(self, workers: int = WORKERS) -> None:
        self._n = workers
        self._queue: asyncio.Queue[Callable[[], Awaitable[None]]] | None = None
        self._workers: list[asyncio.Task[None]] = []

    def submit(self, job: Callable[[], Awaitable[None]]) -> None:
        if self._queue is None:  # started on first use: the queue belongs to the running loop
            self._queue = asyncio.Queue()
            self._workers = [asyncio.create_task(self._work()) for _ in range(self._n)]
        self._queue.put_nowait(job)

    async def _work(self) -> None:
        assert self._queue is not None
        while True:
            job = await self._queue.get()
            try:
                await job()
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise  # this worker is being stopped (close)
                log.warning("after_ack_cancelled")  # one request's work was cancelled; the worker goes on
            except Exception:
                log.exception("after_ack_failed")
            finally:
                self._queue.task_done()

    async def drain(self) -> None:
        """Wait until everything submitted so far has run (tests: "nothing more happened")."""
        if self._queue is not None:
            await self._queue.join()

    async def close(self) -> None:
        if self._queue is not None:
            try:
                await asyncio.wait_for(self._queue.join(), DRAIN_S)
            except TimeoutError:
                log.warning("after_ack_dropped", pending=self._queue.qsize())
        for t in self._workers:
            t.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
        self._queue, self._workers = None, []
