"""Incident domain models."""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, Field, field_validator


class Status(str, Enum):
    active = "active"
    mitigated = "mitigated"
    resolved = "resolved"


class RoleHolder(BaseModel):
    user: str
    since: float
    by: str


class Tenure(BaseModel):
    """One person's time in one role: who put them there and who ended it."""

    role: str
    user: str
    assumed_at: float
    assumed_by: str
    renounced_at: float | None = None
    renounced_by: str | None = None


class Incident(BaseModel):
    id: str
    number: int
    title: str
    sev: int = Field(ge=1, le=4)
    status: Status = Status.active
    channel_id: str | None = None
    channel_name: str
    card_ts: str | None = None
    declared_by: str
    declared_at: float
    detected_at: float
    mitigated_at: float | None = None
    resolved_at: float | None = None
    cells: list[str] = Field(default_factory=list)
    # The cells it had when it opened (declare or its alert): `scope add` never changes them. The IC
    # seat's `oncall` eligibility is judged against these, so an IC can't widen their own eligibility.
    # None: saved before this field existed (its cells then stand in).
    opened_cells: list[str] | None = None
    products: list[str] = Field(default_factory=list)
    regions: list[str] = Field(default_factory=list)
    last_update_at: float | None = None
    last_update_text: str | None = None
    next_update_due: float | None = None
    sev_reason: str | None = None
    # Opened by Alertmanager alerts (bot/signals): their group, a cell or "security:<cell>". None: declared.
    alert_group: str | None = None
    # A private channel (declare --private, or a security alert): only those invited see it, and
    # the stakeholder channel hears of it only from the IC's own updates.
    private: bool = False
    roles: dict[str, RoleHolder] = Field(default_factory=dict)

    @property
    def is_open(self) -> bool:
        return self.status is not Status.resolved

    @property
    def ic_cells(self) -> list[str]:
        """Where the on-call is IC-eligible for this incident (docs/security-model.md, "Eligibility")."""
        return self.opened_cells if self.opened_cells is not None else self.cells

    def holders(self, user: str) -> list[str]:
        return [r for r, h in self.roles.items() if h.user == user]

    def holder(self, role: str) -> str | None:
        h = self.roles.get(role)
        return h.user if h else None


class HandoffRecord(BaseModel):
    id: str
    incident: str
    role: str
    from_user: str | None
    to_user: str
    requested_by: str
    requested_at: float
    threads: list[str] = Field(default_factory=list)
    status: str = "pending"  # pending -> accepted | superseded (role moved on) | failed (never posted)
    message_ts: str | None = None
    accepted_at: float | None = None

    @field_validator("threads", mode="before")
    @classmethod
    def _lua_empty(cls, v: object) -> object:
        # Lua's cjson turns an empty list into {} on the way back.
        return [] if v == {} else v
