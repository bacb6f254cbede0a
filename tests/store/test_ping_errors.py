"""Issue 36 item 9: readiness's ping (bot/store/client.py) says "not ready" for what redis-py raises
when the store is down or slow, and lets anything else (a bug) surface instead of hiding it as
"Redis is down"."""

from __future__ import annotations

from typing import cast

import pytest

from bot.store.client import Redis, connect, ping
from tests.support.ports import free_port


async def test_a_store_that_is_not_there_is_not_ready():
    r = connect(f"redis://127.0.0.1:{free_port()}")
    try:
        assert await ping(r, timeout=2.0) is False
    finally:
        await r.aclose()


class _Buggy:
    async def ping(self) -> bool:
        raise TypeError("a bug, not a store that is down")


async def test_a_bug_is_raised_not_reported_as_the_store_down():
    with pytest.raises(TypeError, match="a bug"):
        await ping(cast(Redis, _Buggy()))
