"""The approvals policy section (policies/approvals.yaml)."""

from __future__ import annotations

from pydantic import Field, field_validator

from bot.policy.models import Strict
from bot.policy.roles import ROLES


def _seats(v: list[str]) -> list[str]:
    bad = [s for s in v if s not in ROLES]
    if bad:
        raise ValueError(f"unknown role(s) {bad}; roles are {', '.join(ROLES)}")
    if len(set(v)) != len(v):
        raise ValueError("a role is listed twice; each seat is one distinct approver")
    return v


class LeverApprovals(Strict):
    approvers: list[str] = Field(default_factory=lambda: ["ic"], min_length=1)
    window_minutes: float = Field(default=10, gt=0, le=24 * 60)

    _v = field_validator("approvers")(lambda cls, v: _seats(v))


class BreakglassPolicy(Strict):
    approvers: list[str] = Field(default_factory=lambda: ["ic"], min_length=1)
    sev1_approvers: list[str] = Field(default_factory=lambda: ["security"])
    window_minutes: float = Field(default=10, gt=0, le=24 * 60)
    max_minutes: int = Field(default=60, ge=1, le=24 * 60)
    # Besides the grantee (who may hand a grant back), who may end a grant early.
    revokers: list[str] = Field(default_factory=lambda: ["ic", "security"])

    _v = field_validator("approvers", "sev1_approvers", "revokers")(lambda cls, v: _seats(v))


class ApprovalsPolicy(Strict):
    lever: LeverApprovals = Field(default_factory=LeverApprovals)
    breakglass: BreakglassPolicy = Field(default_factory=BreakglassPolicy)
