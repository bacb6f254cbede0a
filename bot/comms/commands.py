"""Typed comms commands beyond `update`: timers (system), buttons, and channel events."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from bot.core.request import Command

_DUE = r"^[0-9]+(\.[0-9]+)?(e\+?[0-9]+)?$"  # a due as the incident hash stores it


class Remind(Command):
    """The cadence reminder for one due time (scheduler)."""

    name: ClassVar[str] = "remind"
    due: str = Field(pattern=_DUE)
    late: bool = False


class Escalate(Command):
    """The update for ``due`` is overdue by the grace: tell the IC (scheduler). Repeated every
    interval (``round`` 2, 3, …) while the incident is active and no update came."""

    name: ClassVar[str] = "escalate"
    due: str = Field(pattern=_DUE)
    late: bool = False
    round: int = Field(default=1, ge=1, le=10_000)


class HandoffNudge(Command):
    """A handoff still not accepted: nudge the outgoing holder (scheduler)."""

    name: ClassVar[str] = "handoff_nudge"
    handoff: str = Field(pattern=r"^HO-[0-9]+$")


class Snooze(Command):
    """The reminder's "Snooze" button: push this due out by the policy's snooze."""

    name: ClassVar[str] = "snooze"
    due: str = Field(pattern=_DUE)


class UpdateForm(Command):
    """The reminder's "Post update" button: open the update modal."""

    name: ClassVar[str] = "update_form"


class SecretFlag(Command):
    """A message in the incident channel looked like it held a secret. Never carries the secret."""

    name: ClassVar[str] = "secret_flag"
    kinds: list[str] = Field(min_length=1)
    message_ts: str = Field(max_length=40)
