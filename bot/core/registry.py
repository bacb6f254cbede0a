"""The command registry: a command's typed model is its contract.

Each domain module registers its commands with ``@route``; the Slack surface,
the console, the webhook and the scheduler all look commands up here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Awaitable, Callable, Optional

from pydantic import ValidationError

from bot.core.grammar import Spec, UsageError, normalise
from bot.core.request import Command, Outcome, Request
from bot.policy.models import first_error

if TYPE_CHECKING:
    from bot.core.services import Services
    from bot.incidents.models import Incident

Handler = Callable[["Services", Request, Optional["Incident"]], Awaitable[Outcome]]
# Extra policy rule a command family brings (levers, approvals). Returns a denial or None.
Rule = Callable[["Services", Request, Optional["Incident"]], Awaitable[Optional[str]]]


@dataclass(frozen=True)
class Route:
    name: str
    model: type[Command]
    handler: Handler
    spec: Spec | None  # None: not typed by users (buttons, webhooks, timers)
    summary: str
    needs_incident: bool = True
    rule: Rule | None = None
    ack: Callable[[Command], str] | None = None  # what the immediate ack says, if anything


ROUTES: dict[str, Route] = {}


def route(
    model: type[Command],
    *,
    spec: Spec | None,
    summary: str = "",
    needs_incident: bool = True,
    rule: Rule | None = None,
    ack: Callable[[Command], str] | None = None,
) -> Callable[[Handler], Handler]:
    def deco(fn: Handler) -> Handler:
        if model.name in ROUTES:
            raise RuntimeError(f"command {model.name!r} registered twice")
        ROUTES[model.name] = Route(model.name, model, fn, spec, summary, needs_incident, rule, ack)
        return fn

    return deco


def _validation_message(exc: ValidationError) -> str:
    err = first_error(exc)
    if err.type == "missing":
        return f"Missing <{err.field}>."
    return f"{err.field}: {err.message}" if err.field else err.message


def parse(text: str) -> Command:
    """`/incident <text>` -> a typed command, or UsageError with what to type."""
    text = normalise(text)
    head, _, rest = text.partition(" ")
    name = head.lower()
    if not name:
        name = "help"
    r = ROUTES.get(name)
    if r is None or r.spec is None:
        raise UsageError(f"Unknown command `{head[:30]}`. Try `/incident help`.")
    data = r.spec.parse(rest)
    try:
        return r.model.model_validate(data)
    except ValidationError as exc:
        raise UsageError(_validation_message(exc), r.spec.usage) from None


def typed_commands() -> list[Route]:
    return [r for r in ROUTES.values() if r.spec is not None]
