"""Typed policy: the rules as data (files in policies/).

Each file is one section; ``Policy`` is the whole, validated at start.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from bot.policy.roles import ROLES


class Strict(BaseModel):
    """Base of every policy model: unknown keys are refused (a typo is not silently ignored)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class FirstError(NamedTuple):
    loc: tuple[Any, ...]
    field: str  # the loc dotted ("" at top level)
    message: str  # pydantic's message without its "Value error, " prefix
    type: str


def first_error(exc: ValidationError) -> FirstError:
    """The first problem pydantic found: one clear line is shown, not the whole list."""
    err = exc.errors()[0]
    loc = tuple(err["loc"])
    return FirstError(loc, ".".join(str(p) for p in loc), str(err["msg"]).removeprefix("Value error, "), err["type"])


class BurnStep(Strict):
    sev: int = Field(ge=1, le=4)
    burn_at_least: float = Field(gt=0)


class GpuStep(Strict):
    sev: int = Field(ge=1, le=4)
    gpus_at_least: int = Field(gt=0)


class SeverityPolicy(Strict):
    """Minimum SEV per impact axis; the worst axis decides."""

    users: list[BurnStep]
    gpu_hours: list[GpuStep]
    gpu_hour_cost_usd: float = Field(default=2.0, ge=0)
    quality: int = Field(ge=1, le=4)
    security: int = Field(ge=1, le=4)
    floor: int = Field(default=4, ge=1, le=4)


class CommandRule(Strict):
    allowed: list[str]
    when_resolved: bool = False
    # Also answered for a user of another Slack team (a Slack Connect guest), who holds no seat.
    other_teams: bool = False

    @field_validator("allowed")
    @classmethod
    def _known(cls, v: list[str]) -> list[str]:
        bad = [w for w in v if w not in ROLES and w not in ("anyone", "holder", "receiver")]
        if bad:
            raise ValueError(f"unknown role(s) {bad}; roles are {', '.join(ROLES)} or anyone/holder/receiver")
        return v


class CommandsPolicy(Strict):
    commands: dict[str, CommandRule]


class CadencePolicy(Strict):
    first_update_minutes: dict[int, float] = Field(description="SEV -> minutes after declaration")
    interval_minutes: dict[int, float]
    escalate_after_minutes: float = Field(default=5, ge=0)
    snooze_minutes: float = Field(default=5, gt=0)
    handoff_nudge_minutes: float = Field(default=10, gt=0)

    @model_validator(mode="after")
    def _all_sevs(self) -> CadencePolicy:
        missing = [s for s in (1, 2, 3, 4) if s not in self.interval_minutes]
        if missing:
            raise ValueError(f"interval_minutes needs every SEV 1-4; missing {missing}")
        return self
