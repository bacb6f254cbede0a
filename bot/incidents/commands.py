"""Typed incident commands: the contract of each `/incident` subcommand."""

from __future__ import annotations

import re
from typing import ClassVar

from pydantic import Field, ValidationInfo, field_validator, model_validator

from bot.chat import person_of, quote, visible
from bot.core.request import Command
from bot.ids import CELL_NAME, HANDOFF_ID
from bot.policy.roles import ROLES

_SEV = re.compile(r"^(?:sev)?([1-4])$", re.IGNORECASE)


def _sev(v: object) -> object:
    if isinstance(v, str):
        m = _SEV.fullmatch(v.strip())
        if not m:
            raise ValueError(f"`{quote(v[:20])}` is not a SEV: use 1 (worst) to 4")
        return int(m.group(1))
    return v


def _user(v: object) -> str:
    uid = person_of(str(v))
    if uid is None:
        raise ValueError(f"`{quote(str(v)[:30])}` is not a Slack user: mention them, like @alex")
    return uid


def _role(v: object) -> str:
    r = str(v).lower()
    if r not in ROLES:
        raise ValueError(f"`{quote(str(v)[:20])}` is not a role: use one of {', '.join(ROLES)}")
    return r


class Declare(Command):
    name: ClassVar[str] = "declare"
    title: str = Field(min_length=3, max_length=200)
    sev: int = Field(default=3, ge=1, le=4)
    cell: list[str] = Field(default_factory=list)
    product: str | None = Field(default=None, max_length=80)
    region: str | None = Field(default=None, max_length=40)
    private: bool = False

    _sev_v = field_validator("sev", mode="before")(lambda cls, v: _sev(v))

    @field_validator("title", mode="before")
    @classmethod
    def _visible(cls, v: object) -> object:
        # Stored without bidi controls or zero-width characters: they reorder or hide what the card shows.
        return visible(v).strip() if isinstance(v, str) else v

    @field_validator("cell")
    @classmethod
    def _cells(cls, v: list[str]) -> list[str]:
        for c in v:
            if not CELL_NAME.fullmatch(c):
                raise ValueError(f"`{quote(c[:30])}` is not a cell name (lowercase letters, digits, dashes: us-east-3)")
        return list(dict.fromkeys(v))


class Sev(Command):
    name: ClassVar[str] = "sev"
    prose: ClassVar[frozenset[str]] = frozenset({"reason"})
    sev: int = Field(ge=1, le=4)
    reason: str = Field(min_length=1, max_length=500)

    _sev_v = field_validator("sev", mode="before")(lambda cls, v: _sev(v))


class Assess(Command):
    name: ClassVar[str] = "assess"
    users_burn: float | None = Field(default=None, ge=0, le=1e6)
    gpus: int | None = Field(default=None, ge=0, le=10_000_000)
    quality: bool = False
    security: bool = False

    @model_validator(mode="after")
    def _some_axis(self) -> Assess:
        if self.users_burn is None and self.gpus is None and not self.quality and not self.security:
            raise ValueError("give at least one axis: --users-burn X, --gpus N, --quality or --security")
        return self


class Role(Command):
    name: ClassVar[str] = "role"
    role: str
    user: str

    _role_v = field_validator("role", mode="before")(lambda cls, v: _role(v))
    _user_v = field_validator("user", mode="before")(lambda cls, v: _user(v))


class Handoff(Command):
    name: ClassVar[str] = "handoff"
    role: str
    user: str
    threads: list[str] = Field(default_factory=list)

    _role_v = field_validator("role", mode="before")(lambda cls, v: _role(v))
    _user_v = field_validator("user", mode="before")(lambda cls, v: _user(v))

    @field_validator("threads", mode="before")
    @classmethod
    def _split(cls, v: object) -> object:
        # --threads "a; b" may also be given more than once.
        if isinstance(v, list):
            return [t.strip() for item in v for t in str(item).split(";") if t.strip()]
        return v

    def subject_role(self) -> str | None:
        return self.role


class Accept(Command):
    """Pressing Accept on a handoff (a button, never typed)."""

    name: ClassVar[str] = "accept"
    handoff: str = Field(pattern=HANDOFF_ID.pattern)


class Update(Command):
    name: ClassVar[str] = "update"
    prose: ClassVar[frozenset[str]] = frozenset({"text"})
    text: str = Field(min_length=1, max_length=3000)


class Status(Command):
    name: ClassVar[str] = "status"


class Help(Command):
    name: ClassVar[str] = "help"
    topic: str | None = None

    @field_validator("topic")
    @classmethod
    def _known(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is None:
            return v
        # The registry parsing the text passes the typed command names (Registry.parse).
        names: list[str] = (info.context or {}).get("commands") or []
        if names and v.strip().lower() not in names:
            raise ValueError(f"`{quote(v[:30])}` is not a command; ask about one of: {', '.join(names)}")
        return v.strip().lower()


class ScopeAdd(Command):
    """`/incident scope add <cell>`: widen the incident to another cell (never narrower while open)."""

    name: ClassVar[str] = "scope"
    action: str
    cell: str

    @field_validator("action")
    @classmethod
    def _add(cls, v: str) -> str:
        if v.lower() != "add":
            raise ValueError(f"`{quote(v[:20])}`: a scope only grows while the incident is open: `scope add <cell>`")
        return "add"

    @field_validator("cell")
    @classmethod
    def _cell(cls, v: str) -> str:
        if not CELL_NAME.fullmatch(v):
            raise ValueError(f"`{quote(v[:30])}` is not a cell name (lowercase letters, digits, dashes: us-east-3)")
        return v


class Mitigated(Command):
    name: ClassVar[str] = "mitigated"


class Resolved(Command):
    name: ClassVar[str] = "resolved"
