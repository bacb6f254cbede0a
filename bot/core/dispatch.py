"""The executor: every request, from any way in, passes through `execute`.

Order: find the incident, one policy check, run the handler, one audit entry.
A handler refuses by raising Refusal; an unexpected error is logged with the
request id and answered with a short apology, never a stack trace.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable

import structlog

from bot import logs, metrics
from bot.core import authz
from bot.core.registry import ROUTES
from bot.core.request import Outcome, Refusal, Request

if TYPE_CHECKING:
    from bot.core.services import Services

log = logs.get(__name__)

# Observers of finished requests (svc, req, outcome, incident id): capabilities that keep
# derived state in step with the incident, e.g. comms timers after a SEV or status change.
AFTER: list[Callable[["Services", Request, Outcome, str | None], Awaitable[None]]] = []


def _args(req: Request) -> dict[str, Any]:
    return req.command.model_dump(mode="json")


async def execute(svc: "Services", req: Request) -> Outcome:
    route = ROUTES[req.command.name]
    started = time.perf_counter()
    inc_id = req.incident_id
    if inc_id is None and req.channel_id:
        inc_id = await svc.incidents.by_channel(req.channel_id)
    inc = await svc.incidents.get(inc_id) if inc_id else None
    with structlog.contextvars.bound_contextvars(request_id=req.id, incident=inc_id, command=route.name):
        if route.needs_incident and inc is None:
            outcome = Outcome.refused(
                f"`{route.name}` works inside an incident channel. "
                "Run it there, or start one with `/incident declare <title>`."
            )
        elif denial := await authz.authorize(svc, req, route, inc):
            outcome = Outcome.refused(denial)
        else:
            try:
                outcome = await route.handler(svc, req, inc)
            except Refusal as r:
                outcome = Outcome.refused(r.message, **r.audit)
            except Exception:  # noqa: BLE001 - answered, logged with the request id, and audited
                log.exception("handler_failed")
                outcome = Outcome(
                    result="error",
                    message=f"Something failed on Firebreak's side (ref `{req.id}`). "
                    "Nothing further was changed; try again or check `/incident status`.",
                )
        incident = outcome.incident_id or inc_id
        detail = {"source": req.source.value, "args": _args(req), "result": outcome.result}
        if outcome.result != "ok":
            detail["reason"] = outcome.message
        detail.update(outcome.audit)
        await svc.audit.append(
            f"command.{route.name}", actor=req.actor, incident=incident, detail=detail, request_id=req.id
        )
        metrics.REQUESTS.labels(route.name, outcome.result, req.source.value).inc()
        metrics.REQUEST_SECONDS.labels(route.name).observe(time.perf_counter() - started)
        log.info("request_done", result=outcome.result, source=req.source.value)
        for observe in AFTER:
            try:
                await observe(svc, req, outcome, incident)
            except Exception:  # noqa: BLE001 - the request is done and audited; observers self-heal
                log.exception("after_hook_failed", hook=getattr(observe, "__name__", "?"))
        return outcome
