"""The fault layer over the Slack emulator, which the tests switch on by using FakeSlack.

Each injected fault is queued per method and spent by the calls it answers, in this order: a delay
(then handled as usual), a 429 ``ratelimited`` with Retry-After, an HTTP 5xx with no Slack body,
a Slack error (``{"ok": false, "error": ...}``). Upload URLs can fail with a status or keep fewer
bytes than were sent. Nothing here changes what the model (server.SlackEmulator) answers otherwise.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from .server import SlackEmulator


class FakeSlack(SlackEmulator):
    """The Slack emulator with fault injection: ``fail_next``, ``rate_limit_next``, ``delay_next``…"""

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # SlackEmulator's
        super().__init__(*args, **kwargs)
        self._rate_limits: dict[str, list[int]] = {}  # method -> [times, retry_after]
        self._failures: dict[str, list[tuple[str, int]]] = {}
        self._http_errors: dict[str, list[int]] = {}  # method -> HTTP statuses its next calls answer
        self._delays: dict[str, list[float]] = {}  # method -> seconds its next calls wait before answering
        self._upload_failures: list[int] = []  # statuses the upload URL answers next
        self._upload_truncations: list[int] = []  # bytes the upload URL keeps of the next uploads

    # fault injection ------------------------------------------------------
    def rate_limit_next(self, method: str, times: int = 1, retry_after: int = 1) -> None:
        self._rate_limits[method] = [times, retry_after]

    def fail_next(self, method: str, error: str, times: int = 1) -> None:
        self._failures.setdefault(method, []).append((error, times))

    def http_error_next(self, method: str, status: int = 500, times: int = 1) -> None:
        """The next ``times`` calls to ``method`` answer HTTP ``status`` (a 5xx outage: no Slack
        error body, nothing done), after the rate limits and before the Slack errors."""
        self._http_errors.setdefault(method, []).extend([status] * times)

    def delay_next(self, method: str, seconds: float, times: int = 1) -> None:
        """The next ``times`` calls to ``method`` are answered ``seconds`` late (each on its own:
        calls that arrive together wait together), then handled as usual."""
        self._delays.setdefault(method, []).extend([seconds] * times)

    def fail_upload_next(self, status: int = 500, times: int = 1) -> None:
        """The next ``times`` POSTs to an upload URL answer ``status`` and keep no bytes."""
        self._upload_failures.extend([status] * times)

    def truncate_next_upload(self, keep: int) -> None:
        """The next upload keeps only its first ``keep`` bytes (a body cut short on the way), while
        answering as if all arrived: completeUploadExternal then finds the size mismatch."""
        self._upload_truncations.append(keep)

    # the emulator's hooks ---------------------------------------------------
    async def _fault(self, method: str) -> web.Response | None:
        delays = self._delays.get(method)
        if delays:
            await asyncio.sleep(delays.pop(0))
        limit = self._rate_limits.get(method)
        if limit and limit[0] > 0:
            limit[0] -= 1
            return web.json_response(
                {"ok": False, "error": "ratelimited"}, status=429, headers={"Retry-After": str(limit[1])}
            )
        statuses = self._http_errors.get(method)
        if statuses:
            return web.Response(status=statuses.pop(0), text="upstream error")
        failures = self._failures.get(method)
        if failures:
            error, times = failures[0]
            failures[0] = (error, times - 1)
            if times - 1 <= 0:
                failures.pop(0)
            return web.json_response({"ok": False, "error": error})
        return None

    def _upload_fault(self) -> web.Response | None:
        if self._upload_failures:
            return web.Response(status=self._upload_failures.pop(0), text="upload failed")
        return None

    def _received(self, data: bytes) -> bytes:
        return data[: self._upload_truncations.pop(0)] if self._upload_truncations else data
