"""A Lua script registered once per Redis client (registering hashes the source each time)."""
from __future__ import annotations

from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

if TYPE_CHECKING:
    from redis.commands.core import AsyncScript

    from bot.store import Redis


class Lua:
    def __init__(self, source: str) -> None:
        self.source = source
        self._by_client: WeakKeyDictionary["Redis", "AsyncScript"] = WeakKeyDictionary()

    def on(self, r: "Redis") -> "AsyncScript":
        script = self._by_client.get(r)
        if script is None:
            script = self._by_client[r] = r.register_script(self.source)
        return script
