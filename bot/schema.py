"""The version of the state in Redis, and the migrations that move it forward.

Redis holds ``fb:{schema}:version``: how many of the composition root's migrations
(bot/runtime.py MIGRATIONS, in order) the data has had. At start, before the process
serves or runs a timer, ``ensure`` brings the data to the code's version, once however
many replicas start together: one takes the lock and migrates, the others wait until the
version is there. A store written by a newer Firebreak (a version above the code's) is
refused: this code would misread it, and a rollback must not quietly corrupt state.

A migration is written to be run again safely (the lock can expire under a very slow one
and another replica then starts it over) and records nothing itself: the version moves
only after it finished. Each capability keeps its migrations beside its store.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from redis.exceptions import RedisError

from bot import logs
from bot.audit import AuditLog
from bot.ids import SYSTEM_ACTOR
from bot.store import Redis, script, write

log = logs.get(__name__)

VERSION_KEY = "fb:{schema}:version"
LOCK_KEY = "fb:{schema}:lock"
LOCK_MS = 120_000  # a replica that died mid-migration holds the lock this long at most
WAIT_S = 300.0  # how long a replica waits for another's migration before giving up
POLL_S = 0.2

# KEYS: lock, version. ARGV: token, version. Only the lock's holder moves the version, and only
# forward: a holder whose lock expired under a slow migration can't undo a later one's version.
# -> 1 moved, 0 not moved.
_ADVANCE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if tonumber(redis.call('GET', KEYS[2]) or '0') >= tonumber(ARGV[2]) then return 0 end
redis.call('SET', KEYS[2], ARGV[2])
return 1
"""

# KEYS: lock. ARGV: token. Only the holder releases.
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


@dataclass(frozen=True)
class Migration:
    """One step of the state. ``plan`` says what ``apply`` would change (lines for `firebreak
    migrate --dry-run`; empty: nothing to do); ``apply`` changes it, safe to run twice."""

    name: str
    plan: Callable[[Redis], Awaitable[list[str]]]
    apply: Callable[[Redis], Awaitable[int]]  # how many things it changed (logged)


def audited(audit: AuditLog) -> Done:
    """``ensure``'s ``done`` that writes each migration to the audit log, as the system."""

    async def done(n: int, m: Migration, changed: int) -> None:
        detail = {"version": n, "migration": m.name, "changed": changed}
        await audit.append("schema.migrated", actor=SYSTEM_ACTOR, detail=detail)

    return done


class SchemaTooNew(RuntimeError):
    """The store was written by a newer Firebreak."""


class MigrationTimeout(RuntimeError):
    """Another replica held the migration lock for longer than WAIT_S."""


async def version(r: Redis) -> int:
    raw = await r.get(VERSION_KEY)
    return int(raw) if raw is not None else 0


def _check(found: int, known: int) -> None:
    if found > known:
        raise SchemaTooNew(
            f"the state in Redis is schema version {found}, and this Firebreak knows versions up to {known}: "
            "it was written by a newer release. Run that release (or newer); this one refuses to start "
            "rather than misread it."
        )


async def pending(r: Redis, migrations: Sequence[Migration]) -> list[tuple[int, Migration]]:
    """The migrations the data has not had, numbered from 1 (SchemaTooNew when it is ahead)."""
    found = await version(r)
    _check(found, len(migrations))
    return [(n, m) for n, m in enumerate(migrations, start=1) if n > found]


async def dry_run(r: Redis, migrations: Sequence[Migration]) -> list[str]:
    """What `ensure` would do, as lines; changes nothing."""
    found = await version(r)
    _check(found, len(migrations))
    lines = [f"schema version in Redis: {found}; this Firebreak: {len(migrations)}"]
    todo = [(n, m) for n, m in enumerate(migrations, start=1) if n > found]
    if not todo:
        return [*lines, "nothing to migrate"]
    for n, m in todo:
        what = await m.plan(r)
        lines.append(f"{n}. {m.name}: " + ("; ".join(what) if what else "nothing to change (version only)"))
    return lines


Done = Callable[[int, "Migration", int], Awaitable[None]]  # version, migration, things changed


async def ensure(r: Redis, migrations: Sequence[Migration], done: Done | None = None) -> list[str]:
    """Bring the data to the code's version; the names of the migrations this process ran.
    ``done`` is told of each before its version is recorded (the caller audits it)."""
    known = len(migrations)
    deadline = time.monotonic() + WAIT_S
    token = secrets.token_hex(8)
    while True:
        found = await version(r)
        _check(found, known)
        if found == known:
            return []
        (got,) = await write(r, ("SET", LOCK_KEY, token, "NX", "PX", LOCK_MS))
        if got:
            break
        if time.monotonic() > deadline:
            raise MigrationTimeout(f"another process has held {LOCK_KEY} for over {WAIT_S:.0f} s; is it stuck?")
        await asyncio.sleep(POLL_S)
    ran: list[str] = []
    try:
        found = await version(r)  # another process may have finished just before we took the lock
        _check(found, known)
        for n, m in enumerate(migrations, start=1):
            if n <= found:
                continue
            started = time.monotonic()
            changed = await m.apply(r)
            # Audited before the version moves: a failure between the two runs the (re-runnable)
            # step again, so the entry may be written twice but never missed.
            if done is not None:
                await done(n, m, changed)
            if not await script(r, _ADVANCE)(keys=[LOCK_KEY, VERSION_KEY], args=[token, n]):
                raise MigrationTimeout(f"lost {LOCK_KEY} during migration {n} ({m.name}): another process took over")
            log.info(
                "schema_migrated",
                version=n,
                migration=m.name,
                changed=changed,
                seconds=round(time.monotonic() - started, 3),
            )
            ran.append(m.name)
    finally:
        try:
            await script(r, _RELEASE, deadline=False)(keys=[LOCK_KEY], args=[token])
        except RedisError as exc:  # the lock expires on its own; the error that brought us here matters more
            log.warning("schema_lock_release_failed", error=f"{type(exc).__name__}: {exc}")
    return ran
