"""Redis: the connection (client.py), what REDIS_URL names (target.py), writes as scripts
(scripts.py) and the key layout (keys.py). Callers import from here."""

from bot.store.client import (
    COMMAND_TIMEOUT_S,
    GATE_OPEN_S,
    READY_TIMEOUT_S,
    Redis,
    StoreUnreachable,
    connect,
    options,
    ping,
    text,
)
from bot.store.keys import Keys
from bot.store.scripts import CrossSlot, DeadlinePassed, Script, Write, script, write
from bot.store.target import BadRedisUrl, Target, parse

__all__ = [
    "COMMAND_TIMEOUT_S",
    "GATE_OPEN_S",
    "READY_TIMEOUT_S",
    "BadRedisUrl",
    "CrossSlot",
    "DeadlinePassed",
    "Keys",
    "Redis",
    "Script",
    "StoreUnreachable",
    "Target",
    "Write",
    "connect",
    "options",
    "parse",
    "ping",
    "script",
    "text",
    "write",
]
