"""What a signed request's body must look like before Bolt and the listeners see it.

Bolt reads its bodies with ``body["actions"][0]``, ``body["view"]["callback_id"]``
and ``body.get("event", {}).get(...)``, and the listeners trust the fields they
read, so a signed body of the wrong shape (``actions: [null]``, ``view: null``,
``event: "x"``, a JSON list) raised inside Bolt and became a 500. Here the body
is parsed once and checked against the kinds Firebreak handles:

* a slash command (form-encoded, ``command`` /incident…, ``user_id``);
* an interactive ``payload=`` (a JSON object): ``block_actions`` or ``view_submission``
  with the fields the listeners read, of the types they expect;
* an Events API JSON object: ``url_verification`` with a ``challenge``, or
  ``event_callback`` with an ``event`` object. Event types Firebreak does not
  listen to, and ``app_rate_limited`` notices, are answered 200 and dropped:
  Slack retries any other answer.

Anything else is refused with the status and a short reason; nothing here raises.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import Enum
from typing import Any
from urllib.parse import parse_qsl

from bot.slack.events import EVENT_TYPES

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
    ignored = "ignored"  # signed and well-formed, but nothing Firebreak acts on


@dataclass(frozen=True)
class Inbound:
    kind: Kind
    body: dict[str, Any]
    text: str  # the raw body as text, for Bolt


class BadShape(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def _bad(reason: str) -> BadShape:
    return BadShape(400, reason)


_NONE = type(None)
# Top-level keys Bolt's context builder and middleware read, with the types they cope with
# (slack_bolt/request/internals.py: ``"id" in user``, ``authorizations[0].get``, ...).
_BOLT_READS: dict[str, tuple[type, ...]] = {
    "user": (str, dict, _NONE),
    "channel": (str, dict, _NONE),
    "team": (str, dict, _NONE),
    "enterprise": (str, dict, _NONE),
    "event": (dict,),
    "view": (dict,),
    "message": (dict,),
    "previous_message": (dict,),
    "container": (dict,),
    "item": (dict,),
    "assistant_thread": (dict,),
    "actions": (list,),
    "authorizations": (list,),
    "response_urls": (list,),
    "response_url": (str,),
    "trigger_id": (str,),
}


def _typed(obj: dict[str, Any], where: str) -> None:
    for key, types in _BOLT_READS.items():
        if key in obj and not isinstance(obj[key], types):
            raise _bad(f"{where}{key}_wrong_type")
    for key in ("authorizations", "response_urls"):
        if not all(isinstance(x, dict) for x in obj.get(key) or []):
            raise _bad(f"{where}{key}_wrong_type")


def _text(obj: dict[str, Any], key: str, where: str, required: bool = False) -> None:
    value = obj.get(key)
    if (value is None and required) or (value is not None and not isinstance(value, str)):
        raise _bad(f"{where}{key}_missing_or_not_text")


def _user_object(body: dict[str, Any]) -> None:
    user = body.get("user")
    if not isinstance(user, dict) or not isinstance(user.get("id"), str) or not user["id"]:
        raise _bad("user_missing")


def _command(fields: dict[str, str]) -> Inbound:
    _typed(fields, "")  # every value is text: keys Bolt reads as objects (event, view, ...) are refused
    if not COMMAND.match(fields.get("command", "")):
        raise _bad("not_a_firebreak_command")
    if not fields.get("user_id"):
        raise _bad("user_missing")
    return Inbound(Kind.command, dict(fields), "")


def _action(body: dict[str, Any]) -> Kind:
    _user_object(body)
    actions = body.get("actions")
    if not isinstance(actions, list) or not actions:
        raise _bad("actions_missing")
    for action in actions:
        if not isinstance(action, dict) or not isinstance(action.get("action_id"), str) or not action["action_id"]:
            raise _bad("action_malformed")
        _text(action, "value", "action.")
    for key in ("channel", "container"):
        if body.get(key) is not None and not isinstance(body[key], dict):
            raise _bad(f"{key}_wrong_type")
    _text(body.get("channel") or {}, "id", "channel.")
    _text(body.get("container") or {}, "message_ts", "container.")
    return Kind.action


def _view(body: dict[str, Any]) -> Kind:
    _user_object(body)
    view = body.get("view")
    if not isinstance(view, dict):
        raise _bad("view_missing")
    if not isinstance(view.get("callback_id"), str) or not view["callback_id"]:
        raise _bad("view.callback_id_missing")
    if view.get("type") != "modal":  # Bolt reads view.type (workflow steps); Firebreak opens only modals
        raise _bad("view.type_not_modal")
    _text(view, "private_metadata", "view.")
    blocks = view.get("blocks")
    if blocks is not None and not (isinstance(blocks, list) and all(isinstance(b, dict) for b in blocks)):
        raise _bad("view.blocks_wrong_type")
    state = view.get("state")
    if state is not None and not isinstance(state, dict):
        raise _bad("view.state_wrong_type")
    values = (state or {}).get("values")
    if values is not None and not (
        isinstance(values, dict)
        and all(isinstance(b, dict) and all(isinstance(a, dict) for a in b.values()) for b in values.values())
    ):
        raise _bad("view.state.values_wrong_type")
    return Kind.view


def _event(body: dict[str, Any]) -> Kind:
    event = body.get("event")
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        raise _bad("event_missing")
    _text(body, "event_id", "")
    if event["type"] not in EVENT_TYPES:
        return Kind.ignored
    _typed(event, "event.")
    if event.get("user") is not None and not isinstance(event["user"], str):
        raise _bad("event.user_wrong_type")
    _text(event, "subtype", "event.")  # looked up in a set of subtypes (bot/comms/watch.py)
    for inner in ("message", "previous_message"):
        if isinstance(event.get(inner), dict):
            _typed(event[inner], f"event.{inner}.")
    return Kind.event


_PAYLOADS = {"block_actions": _action, "view_submission": _view}


def _not_a_command(body: dict[str, Any]) -> None:
    # Bolt routes any body with a "command" to the slash-command listener, which reads user_id.
    if "command" in body:
        raise _bad("command_field_outside_a_command")


def _json(raw: str) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: "[[[[…" nested past Python's stack
        raise _bad("not_json") from None


def _payload(raw: str) -> Inbound:
    body = _json(raw)
    if not isinstance(body, dict):
        raise _bad("payload_not_an_object")
    _not_a_command(body)
    _typed(body, "")
    check = _PAYLOADS.get(body["type"]) if isinstance(body.get("type"), str) else None
    if check is None:
        raise _bad("payload_type_not_handled")
    return Inbound(check(body), body, "")


def _form(raw: str) -> Inbound:
    try:
        pairs = parse_qsl(raw, keep_blank_values=True, strict_parsing=True, max_num_fields=_MAX_FIELDS)
    except ValueError:
        raise _bad("form_malformed") from None
    fields = dict(pairs)
    if len(fields) != len(pairs):
        raise _bad("form_field_repeated")
    if "payload" in fields:
        return _payload(fields["payload"])
    return _command(fields)


def _events_api(raw: str) -> Inbound:
    body = _json(raw)
    if not isinstance(body, dict):
        raise _bad("body_not_an_object")
    _not_a_command(body)
    kind = body.get("type")
    if kind == "url_verification":
        _text(body, "challenge", "", required=True)
        return Inbound(Kind.url_verification, body, "")
    if kind == "app_rate_limited":  # Slack's notice that it is dropping events for a minute
        return Inbound(Kind.ignored, body, "")
    if kind != "event_callback":
        raise _bad("event_type_not_handled")
    _typed(body, "")
    return Inbound(_event(body), body, "")


def parse(raw: bytes, content_type: str) -> Inbound:
    """The body as one of the kinds Firebreak handles; raises BadShape (status, reason) otherwise."""
    try:
        text = raw.decode("utf-8")  # Slack sends UTF-8; anything else is not from Slack
    except UnicodeDecodeError:
        raise _bad("not_utf8") from None
    if not text:
        raise _bad("empty_body")
    if content_type == FORM:
        inbound = _form(text)
    elif content_type == JSON:
        inbound = _events_api(text)
    else:
        raise BadShape(415, "content_type_not_slack")
    return Inbound(inbound.kind, inbound.body, text)
