"""The executor: every request, from any way in, passes through `execute`.

Order: find the incident, one policy check, run the handler, one audit entry.
A handler refuses by raising Refusal. Whatever fails, the person gets a short
answer with the request id (logged with it), never a stack trace, and the
answer says "nothing changed" only when that is true: when the failure came
before the handler ran (the store unreachable for the lookup or policy check).
"""

from __future__ import annotations

import time

import structlog
from redis.exceptions import RedisError

from bot import logs, metrics
from bot.core import authz, intent_store
from bot.core.registry import Route
from bot.core.request import SYSTEM_ACTOR, Command, IncidentView, Outcome, Refusal, Request, Source
from bot.core.services import Services
from bot.core.timeline import command_action

log = logs.get(__name__)

UNREACHABLE = "Firebreak can't reach its store (ref `{ref}`); nothing changed. Try again in a minute."
CHECK_FAILED = "Something failed on Firebreak's side (ref `{ref}`); nothing changed. Try again in a minute."


def _failed(req: Request, exc: Exception) -> Outcome:
    if isinstance(exc, RedisError):
        why = f"Firebreak lost its store part-way (ref `{req.id}`)"
    else:
        why = f"Something failed on Firebreak's side (ref `{req.id}`)"
    return Outcome(result="error", message=f"{why}; part of this may have happened: check `/incident status`.")


async def _decide(svc: Services, req: Request, route: Route, inc: IncidentView | None) -> Outcome:
    """Policy check and handler. Raises only when the check itself failed (nothing ran)."""
    if route.needs_incident and inc is None:
        return Outcome.refused(
            f"`{route.name}` works inside an incident channel. "
            "Run it there, or start one with `/incident declare <title>`."
        )
    decision = await authz.decide(svc, req, route, inc)
    if isinstance(decision, str):
        return Outcome.refused(decision)
    # Write intent first: the handler's effects and its audit entry are one recoverable unit. The
    # entry (_audit) closes the intent in the same script; one left open because the process died
    # or lost its store in between is repaired into an `interrupted` entry (bot/core/intents.py).
    # If the intent cannot be written, this raises before the handler: nothing ran.
    await intent_store.store(svc).open(
        req.id,
        command=route.name,
        args=req.command.model_dump(mode="json"),
        actor=req.actor,
        source=req.source.value,
        incident=inc.id if inc else None,
        started_at=svc.clock.now(),
    )
    try:
        return await route.call(svc, req, inc, decision)
    except Refusal as r:
        return Outcome.refused(r.message, **r.audit)
    except Exception as exc:  # the executor's boundary: any failure is a short reply with a ref, logged whole
        log.exception("handler_failed")
        return _failed(req, exc)


async def _audit(svc: Services, req: Request, route: Route, outcome: Outcome, incident: str | None) -> Outcome:
    detail: dict[str, object] = {
        "source": req.source.value,
        "args": req.command.model_dump(mode="json"),
        "result": outcome.result,
    }
    if outcome.result != "ok":
        detail["reason"] = outcome.message
    if req.other_team is not None:
        detail["other_team"] = req.other_team
    detail.update(outcome.audit)
    try:
        await svc.audit.append(
            command_action(route.name),
            actor=req.actor,
            incident=incident,
            detail=detail,
            request_id=req.id,
            intent=req.id,
        )
    except Exception:  # what was done stands; the reply says its audit entry is missing
        log.exception("audit_append_failed")
        note = f"(Firebreak could not write this to the audit log, ref `{req.id}`.)"
        return outcome.model_copy(update={"message": f"{outcome.message} {note}".strip()})
    return outcome


async def execute(svc: Services, req: Request) -> Outcome:
    route = svc.registry.routes[req.command.name]
    started = time.perf_counter()
    # `incident` is bound once known; bound_contextvars restores the caller's context on exit.
    with structlog.contextvars.bound_contextvars(request_id=req.id, command=route.name, incident=req.incident_id):
        try:
            inc_id = req.incident_id
            if inc_id is None and req.channel_id:
                inc_id = await svc.incidents.by_channel(req.channel_id)
            inc = await svc.incidents.get(inc_id) if inc_id else None
            structlog.contextvars.bind_contextvars(incident=inc_id)  # for the handler's own log lines
            outcome = await _decide(svc, req, route, inc)
        except Exception as exc:  # the same boundary before the handler: nothing ran, the reply says so
            log.exception("request_failed_before_handler")
            metrics.REQUESTS.labels(route.name, "error", req.source.value).inc()
            text = UNREACHABLE if isinstance(exc, RedisError) else CHECK_FAILED
            return Outcome(result="error", message=text.format(ref=req.id))
        incident = outcome.incident_id or inc_id
        outcome = await _audit(svc, req, route, outcome, incident)
        metrics.REQUESTS.labels(route.name, outcome.result, req.source.value).inc()
        metrics.REQUEST_SECONDS.labels(route.name).observe(time.perf_counter() - started)
        structlog.contextvars.bind_contextvars(incident=incident)
        log.info("request_done", result=outcome.result, source=req.source.value)
        for observe in svc.registry.observers:
            try:
                await observe(svc, req, outcome, incident)
            except Exception:  # an observer's failure never undoes or hides the outcome
                log.exception("after_hook_failed", hook=getattr(observe, "__name__", "?"))
        return outcome


class JobRetry(Exception):
    """Leave the job leased so the scheduler delivers it again (e.g. the chat was unreachable)."""


async def run_system(svc: Services, cmd: Command, inc_id: str, source: Source = Source.scheduler) -> None:
    """Firebreak's own work (a timer, a repair) as a request through the one executor.
    An error outcome raises JobRetry, so a job stays leased and is delivered again."""
    out = await execute(svc, Request(command=cmd, actor=SYSTEM_ACTOR, source=source, incident_id=inc_id))
    if out.result == "error":
        raise JobRetry(out.message)
