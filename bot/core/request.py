"""Typed requests and outcomes: what every way in is turned into."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from enum import Enum
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from bot import redact
from bot.core.grammar import control_problem, secret_refusal
from bot.ids import SYSTEM_ACTOR

__all__ = ["SYSTEM_ACTOR", "Command", "IncidentView", "Outcome", "Refusal", "Request", "Source"]


class Source(str, Enum):
    slash = "slash"
    button = "button"
    modal = "modal"
    event = "event"
    scheduler = "scheduler"
    system = "system"  # Firebreak's own repair work (reconciling levers at start)
    alertmanager = "alertmanager"  # alerts from POST /alertmanager (bearer token checked at the edge)

    @property
    def is_system(self) -> bool:
        """Firebreak's own work: authenticated at its edge, not by a person's seat."""
        return self in (Source.scheduler, Source.system, Source.alertmanager)


class IncidentView(Protocol):
    """What the core (and levers) need of an incident: its id, SEV, channel and seats."""

    @property
    def id(self) -> str: ...

    @property
    def sev(self) -> int: ...

    @property
    def channel_id(self) -> str | None: ...

    @property
    def cells(self) -> list[str]: ...

    @property
    def is_open(self) -> bool: ...

    def holder(self, role: str) -> str | None: ...

    def holders(self, user: str) -> list[str]: ...


# What a free-text field is called in the one-line refusal ("That cause contains…"): ``text`` is
# the command's own text, so it takes the command's name.
_LABELS = {"threads": "handoff thread", "verify": "verification", "params": "parameter"}


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)


class Command(BaseModel):
    """Base of every typed command. ``name`` keys the policy and the registry.

    Every command, however it came in (typed, a form, a button, a timer), is checked here when it
    is built, before any handler sees it: no text field may hold a secret (the patterns of
    bot/redact.py, RE2, linear time), and no field but the ``prose`` ones may hold a control
    character (prose may span lines). So nothing with a secret is ever stored or reposted.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: ClassVar[str]
    # Fields of free prose (reasons, causes, updates, evidence): newlines and tabs allowed.
    prose: ClassVar[frozenset[str]] = frozenset()

    def subject_role(self) -> str | None:
        """For the "holder" rule: the role this command acts on, if any."""
        return None

    def label(self, field: str) -> str:
        return self.name if field == "text" else _LABELS.get(field, field.replace("_", " "))

    @model_validator(mode="before")
    @classmethod
    def _no_control_characters(cls, data: Any) -> Any:
        # Before any field's own check, so "the target has a control character (newline) at
        # position 5" is what is said, not a "not a name" that shows the newline.
        if isinstance(data, dict):
            for field, value in data.items():
                label = cls.name if field == "text" else _LABELS.get(str(field), str(field).replace("_", " "))
                for text in _strings(value):
                    if why := control_problem(label, text, prose=field in cls.prose):
                        raise PydanticCustomError("control_character", why)
        return data

    @model_validator(mode="after")
    def _safe_text(self) -> Command:
        fields = type(self).model_fields
        for field in fields:
            for text in _strings(getattr(self, field)):
                if kinds := redact.find(text):
                    raise PydanticCustomError("secret_text", secret_refusal(self.label(field), kinds))
        for field in fields:
            for text in _strings(getattr(self, field)):
                if why := control_problem(self.label(field), text, prose=field in self.prose):
                    raise PydanticCustomError("control_character", why)
        return self


def new_request_id() -> str:
    return uuid.uuid4().hex[:12]


class Request(BaseModel):
    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    command: Command
    actor: str  # the chat user id, or SYSTEM_ACTOR when source.is_system
    source: Source
    channel_id: str | None = None
    incident_id: str | None = None
    id: str = Field(default_factory=new_request_id)
    response_url: str | None = None
    trigger_id: str | None = None
    message_ts: str | None = None
    # The Slack team of a user from outside the app's own team or enterprise (a Slack Connect guest,
    # another organisation): they hold no seat (bot/core/authz.py). None: one of the app's own.
    other_team: str | None = None
    # A button's: the channel of the message it was pressed on (Slack's container.channel_id), so a
    # press can be held to the very message it must come from (an approval card).
    message_channel: str | None = None


class Outcome(BaseModel):
    """What came of a request: a reply for the actor and the audit detail."""

    result: str = "ok"  # ok | refused | error
    message: str = ""
    audit: dict[str, Any] = Field(default_factory=dict)
    incident_id: str | None = None

    @property
    def ok(self) -> bool:
        return self.result == "ok"

    @classmethod
    def refused(cls, message: str, **audit: Any) -> Outcome:
        return cls(result="refused", message=message, audit=audit)


class Refusal(Exception):
    """Raised inside a handler to refuse with a reason; nothing was changed."""

    def __init__(self, message: str, **audit: Any) -> None:
        super().__init__(message)
        self.message = message
        self.audit = audit
