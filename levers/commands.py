"""Typed lever commands: `lever`, `levers`, `undo`."""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from bot.chat import quote
from bot.core.request import Command
from bot.ids import CELL_NAME
from levers.catalogue import LEVERS

_REQ = re.compile(r"^REQ-[1-9][0-9]*$", re.IGNORECASE)


class PullLever(Command):
    name: ClassVar[str] = "lever"
    lever: str
    target: str = Field(min_length=1, max_length=300)
    cell: str | None = None
    dry_run: bool = False
    params: dict[str, str] = Field(default_factory=dict)
    # `override=budget`: go over a budget with a second person's approval instead of being refused.
    override: Literal["budget"] | None = None

    @model_validator(mode="before")
    @classmethod
    def _override_word(cls, data: Any) -> Any:
        if isinstance(data, dict) and "override" in (data.get("params") or {}):
            params = dict(data["params"])
            value = params.pop("override")
            if value != "budget":
                raise ValueError(f"override= takes `budget` (got `{quote(value[:20])}`)")
            data = {**data, "params": params, "override": value}
        return data

    @field_validator("lever")
    @classmethod
    def _known(cls, v: str) -> str:
        v = v.lower()
        if v not in LEVERS:
            raise ValueError(f"`{quote(v[:40])}` is not a lever; levers: {', '.join(LEVERS)} (see `/incident levers`)")
        return v

    @field_validator("cell")
    @classmethod
    def _cell(cls, v: str | None) -> str | None:
        if v is not None and not CELL_NAME.fullmatch(v):
            raise ValueError(f"`{quote(v[:30])}` is not a cell name (lowercase letters, digits, dashes: us-east-3)")
        return v


class ListLevers(Command):
    name: ClassVar[str] = "levers"


class Undo(Command):
    name: ClassVar[str] = "undo"
    request: str

    @field_validator("request")
    @classmethod
    def _req(cls, v: str) -> str:
        if not _REQ.fullmatch(v.strip()):
            raise ValueError(f"`{quote(v[:30])}` is not a request id: use the REQ-<n> from the lever's reply")
        return v.strip().upper()


class LeverSettle(Command):
    """Settle a request a dead process left executing or undoing (restart sweep and its timer; actor system)."""

    name: ClassVar[str] = "lever_settle"
    request: str = Field(pattern=_REQ.pattern)
