"""The command registry: a command's typed model is its contract.

Each domain module registers its commands with ``@route``; the Slack surface,
the console, the webhook and the scheduler all look commands up here.
"""
from __future__ import annotations

import difflib
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


_EXAMPLE = {"float_parsing": "a number, e.g. 14.4", "int_parsing": "a whole number, e.g. 512"}


def _validation_message(exc: ValidationError, spec: Spec) -> str:
    """One plain line, naming the field the way it is typed (`--users-burn`, `<title>`)."""
    err = first_error(exc)
    name = str(err.loc[0]) if err.loc else ""
    label = spec.label(name) if name else ""
    raw = exc.errors()[0]
    given, ctx = raw.get("input"), raw.get("ctx") or {}
    if err.type == "missing" or (err.type == "string_too_short" and not str(given or "").strip()):
        return f"Missing {label}."
    if err.type in _EXAMPLE:
        return f"`{label} {str(given)[:30]}`: needs {_EXAMPLE[err.type]}."
    if err.type == "string_too_short":
        return f"{label.strip('<>').capitalize()} is too short: at least {ctx.get('min_length')} characters."
    if err.type == "string_too_long":
        return (f"{label.strip('<>').capitalize()} is {len(str(given))} characters; keep it under "
                f"{ctx.get('max_length')} (put details in the channel).")
    if err.type == "value_error" or not label:
        text = err.message  # our validators name the value themselves
        return text if text.endswith(".") else text + "."
    return f"{label} {err.message.removeprefix('Input ')}."


def parse(text: str) -> Command:
    """`/incident <text>` -> a typed command, or UsageError with what to type."""
    text = normalise(text)
    head, _, rest = text.partition(" ")
    name = head.lower()
    if not name:
        name = "help"
    r = ROUTES.get(name)
    if r is None or r.spec is None:
        raise UsageError(f"Unknown command `{head[:30]}`. {_suggest(name)}")
    data = r.spec.parse(rest)
    try:
        return r.model.model_validate(data)
    except ValidationError as exc:
        raise UsageError(_validation_message(exc, r.spec), r.spec.usage) from None


def _suggest(name: str) -> str:
    close = difflib.get_close_matches(name, [r.name for r in typed_commands()], n=1, cutoff=0.6)
    return f"Did you mean `{close[0]}`? (`/incident help` lists them)" if close else "Try `/incident help`."


def typed_commands() -> list[Route]:
    return [r for r in ROUTES.values() if r.spec is not None]
