"""Typed requests and outcomes: what every way in is turned into."""

from __future__ import annotations

import uuid
from enum import Enum
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict, Field

from bot.ids import SYSTEM_ACTOR

__all__ = ["SYSTEM_ACTOR", "Command", "IncidentView", "Outcome", "Refusal", "Request", "Source"]


class Source(str, Enum):
    slash = "slash"
    button = "button"
    modal = "modal"
    event = "event"
    console = "console"
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


class Command(BaseModel):
    """Base of every typed command. ``name`` keys the policy and the registry."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: ClassVar[str]

    def subject_role(self) -> str | None:
        """For the "holder" rule: the role this command acts on, if any."""
        return None


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
