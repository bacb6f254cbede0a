"""Repairing orphaned intents: requests that stopped between their intent and their audit entry.

The dispatcher writes each request's intent before its handler runs, and the request's audit
entry closes it in the same script (bot/core/dispatch.py, bot/audit/chain.py). An intent still
open STALE_AFTER_S after it was written belongs to a request whose process died, or lost its
store, part-way: its effects may exist with no entry. The repair turns each into that request's
entry, `command.<name>` with `result: "interrupted"` and what is known (the arguments, what the
request noted it had made, what the incidents capability's INTERRUPTED repair found or put right), and
tells the person who ran it in a direct message (the one place that exists whatever the command
was: a declare may have no incident channel). So nothing that happened stays silent.

It runs at start and on a scheduler job every SWEEP_EVERY_S, so a live process repairs too.
STALE_AFTER_S is far longer than any request runs (each Redis call is bounded), so a live
replica's request is never taken for dead; the close is conditional on the intent being open,
so a request that finishes late, or a second replica repairing at once, writes no second entry.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from bot import logs
from bot.chat import ChatError
from bot.clock import hhmm, iso
from bot.core.intent_store import Intent, store
from bot.core.registry import Port, Registry
from bot.core.request import SYSTEM_ACTOR, Source
from bot.core.services import Services
from bot.scheduler import Job

log = logs.get(__name__)

JOB = "audit.intents"
JOB_KEY = "sweep"  # one pending sweep for the whole deployment
STALE_AFTER_S = 300.0
SWEEP_EVERY_S = 60.0
INTERRUPTED_REASON = "Firebreak stopped before it recorded this request's outcome (the process died or lost its store)"


@dataclass
class Recovered:
    """What a capability found or put right for an interrupted request of its own."""

    detail: dict[str, Any] = field(default_factory=dict)  # added to the entry's detail
    incident: str | None = None  # the incident the entry belongs to (e.g. the one a declare saved)
    say: str | None = None  # a sentence for the person who ran it


# INTERRUPTED(svc, intent) -> Recovered | None: the incidents capability's repair for its own
# commands (only declare needs one). It may act (declare archives a channel no incident claimed), so
# it must be safe to run twice: the intent is closed only after it has run, and if it raises the
# intent waits for the next sweep.
Recover = Callable[[Services, Intent], Awaitable["Recovered | None"]]
INTERRUPTED: Port[Recover] = Port("interrupted")


async def repair(svc: Services) -> int:
    """Turn every intent older than STALE_AFTER_S into its `interrupted` entry; how many were."""
    cutoff = svc.clock.now() - STALE_AFTER_S
    done = 0
    for intent in await store(svc).open_ones():
        if intent.started_at > cutoff:
            break  # oldest first: the rest are younger still
        with structlog.contextvars.bound_contextvars(
            request_id=intent.request_id, command=intent.command, incident=intent.incident
        ):
            try:
                done += await _repair_one(svc, intent)
            except Exception:  # one that cannot be repaired now waits for the next sweep
                log.exception("intent_repair_failed")
    return done


async def _repair_one(svc: Services, intent: Intent) -> int:
    recover = svc.registry.provided(INTERRUPTED)
    found = [got] if recover is not None and (got := await recover(svc, intent)) is not None else []
    detail: dict[str, Any] = {
        "source": intent.source,
        "args": intent.args,
        "result": "interrupted",
        "reason": INTERRUPTED_REASON,
        "started_at": iso(intent.started_at),
    }
    if intent.notes:
        detail["made"] = intent.notes
    for f in found:
        detail.update(f.detail)
    incident = next((f.incident for f in found if f.incident), intent.incident)
    if await store(svc).close(intent, incident=incident, detail=detail) is None:
        return 0  # it finished after all, or another replica repaired it first
    log.warning("intent_repaired", repaired_incident=incident)
    await _tell(svc, intent, incident, [f.say for f in found if f.say])
    return 1


async def _tell(svc: Services, intent: Intent, incident: str | None, said: list[str]) -> None:
    """A direct message to whoever ran it. Firebreak's own requests have nobody to tell, and an
    event's actor (who pasted a message) ran nothing."""
    source = Source(intent.source)
    if intent.actor == SYSTEM_ACTOR or source.is_system or source is Source.event:
        return
    where = f" in {incident}" if incident else ""
    text = " ".join(
        [
            f"Your `{intent.command}` request{where} (ref `{intent.request_id}`, {hhmm(intent.started_at)} UTC) "
            "was interrupted: Firebreak stopped before it recorded the outcome, so part of it may have "
            "happened. It is in the audit log as interrupted.",
            *said,
        ]
    )
    if not said:
        text += " Check `/incident status` for what took effect."
    try:
        await svc.chat.post(intent.actor, text)
    except ChatError as f:
        log.warning("intent_repair_not_told", error=f.error)


async def start(svc: Services) -> None:
    """At start: repair what is stale now, and keep the sweep going."""
    await svc.scheduler.schedule(JOB, JOB_KEY, svc.clock.now() + SWEEP_EVERY_S, {})
    await repair(svc)


async def sweep(svc: Services, job: Job) -> None:
    # The next sweep first, so a failing one never ends the chain.
    await svc.scheduler.schedule(JOB, JOB_KEY, svc.clock.now() + SWEEP_EVERY_S, {})
    await repair(svc)


def register(reg: Registry) -> None:
    """The core's own start-up repair and job (bot/runtime.py lists it with the capabilities)."""
    reg.job(JOB, sweep)
    reg.on_start(start)
