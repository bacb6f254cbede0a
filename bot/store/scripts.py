"""Writes: every state change is a Lua script registered through `script` (or `write`).

Three guards are put around a script's body, in this order:

- one slot: all of a call's keys must share a hash slot, checked here on every call, so a
  script that would fail on Redis Cluster fails every test on one Redis too;
- once (Sentinel, Cluster): the call carries an operation key, in its keys' slot, that holds its
  reply for a minute; a retry after a reply was lost to a failover gets that reply back instead
  of running the body again. So every write may be retried (client.py);
- a deadline: a write that reaches Redis after its caller gave up is refused there, not applied
  late (a stalled Redis's socket buffer).

On Sentinel the reply then waits for a replica (WAIT, on the same connection: WAIT counts the
writes of its own connection), so a write answered as done survives the master's loss.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from redis.crc import key_slot
from redis.exceptions import RedisError, ResponseError
from redis.typing import EncodableT, KeyT

from bot import logs
from bot.store.client import COMMAND_TIMEOUT_S, DEADLINE_MARGIN_S, Redis, options

log = logs.get(__name__)

OP_TTL_MS = 60_000  # an operation's reply is kept this long: longer than any retry of it

# The last KEYS is the operation key; the body sees KEYS without it.
_ONCE = """local fb_op = KEYS[#KEYS]
local KEYS = {unpack(KEYS, 1, #KEYS - 1)}
local fb_seen = redis.call('GET', fb_op)
if fb_seen then
  if fb_seen == 'n' then return nil end
  return cjson.decode(string.sub(fb_seen, 2))
end
"""
# The last ARGV is the deadline (Redis time, seconds); the body sees ARGV without it. Redis runs a
# script whole or not at all, so a refused one changed nothing.
_DEADLINE = """local fb_deadline = tonumber(ARGV[#ARGV])
local ARGV = {unpack(ARGV, 1, #ARGV - 1)}
local fb_now = redis.call('TIME')
if tonumber(fb_now[1]) + tonumber(fb_now[2]) / 1000000 > fb_deadline then
  return redis.error_reply('FB_DEADLINE reached Redis after its caller gave up; not applied')
end
"""
_DEADLINE_CODE = "FB_DEADLINE"


def _wrap(source: str, deadline: bool, once: bool) -> str:
    guard = (_ONCE if once else "") + (_DEADLINE if deadline else "")
    if not once:
        return guard + source
    # The body runs as a function so its reply can be kept ('n': none; 'j' + JSON otherwise:
    # status and error tables, arrays, numbers and strings come back as they were).
    return (
        guard
        + "local fb_reply = (function()\n"
        + source
        + f"\nend)()\nredis.call('SET', fb_op, fb_reply == nil and 'n' or ('j' .. cjson.encode(fb_reply)), "
        f"'PX', {OP_TTL_MS})\nreturn fb_reply\n"
    )


class CrossSlot(RuntimeError):
    """A script's keys span hash slots: it would fail on Redis Cluster. A bug, not an outage."""


class DeadlinePassed(RedisError):
    """Redis refused a write that reached it after its caller had given up: nothing was applied."""


def _tag(key: KeyT) -> str:
    """The part of ``key`` Redis hashes (its hash tag, else the whole key)."""
    k = key.decode() if isinstance(key, bytes) else str(key)
    start = k.find("{")
    if start >= 0:
        end = k.find("}", start + 1)
        if end > start + 1:
            return k[start + 1 : end]
    return k


def same_slot(keys: Sequence[KeyT]) -> None:
    if len({key_slot(k.encode() if isinstance(k, str) else bytes(k)) for k in keys}) > 1:  # type: ignore[arg-type]
        raise CrossSlot(f"keys in different hash slots (give them one hash tag): {list(keys)}")


async def _deadline(r: Redis) -> float:
    """When a write sent now must have run by, in Redis's clock: before its caller gives up."""
    o = options(r)
    if o is None:
        # The embedded store runs in this process, on this clock, and cannot stall apart from it
        # (a client not made by connect, as in one store's tests, is taken to share this clock).
        return time.time() + COMMAND_TIMEOUT_S - DEADLINE_MARGIN_S
    # With failover retries the caller gives up only when they are spent.
    return await o.clock.now(r) + o.command_timeout + o.failover_s - DEADLINE_MARGIN_S


class Script:
    """A Lua script registered through ``script``; called like redis-py's registered scripts:
    ``await s(keys=[...], args=[...])``."""

    def __init__(self, r: Redis, source: str, deadline: bool) -> None:
        self._r = r
        self._guarded = deadline
        o = options(r)
        self._once = o is not None and o.failover_s > 0
        self._wait = (o.wait_replicas, o.wait_ms) if o is not None and o.wait_replicas > 0 else None
        self._script = r.register_script(_wrap(source, deadline, self._once))

    async def __call__(self, keys: Sequence[KeyT] | None = None, args: Iterable[EncodableT] | None = None) -> Any:
        keys = list(keys or ())
        same_slot(keys)
        args = list(args or ())
        if self._once:
            keys.append(f"fb:{{{_tag(keys[0]) if keys else 'op'}}}:op:{uuid.uuid4().hex}")
        if self._guarded:
            args.append(repr(await _deadline(self._r)))
        try:
            if self._wait is None:
                return await self._script(keys=keys, args=args)
            return await self._replicated(keys, args, *self._wait)
        except ResponseError as e:
            if str(e).startswith(_DEADLINE_CODE):
                log.warning("store_write_refused_late")
                raise DeadlinePassed(str(e)) from None
            raise

    async def _replicated(self, keys: list[KeyT], args: list[EncodableT], replicas: int, ms: int) -> Any:
        async with self._r.pipeline(transaction=False) as p:
            await self._script(keys=keys, args=args, client=p)
            p.execute_command("WAIT", replicas, ms)
            reply, acked = await p.execute()
        if int(acked) < replicas:
            # Answered anyway: refusing would leave a write applied and reported as failed. It
            # stands on the master alone until a replica catches up (docs/operating.md: "What a failover may lose").
            log.warning("store_write_unreplicated", replicas=int(acked), wanted=replicas, wait_ms=ms)
        return reply


def script(r: Redis, source: str, deadline: bool = True) -> Script:
    """Register a Lua script that writes. Redis refuses it (DeadlinePassed, nothing applied) when
    it runs after its caller's timeout, e.g. when its bytes waited in a stalled Redis's socket
    buffer: a command is never applied after the person was told it failed. Plain commands go
    through ``write``.

    ``deadline=False`` only for a write that records what already happened outside Redis (a post
    made, a job done, the audit entry of a request): landing late then only brings Redis up to
    date, while refusing it would leave a stale "pending" behind (a reminder posted twice)."""
    return Script(r, source, deadline)


# Plain single-key commands applied together, atomically, under the same deadline. Each command
# is ARGV: its name, how many arguments follow its key, the arguments; its key is the next KEYS.
_WRITE = """
local out, i, k = {}, 1, 1
while i <= #ARGV do
  local n = tonumber(ARGV[i + 1])
  out[k] = redis.call(ARGV[i], KEYS[k], unpack(ARGV, i + 2, i + 1 + n))
  i, k = i + 2 + n, k + 1
end
return out
"""


Write = tuple[str, str, *tuple[EncodableT, ...]]  # (command, key, *args)


async def write(r: Redis, *commands: Write, deadline: bool = True) -> list[Any]:
    """Run ``(name, key, *args)`` commands as one script, under ``script``'s deadline rule; their
    replies in order. All keys must share a hash slot (Redis Cluster), as in a MULTI."""
    keys: list[KeyT] = []
    args: list[EncodableT] = []
    for name, key, *rest in commands:
        keys.append(key)
        args += [name, len(rest), *rest]
    return list(await script(r, _WRITE, deadline)(keys=keys, args=args))
