"""After-ack work, run by a fixed number of workers in arrival order.

# Why not Bolt's lazy listeners: Bolt starts one unbounded task per request, so a burst (an
# alert storm, fifty people typing) puts every request's Redis and Slack work in front of
# the next ack on the one event loop and past Slack's rate limits; a few workers do not.
#
# Why the workers give way to acks: an ack is due within Slack's hard 3 s, after-ack work
# is not, and both share one event loop. So a worker does not start a job while an HTTP
# request is being read and answered (bot/server.py counts them), unless the job has
# already waited GIVE_WAY_S: under sustained load the acks come first, and the work is
# late by at most that, never starved.

The queue lives in memory like Bolt's tasks: the request was acknowledged, and a
crash before it ran loses it either way; at shutdown (bot/serve.py) ``close`` lets
everything queued run, within the grace.

A job runs with the log context of the code that submitted it (the request
id and incident, bound by the listener), so its lines and the lane's own
``after_ack_failed`` carry them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import structlog

from bot import logs

log = logs.get(__name__)

WORKERS = 8
DRAIN_S = 10.0  # at app cleanup, how long queued work may still run (serve's shutdown drains first)
GIVE_WAY_S = 0.2  # the longest a queued job waits for the acks in progress to be answered

_Job = tuple[Callable[[], Awaitable[None]], dict[str, Any], float]


class Lane:
    def __init__(self, workers: int = WORKERS, give_way: float = GIVE_WAY_S) -> None:
        self._n = workers
        self._give_way = give_way
        self._queue: asyncio.Queue[_Job] | None = None
        self._workers: list[asyncio.Task[None]] = []
        self._pending = 0
        self._acking = 0
        self._no_acks: asyncio.Event | None = None  # set while no ack is in progress

    @contextlib.contextmanager
    def acking(self) -> Iterator[None]:
        """Around an HTTP request from its read to its answer: jobs wait to start meanwhile."""
        if self._no_acks is None:
            self._no_acks = asyncio.Event()
        self._acking += 1
        self._no_acks.clear()
        try:
            yield
        finally:
            self._acking -= 1
            if self._acking == 0:
                self._no_acks.set()

    @property
    def acks_in_progress(self) -> int:
        return self._acking

    def submit(self, job: Callable[[], Awaitable[None]], **context: Any) -> None:
        """Queue ``job``; it runs with the submitter's log context plus ``context``."""
        if self._queue is None:  # started on first use: the queue belongs to the running loop
            self._queue = asyncio.Queue()
            self._workers = [asyncio.create_task(self._work()) for _ in range(self._n)]
        loop = asyncio.get_running_loop()
        self._queue.put_nowait((job, {**structlog.contextvars.get_contextvars(), **context}, loop.time()))
        self._pending += 1

    @property
    def pending(self) -> int:
        """Jobs submitted and not finished (queued or running)."""
        return self._pending

    async def _work(self) -> None:
        assert self._queue is not None
        while True:
            job, context, queued = await self._queue.get()
            try:
                await self._after_acks(queued)
                with structlog.contextvars.bound_contextvars(**context):
                    try:
                        await job()
                    except asyncio.CancelledError:
                        task = asyncio.current_task()
                        if task is not None and task.cancelling():
                            log.warning("after_ack_cut_short")  # the grace ran out at shutdown
                            raise  # this worker is being stopped (close)
                        log.warning("after_ack_cancelled")  # one request's work was cancelled; the worker goes on
                    except Exception:  # one request's failure never stops a worker; logged whole
                        log.exception("after_ack_failed")
            finally:
                self._pending -= 1
                self._queue.task_done()

    async def _after_acks(self, queued: float) -> None:
        """Until no ack is in progress, or the job queued at ``queued`` has waited its bound."""
        if self._no_acks is None or not self._acking:
            return
        wait = queued + self._give_way - asyncio.get_running_loop().time()
        if wait > 0:
            with contextlib.suppress(TimeoutError):  # waited its bound: it runs now, acks or not
                await asyncio.wait_for(self._no_acks.wait(), wait)

    async def drain(self) -> None:
        """Wait until everything submitted so far has run (tests: "nothing more happened")."""
        if self._queue is not None:
            await self._queue.join()

    async def close(self, timeout: float = DRAIN_S) -> None:
        """Let everything submitted run for up to ``timeout`` seconds, then stop the workers."""
        if self._queue is not None:
            try:
                await asyncio.wait_for(self._queue.join(), timeout)
            except TimeoutError:
                log.warning("after_ack_dropped", pending=self.pending)
        for t in self._workers:
            t.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
        self._queue, self._workers, self._pending = None, [], 0
        if not self._acking:  # the event belongs to this loop; a restarted app gets a new one
            self._no_acks = None
