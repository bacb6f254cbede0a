"""Waiting for something to happen in a test: poll a condition until it holds or a deadline passes.

A fixed sleep either waits too long (slow tests) or too little (flaky tests); wait for the thing.
Sleeps that prove nothing happened during a window are the exception, and say why where they are.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def until(check: Callable[[], Awaitable[T] | T], timeout: float = 10.0, what: str = "", every: float = 0.02) -> T:
    """The first truthy value of ``check()`` (sync or async), polled every ``every`` seconds;
    AssertionError naming ``what`` if it is still falsy after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        got = check()
        if inspect.isawaitable(got):
            got = await got
        if got:
            return got  # type: ignore[return-value]
        if loop.time() >= deadline:
            raise AssertionError(f"not within {timeout:g} s: {what or check}; last value {got!r}")
        await asyncio.sleep(every)
