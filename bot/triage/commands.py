"""Typed triage commands: `/incident triage` and `/incident changed [--hours H]`."""

from __future__ import annotations

import math
from typing import ClassVar

from pydantic import Field, field_validator

from bot.chat import quote
from bot.core.request import Command

DEFAULT_HOURS = 6.0
MAX_HOURS = 72.0  # three days: further back, Kubernetes has dropped the events and most ReplicaSets


class Triage(Command):
    name: ClassVar[str] = "triage"


class Changed(Command):
    name: ClassVar[str] = "changed"
    hours: float = Field(default=DEFAULT_HOURS)

    @field_validator("hours", mode="before")
    @classmethod
    def _hours(cls, v: object) -> object:
        text = str(v).strip().lower().removesuffix("h")
        try:
            hours = float(text)
        except ValueError:
            raise ValueError(
                f"`--hours {quote(str(v)[:20])}` is not a number of hours: give one, e.g. `--hours 2` "
                f"(at most {MAX_HOURS:g}; default {DEFAULT_HOURS:g})"
            ) from None
        if not (0 < hours <= MAX_HOURS) or math.isnan(hours):
            raise ValueError(
                f"`--hours {quote(str(v)[:20])}` is out of range: look back more than 0 and at most "
                f"{MAX_HOURS:g} hours (default {DEFAULT_HOURS:g})"
            )
        return hours
