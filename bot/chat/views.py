"""Plain view models: what a card says and which buttons it has, what a form asks.

They carry no platform detail. A button carries the typed command a press
becomes (``Press``); the chat surface decides how to put that on the wire and
turns a press back into the same command.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel


@dataclass(frozen=True)
class Press:
    """What pressing a button does: run ``command`` in ``incident`` (None: the channel's incident)."""

    command: BaseModel  # a bot.core Command; typed loosely so the port sits below the core
    incident: str | None = None


@dataclass(frozen=True)
class Confirm:
    title: str
    text: str
    confirm: str = "Confirm"
    deny: str = "Cancel"


@dataclass(frozen=True)
class Button:
    label: str
    press: Press
    style: Literal["primary", "danger"] | None = None
    confirm: Confirm | None = None


@dataclass(frozen=True)
class Header:
    text: str


@dataclass(frozen=True)
class Section:
    """A paragraph of markdown (``*bold*``, ``<@U1>`` mentions, code blocks)."""

    text: str


@dataclass(frozen=True)
class Fields:
    """Short labelled values shown side by side."""

    items: tuple[str, ...]


@dataclass(frozen=True)
class Context:
    """Small print under a card."""

    items: tuple[str, ...]


@dataclass(frozen=True)
class Buttons:
    """A row of buttons. ``key`` names the row (e.g. "handoff:INC-1") so an edit can find it."""

    key: str
    buttons: tuple[Button, ...]


Part = Header | Section | Fields | Context | Buttons


@dataclass(frozen=True)
class Card:
    parts: tuple[Part, ...]

    @classmethod
    def of(cls, *parts: Part) -> Card:
        return cls(tuple(parts))

    def buttons(self) -> list[Button]:
        return [b for p in self.parts if isinstance(p, Buttons) for b in p.buttons]


@dataclass(frozen=True)
class TextField:
    name: str  # the command field the value fills
    label: str
    multiline: bool = False
    max_length: int | None = None
    initial: str | None = None


@dataclass(frozen=True)
class Form:
    """A form whose submission becomes ``command`` (registered with ``Registry.form``)."""

    command: type[BaseModel]
    incident: str
    title: str
    submit: str
    intro: str = ""
    close: str = "Cancel"
    fields: tuple[TextField, ...] = field(default_factory=tuple)


class FieldError(ValueError):
    """Bad form input, shown on the field named ``field`` so the person keeps what they typed."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message
