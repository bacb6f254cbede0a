"""The registry: what each capability declares, filled by one call per capability.

bot/runtime.py lists the capabilities; each is a function ``register(reg)``
that declares its commands (typed, pressed, submitted or run by the system),
forms, scheduler jobs, request observers, start-up hooks, how its audit actions
read on the postmortem's timeline and the extension points it fills. Nothing
registers itself by being imported, so opening a capability's ``register``
shows everything it adds.
"""

from __future__ import annotations

import difflib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import ValidationError

from bot import redact
from bot.chat.text import quote
from bot.chat.views import FieldError
from bot.core.grammar import SecretText, Spec, UsageError, normalise, secret_refusal
from bot.core.request import Command, IncidentView, Outcome, Request
from bot.core.timeline import Detail, Line, command_action
from bot.policy.models import first_error

if TYPE_CHECKING:  # services.py holds a Registry: a real module cycle, for types only
    from bot.core.services import Services

C = TypeVar("C", bound=Command)
I = TypeVar("I", bound=IncidentView)  # noqa: E741 - the incident type a capability's handlers take
F = TypeVar("F")
D = TypeVar("D", bound=Detail)
G = TypeVar("G")
G_co = TypeVar("G_co", covariant=True)

# A handler gets its own command type and, when the route needs one, the incident (never None).
Handler = Callable[["Services", Request, C, I], Awaitable[Outcome]]
# Outside an incident channel there is none: such a handler takes the core's view, or None.
AnywhereHandler = Callable[["Services", Request, C, "IncidentView | None"], Awaitable[Outcome]]
# A command family's own policy rule, run inside the one policy check: a denial, or None, or
# Allowed(what it found) for a handler that needs the answer (DecidingRule, Registry.command_decided).
Rule = Callable[["Services", Request, Any], Awaitable["str | Allowed[Any] | None"]]
DecidingRule = Callable[["Services", Request, Any], Awaitable["str | Allowed[G]"]]
# Such a handler also gets what its rule found (e.g. the grant a pull is allowed under).
DecidedHandler = Callable[["Services", Request, C, I, G], Awaitable[Outcome]]
Call = Callable[["Services", Request, Any, "Allowed[Any] | None"], Awaitable[Outcome]]
# After every finished request (svc, request, outcome, incident id): keep derived state in step.
Observer = Callable[["Services", Request, Outcome, "str | None"], Awaitable[None]]
StartHook = Callable[["Services"], Awaitable[None]]
JobHandler = Callable[["Services", Any], Awaitable[None]]  # (svc, bot.scheduler.Job)
# A form's own check after a quick look at state (the form stays open with the error on a field).
FormCheck = Callable[["Services", Any, "str | None"], Awaitable["FieldError | None"]]
FormParse = Callable[[dict[str, str]], Command]
# An HTTP way in of a capability's own (a webhook): svc -> an aiohttp handler (bot/server.py mounts it).
WebHandlerFactory = Callable[["Services"], Callable[[Any], Awaitable[Any]]]


@dataclass(frozen=True)
class Route:
    name: str
    model: type[Command]
    call: Call
    spec: Spec | None  # None: not typed by people (a button, a form, a timer, an event)
    summary: str
    needs_incident: bool = True
    rule: Rule | None = None
    ack: Callable[[Any], str] | None = None  # what the immediate ack says, if anything


@dataclass(frozen=True)
class FormSpec:
    """A form's submission -> its command. ``parse`` raises FieldError for bad input."""

    command: type[Command]
    parse: FormParse
    check: FormCheck | None = None


@dataclass(frozen=True)
class Allowed(Generic[G_co]):
    """A rule's yes with what it found, returned from the policy check and handed to the handler
    as a value (never left in ambient state for a later call to read)."""

    found: G_co


class Hook(Generic[F]):
    """A named extension point two or more capabilities listen on. The capability that calls it
    declares it; others add to it in their ``register``. Only a key: the functions live in the
    app's Registry. One listener is a Port, not a Hook (tests/core/test_extension_points.py)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Hook({self.name!r})"


class Port(Generic[F]):
    """A typed dependency exactly one capability provides: the consumer declares it, the provider's
    ``register`` passes its function in (``reg.provide``), so a lower layer calls a higher one
    without importing it. Not provided: the consumer does without it."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Port({self.name!r})"


@dataclass
class Registry:
    routes: dict[str, Route] = field(default_factory=dict)
    forms: dict[type[Command], FormSpec] = field(default_factory=dict)
    jobs: dict[str, JobHandler] = field(default_factory=dict)
    observers: list[Observer] = field(default_factory=list)
    startup: list[StartHook] = field(default_factory=list)
    http: list[tuple[str, str, WebHandlerFactory]] = field(default_factory=list)
    # Left out of repr: rendering ~50 lines' models in every logged traceback's locals costs seconds.
    timelines: dict[str, Line[Any]] = field(default_factory=dict, repr=False)
    _hooks: dict[str, list[Any]] = field(default_factory=dict)
    _ports: dict[str, Any] = field(default_factory=dict)

    # Commands ---------------------------------------------------------------------------------

    def command(
        self,
        model: type[C],
        handler: Handler[C, I],
        *,
        spec: Spec | None = None,
        summary: str = "",
        rule: Rule | None = None,
        ack: Callable[[C], str] | None = None,
    ) -> None:
        """A command that runs inside an incident: the handler gets the incident, never None."""
        self._add(model, lambda svc, req, cmd, inc, _: handler(svc, req, cmd, inc), spec, summary, True, rule, ack)

    def command_anywhere(
        self,
        model: type[C],
        handler: AnywhereHandler[C],
        *,
        spec: Spec | None = None,
        summary: str = "",
        rule: Rule | None = None,
    ) -> None:
        """A command that also works outside an incident channel (declare, help)."""
        self._add(model, lambda svc, req, cmd, inc, _: handler(svc, req, cmd, inc), spec, summary, False, rule, None)

    def command_decided(
        self,
        model: type[C],
        handler: DecidedHandler[C, I, G],
        *,
        rule: DecidingRule[G],
        spec: Spec | None = None,
        summary: str = "",
        ack: Callable[[C], str] | None = None,
    ) -> None:
        """An incident command whose handler needs its rule's answer (e.g. which grant allowed a
        lever pull): the rule returns Allowed(found), and the handler gets ``found``."""

        async def decided(svc: Services, req: Request, cmd: C, inc: I, allowed: Allowed[Any] | None) -> Outcome:
            if not isinstance(allowed, Allowed):
                raise RuntimeError(f"{model.name} request {req.id} reached its handler without its rule's decision")
            return await handler(svc, req, cmd, inc, allowed.found)

        self._add(model, decided, spec, summary, True, rule, ack)

    def _add(
        self,
        model: type[C],
        run: Callable[[Services, Request, C, Any, Allowed[Any] | None], Awaitable[Outcome]],
        spec: Spec | None,
        summary: str,
        needs_incident: bool,
        rule: Rule | None,
        ack: Callable[[C], str] | None,
    ) -> None:
        if model.name in self.routes:
            raise RuntimeError(f"command {model.name!r} registered twice")

        async def call(svc: Services, req: Request, inc: Any, allowed: Allowed[Any] | None) -> Outcome:
            if not isinstance(req.command, model):
                raise TypeError(f"{model.name} route got {type(req.command).__name__}")
            return await run(svc, req, req.command, inc, allowed)

        self.routes[model.name] = Route(model.name, model, call, spec, summary, needs_incident, rule, ack)

    def form(self, command: type[C], parse: Callable[[dict[str, str]], C], check: FormCheck | None = None) -> None:
        """A form whose submission becomes ``command`` (which is also registered as a command)."""
        self.forms[command] = FormSpec(command, parse, check)

    # Jobs, observers, start-up ----------------------------------------------------------------

    def job(self, kind: str, handler: JobHandler) -> None:
        if kind in self.jobs:
            raise RuntimeError(f"job kind {kind!r} registered twice")
        self.jobs[kind] = handler

    def observe(self, observer: Observer) -> None:
        self.observers.append(observer)

    def on_start(self, hook: StartHook) -> None:
        """Run once when a scheduler loop starts, before its first tick (retried until it succeeds)."""
        self.startup.append(hook)

    def web(self, method: str, path: str, make: WebHandlerFactory) -> None:
        """An HTTP endpoint (e.g. a webhook). Its handler must still turn what it gets into typed
        requests for the executor: the endpoint authenticates, ``dispatch.execute`` decides."""
        self.http.append((method, path, make))

    # The postmortem's timeline ----------------------------------------------------------------

    def timeline(self, action: str | type[Command], detail: type[D], render: Callable[[D, str], str | None]) -> None:
        """How an audit action this capability writes reads on the timeline (bot/core/timeline.py):
        ``action`` is the entry's action, or a command registered here (its `command.<name>` entry).
        ``render(detail, by)`` is pure: the line, or None when the entry is no event."""
        name = action if isinstance(action, str) else command_action(action.name)
        if name in self.timelines:
            raise RuntimeError(f"timeline line for {name!r} registered twice")
        self.timelines[name] = Line(name, detail, render)

    # Extension points -------------------------------------------------------------------------

    def add(self, hook: Hook[F], fn: F) -> None:
        self._hooks.setdefault(hook.name, []).append(fn)

    def hooked(self, hook: Hook[F]) -> list[F]:
        return list(self._hooks.get(hook.name, ()))

    def provide(self, port: Port[F], fn: F) -> None:
        if port.name in self._ports:
            raise RuntimeError(f"{port!r} provided twice: two providers make it a Hook")
        self._ports[port.name] = fn

    def provided(self, port: Port[F]) -> F | None:
        got: F | None = self._ports.get(port.name)
        return got

    # Typed text -------------------------------------------------------------------------------

    def typed(self) -> list[Route]:
        return [r for r in self.routes.values() if r.spec is not None]

    def parse(self, text: str) -> Command:
        """`/incident <text>` -> a typed command, or UsageError with what to type.

        The whole text is scanned for secrets first (RE2, bot/redact.py): a secret anywhere is
        refused in one line naming its kind, so no usage line, audit reason or echo repeats any of
        it. Its field, when the command parses, names it ("That reason contains…")."""
        text = normalise(text)
        if len(text) > redact.MAX_SCAN:
            raise UsageError(
                f"That command is {len(text):,} characters; Firebreak takes at most {redact.MAX_SCAN:,}. "
                "Put the details in a document and paste its link."
            )
        kinds = redact.find(text)
        try:
            cmd = self._parse(text)
        except SecretText:
            raise
        except UsageError:
            if not kinds:
                raise
            raise SecretText(self._secret(text, kinds), kinds) from None
        if kinds:  # in no field of the command (a word it ignores): refused all the same
            raise SecretText(self._secret(text, kinds), kinds)
        return cmd

    def _secret(self, text: str, kinds: list[str]) -> str:
        head = text.partition(" ")[0].lower()
        return secret_refusal(f"`{head}` command" if head in self.routes else "command", kinds)

    def _parse(self, text: str) -> Command:
        head, _, rest = text.partition(" ")
        name = head.lower() or "help"
        r = self.routes.get(name)
        if r is None or r.spec is None:
            raise UsageError(f"Unknown command `{quote(head[:30])}`. {self._suggest(name)}")
        data = r.spec.parse(rest)
        try:
            return r.model.model_validate(data, context={"commands": [t.name for t in self.typed()]})
        except ValidationError as exc:
            if exc.errors()[0]["type"] == "secret_text":
                raise SecretText(first_error(exc).message, redact.find(text)) from None
            raise UsageError(_validation_message(exc, r.spec), r.spec.usage) from None

    def _suggest(self, name: str) -> str:
        close = difflib.get_close_matches(name, [r.name for r in self.typed()], n=1, cutoff=0.6)
        return f"Did you mean `{close[0]}`? (`/incident help` lists them)" if close else "Try `/incident help`."


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
        return f"`{label} {quote(str(given)[:30])}`: needs {_EXAMPLE[err.type]}."
    if err.type == "string_too_short":
        return f"{label.strip('<>').capitalize()} is too short: at least {ctx.get('min_length')} characters."
    if err.type == "string_too_long":
        return (
            f"{label.strip('<>').capitalize()} is {len(str(given))} characters; keep it under "
            f"{ctx.get('max_length')} (put details in the channel)."
        )
    if err.type == "value_error" or not label:
        text = err.message  # our validators name the value themselves
        return text if text.endswith(".") else text + "."
    return f"{label} {err.message.removeprefix('Input ')}."
