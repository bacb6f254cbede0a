"""What a Slack request's body must look like for Bolt and the listeners: pydantic models.

Bolt builds its request with ``body["actions"][0]``, ``"id" in body["user"]``,
``body["authorizations"][0].get(...)`` and the like, so a body of the wrong shape
(``actions: [null]``, ``user: 5``, ``event: "x"``, a JSON list) raised inside Bolt and
became a 500. Here the body is parsed once, before Bolt, into the model of the kind
Firebreak handles:

* a slash command (form-encoded, ``command`` /incident…, ``user_id``);
* an interactive ``payload=`` (a JSON object): ``block_actions`` or ``view_submission``;
* an Events API JSON object: ``url_verification`` with a ``challenge``, ``app_rate_limited``,
  or ``event_callback`` with an ``event`` object.

Over Socket Mode the same kinds arrive as an envelope's payload, already JSON (``parse_envelope``).

Anything else raises BadShape with the status (400, or 415 for a content type Slack does not
send) and a short reason for the log line; nothing here raises anything else. The reason of a
field that fails is its dotted path and ``_wrong_type`` unless ``_REASONS`` names it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Any, Literal
from urllib.parse import parse_qsl

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic_core import ErrorDetails, PydanticCustomError

COMMAND = re.compile(r"^/incident")  # the slash command Bolt routes (bot/slack/app.py)
FORM = "application/x-www-form-urlencoded"
JSON = "application/json"
_MAX_FIELDS = 50  # a slash command has 14


class Kind(Enum):
    command = "command"
    action = "block_actions"
    view = "view_submission"
    event = "event_callback"
    url_verification = "url_verification"
    rate_limited = "app_rate_limited"  # Slack's notice that it drops events for a minute


class BadShape(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def _types(*types: type) -> BeforeValidator:
    """Only these Python types (before the field's own check, which may give another reason)."""

    def check(value: Any) -> Any:
        if not isinstance(value, types):
            raise PydanticCustomError("wrong_type", "not one of the types Bolt reads")
        return value

    return BeforeValidator(check)


_Ref = Annotated[Any, _types(str, dict, type(None))]  # Bolt reads `"id" in x` or takes x itself
_Text = str | None
_Obj = dict[str, Any]


class _Shape(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow", frozen=True)


class BoltReads(_Shape):
    """The keys Bolt's request and context builders read, at any depth they read them
    (slack_bolt/request/internals.py), with the types they cope with."""

    user: _Ref = None
    channel: _Ref = None
    team: _Ref = None
    enterprise: _Ref = None
    # Absent is fine; present, each must be an object (None included: Bolt does `.get` on it).
    event: Annotated[BoltReads | None, _types(dict)] = None
    view: Annotated[Any, _types(dict)] = None
    message: Annotated[BoltReads | None, _types(dict)] = None
    previous_message: Annotated[BoltReads | None, _types(dict)] = None
    container: Annotated[Any, _types(dict)] = None
    item: Annotated[BoltReads | None, _types(dict)] = None
    assistant_thread: Annotated[BoltReads | None, _types(dict)] = None
    actions: Annotated[list[Any], _types(list)] = []
    authorizations: list[BoltReads] = []
    response_urls: list[_Obj] = []
    response_url: str = ""
    trigger_id: str = ""


def _firebreak(command: str) -> str:
    if not COMMAND.match(command):
        raise ValueError("not /incident")
    return command


class SlashCommand(BoltReads):
    command: Annotated[str, AfterValidator(_firebreak)]
    user_id: Annotated[str, Field(min_length=1)]
    text: str = ""
    channel_id: _Text = None


class User(_Shape):
    id: Annotated[str, Field(min_length=1)]


class Action(_Shape):
    action_id: Annotated[str, Field(min_length=1)]
    value: _Text = None


class Channel(_Shape):
    id: _Text = None


class Container(_Shape):
    # The message the button was pressed on: an approval counts only from its own card (bot/approvals).
    message_ts: _Text = None
    channel_id: _Text = None


class BlockActions(BoltReads):
    type: Literal["block_actions"]
    user: Annotated[User, _types(str, dict, type(None))]
    actions: Annotated[list[Action], _types(list), Field(min_length=1)]
    channel: Channel | None = None
    container: Container = Container()


class State(_Shape):
    values: dict[str, dict[str, _Obj]] | None = None


class View(_Shape):
    callback_id: Annotated[str, Field(min_length=1)]
    type: Literal["modal"]  # Bolt reads view.type (workflow steps); Firebreak opens only modals
    private_metadata: _Text = None
    blocks: list[_Obj] | None = None
    state: State | None = None


class ViewSubmission(BoltReads):
    type: Literal["view_submission"]
    user: Annotated[User, _types(str, dict, type(None))]
    view: View


class Event(BoltReads):
    type: str


class EventCallback(BoltReads):
    type: Literal["event_callback"]
    event: Event
    event_id: _Text = None


class MessageEvent(Event):
    """The event Firebreak listens to (bot/slack/events.py); its fields as bot/comms/watch.py reads them."""

    user: _Text = None
    subtype: _Text = None  # looked up in a set of subtypes


class UrlVerification(BoltReads):
    type: Literal["url_verification"]
    challenge: str


class RateLimited(BoltReads):
    type: Literal["app_rate_limited"]


Model = SlashCommand | BlockActions | ViewSubmission | EventCallback | UrlVerification | RateLimited

# A failing field's reason when it is not "<dotted path>_wrong_type" ("*": any list index).
_REASONS: dict[tuple[str, ...], str] = {
    ("command",): "not_a_firebreak_command",
    ("user_id",): "user_missing",
    ("user",): "user_missing",
    ("actions",): "actions_missing",
    ("actions", "*"): "action_malformed",
    ("actions", "*", "value"): "action.value_missing_or_not_text",
    ("channel", "id"): "channel.id_missing_or_not_text",
    ("container", "message_ts"): "container.message_ts_missing_or_not_text",
    ("container", "channel_id"): "container.channel_id_not_text",
    ("view", "callback_id"): "view.callback_id_missing",
    ("view", "type"): "view.type_not_modal",
    ("view", "private_metadata"): "view.private_metadata_missing_or_not_text",
    ("view", "blocks"): "view.blocks_wrong_type",
    ("view", "state", "values"): "view.state.values_wrong_type",
    ("event", "type"): "event_missing",
    ("event_id",): "event_id_missing_or_not_text",
    ("event", "subtype"): "event.subtype_missing_or_not_text",
    ("challenge",): "challenge_missing_or_not_text",
}


def _reason(err: ErrorDetails, at: tuple[str, ...] = ()) -> str:
    loc = (*at, *err["loc"])
    dotted = ".".join(str(p) for p in loc if isinstance(p, str))
    if err["type"] == "wrong_type":  # a type Bolt cannot read: always that, whatever the field
        return f"{dotted}_wrong_type"
    path = tuple("*" if isinstance(p, int) else str(p) for p in loc)
    for n in range(len(path), 0, -1):
        if (reason := _REASONS.get(path[:n])) is not None:
            return reason
    return f"{dotted}_wrong_type"


def _validate(model: type[_Shape], body: Any, at: tuple[str, ...] = ()) -> Any:
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise BadShape(400, _reason(exc.errors()[0], at)) from None


@dataclass(frozen=True)
class Inbound:
    kind: Kind
    model: Model
    body: dict[str, Any]  # as parsed (Bolt's own parser misreads some commands: bot/slack/inbound.py)
    text: str  # HTTP: the raw body as text, as Bolt verifies it; Socket Mode: "" (nothing is signed)


def _bad(reason: str) -> BadShape:
    return BadShape(400, reason)


def _json_object(raw: str, reason: str) -> dict[str, Any]:
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: "[[[[…" nested past Python's stack
        raise _bad("not_json") from None
    if not isinstance(body, dict):
        raise _bad(reason)
    if "command" in body:  # Bolt routes any body with a "command" to the slash-command listener
        raise _bad("command_field_outside_a_command")
    return body


_PAYLOADS: dict[str, tuple[Kind, type[BlockActions | ViewSubmission]]] = {
    "block_actions": (Kind.action, BlockActions),
    "view_submission": (Kind.view, ViewSubmission),
}


def _command_or_payload(fields: dict[str, Any]) -> tuple[Kind, Model, dict[str, Any]]:
    """A slash command's fields, or an interactive ``payload`` (its JSON text) among them."""
    if "payload" not in fields:
        return Kind.command, _validate(SlashCommand, fields), fields
    if not isinstance(fields["payload"], str):
        raise _bad("payload_not_an_object")
    return _interactive(_json_object(fields["payload"], "payload_not_an_object"))


def _interactive(body: dict[str, Any]) -> tuple[Kind, Model, dict[str, Any]]:
    kind = body.get("type")
    found = _PAYLOADS.get(kind) if isinstance(kind, str) else None
    if found is None:
        raise _bad("payload_type_not_handled")
    return found[0], _validate(found[1], body), body


def _form(raw: str) -> tuple[Kind, Model, dict[str, Any]]:
    try:
        pairs = parse_qsl(raw, keep_blank_values=True, strict_parsing=True, max_num_fields=_MAX_FIELDS)
    except ValueError:
        raise _bad("form_malformed") from None
    fields = dict(pairs)
    if len(fields) != len(pairs):
        raise _bad("form_field_repeated")
    return _command_or_payload(fields)


def _events_api(body: dict[str, Any]) -> tuple[Kind, Model, dict[str, Any]]:
    if "command" in body:  # Bolt routes any body with a "command" to the slash-command listener
        raise _bad("command_field_outside_a_command")
    kind = body.get("type")
    if kind == "url_verification":
        return Kind.url_verification, _validate(UrlVerification, body), body
    if kind == "app_rate_limited":
        return Kind.rate_limited, _validate(RateLimited, body), body
    if kind != "event_callback":
        raise _bad("event_type_not_handled")
    model: EventCallback = _validate(EventCallback, body)
    if model.event.type == "message":
        _validate(MessageEvent, body["event"], at=("event",))
    return Kind.event, model, body


def decode(raw: bytes) -> str:
    """An HTTP body as text: Slack sends UTF-8; anything else is not from Slack."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _bad("not_utf8") from None


def parse(text: str, content_type: str) -> Inbound:
    """An HTTP body as one of the kinds Firebreak handles; raises BadShape (status, reason) otherwise."""
    if not text:
        raise _bad("empty_body")
    if content_type == FORM:
        kind, model, body = _form(text)
    elif content_type == JSON:
        kind, model, body = _events_api(_json_object(text, "body_not_an_object"))
    else:
        raise BadShape(415, "content_type_not_slack")
    return Inbound(kind, model, body, text)


# Socket Mode's envelope types (https://api.slack.com/apis/socket-mode) and what each payload holds.
SLASH_COMMANDS, INTERACTIVE, EVENTS_API = "slash_commands", "interactive", "events_api"


def parse_envelope(envelope_type: str, payload: Any) -> Inbound:
    """A Socket Mode envelope's payload (JSON already; Slack signs nothing on the socket: the
    connection's app-level token is the proof) as one of the kinds Firebreak handles; raises
    BadShape otherwise, as ``parse`` does for the same body over HTTP."""
    if not isinstance(payload, dict):
        raise _bad("payload_not_an_object")
    if envelope_type == SLASH_COMMANDS:
        if "payload" in payload:  # a command's fields are text; Bolt would read this as interactive
            raise _bad("payload_field_in_a_command")
        return Inbound(Kind.command, _validate(SlashCommand, payload), payload, "")
    if envelope_type == INTERACTIVE:
        if "command" in payload:
            raise _bad("command_field_outside_a_command")
        kind, model, body = _interactive(payload)
    elif envelope_type == EVENTS_API:
        kind, model, body = _events_api(payload)
    else:
        raise _bad("envelope_type_not_handled")
    return Inbound(kind, model, body, "")
