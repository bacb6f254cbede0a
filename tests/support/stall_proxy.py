"""A TCP relay in front of a private redis-server that can freeze the server at an exact moment.

A stall that starts between a command's reads and its write is the case that matters (the
write then waits in the stopped server's socket buffer and runs when it resumes), and no sleep
can aim at it. The relay can: armed with some byte strings, it SIGSTOPs the server the moment
a chunk from the app contains all of them, then relays that chunk, so the write reaches a
server that is already stopped, exactly as it would if Redis had hung at that instant.
"""

from __future__ import annotations

import asyncio
import contextlib

from tests.support.redis_server import RedisServer


class StallProxy:
    def __init__(self, server: RedisServer) -> None:
        self.server = server
        self._srv: asyncio.Server | None = None
        self._armed: tuple[bytes, ...] | None = None
        self.frozen = asyncio.Event()
        self._pumps: set[asyncio.Task[None]] = set()

    async def start(self) -> StallProxy:
        self._srv = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        return self

    @property
    def url(self) -> str:
        assert self._srv is not None, "start() first"
        return f"redis://127.0.0.1:{self._srv.sockets[0].getsockname()[1]}/0"

    def freeze_before(self, *needles: bytes) -> None:
        """SIGSTOP the server just before relaying the first chunk that holds every needle (once)."""
        self.frozen.clear()
        self._armed = needles

    async def _relay(self, app_r: asyncio.StreamReader, app_w: asyncio.StreamWriter) -> None:
        try:
            srv_r, srv_w = await asyncio.open_connection("127.0.0.1", self.server.port)
        except OSError:
            app_w.close()
            return
        for task in (self._pump(app_r, srv_w, inspect=True), self._pump(srv_r, app_w, inspect=False)):
            t = asyncio.create_task(task)
            self._pumps.add(t)
            t.add_done_callback(self._pumps.discard)

    async def _pump(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, inspect: bool) -> None:
        try:
            while chunk := await src.read(65536):
                if inspect and self._armed and all(n in chunk for n in self._armed):
                    self._armed = None
                    self.server.freeze()
                    self.frozen.set()
                dst.write(chunk)
                await dst.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            # One side closed: close the other, as a direct connection would end.
            dst.close()

    async def close(self) -> None:
        if self._srv is not None:
            self._srv.close()
            await self._srv.wait_closed()
        for t in list(self._pumps):
            t.cancel()
        for t in list(self._pumps):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
