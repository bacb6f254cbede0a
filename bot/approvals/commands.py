"""Typed approval commands: button presses, the break-glass request, and timers."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, field_validator, model_validator

from bot.core.request import Command
from bot.ids import GRANT_ID

BALLOT_ID = r"^(REQ|BG)-[1-9][0-9]*$"
_USAGE = "`/incident breakglass <scope> <minutes> <reason>` (e.g. `breakglass kueue-hold 30 ops lead unreachable`)"


class Approve(Command):
    """Approve on an approval card (lever.approve / breakglass.approve)."""

    name: ClassVar[str] = "approve"
    request: str = Field(pattern=BALLOT_ID)


class Deny(Command):
    name: ClassVar[str] = "deny"
    request: str = Field(pattern=BALLOT_ID)


class ApprovalSettle(Command):
    """Settle a request (scheduler, actor system): expire it when its window is over,
    or finish an approved lever that never ran (the deciding process died)."""

    name: ClassVar[str] = "approval_settle"
    request: str = Field(pattern=BALLOT_ID)


class BreakglassEnd(Command):
    """A grant's time ran out (the reaper, actor system)."""

    name: ClassVar[str] = "breakglass_end"
    grant: str = Field(pattern=GRANT_ID.pattern)


class Breakglass(Command):
    """`breakglass <scope> <minutes> <reason>` or `breakglass revoke <BG-n>`."""

    name: ClassVar[str] = "breakglass"
    prose: ClassVar[frozenset[str]] = frozenset({"reason"})
    scope: str | None = Field(default=None, max_length=300)
    minutes: int | None = None
    reason: str | None = Field(default=None, max_length=500)
    revoke: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _shape(cls, data: Any) -> Any:
        # The grammar gives <scope> and free text; the minutes are the first word of it.
        if not isinstance(data, dict) or "minutes" in data or "revoke" in data:
            return data
        scope = str(data.get("scope") or "")
        words = str(data.get("reason") or "").split(None, 1)
        if scope.lower() == "revoke":
            if len(words) != 1 or not GRANT_ID.fullmatch(words[0].upper()):
                raise ValueError("name the grant to end, like `/incident breakglass revoke BG-3`")
            return {"revoke": words[0].upper()}
        if not words:
            raise ValueError(f"say for how many minutes and why: {_USAGE}")
        if not words[0].isdigit():
            raise ValueError(f"`{words[0][:20]}` is not a number of minutes: {_USAGE}")
        if len(words) < 2:
            raise ValueError(f"give a reason after the minutes: {_USAGE}")
        return {"scope": scope, "minutes": int(words[0]), "reason": words[1]}

    @field_validator("minutes")
    @classmethod
    def _positive(cls, v: int | None) -> int | None:
        if v is not None and v < 1:
            raise ValueError("A grant lasts at least 1 minute")
        return v
