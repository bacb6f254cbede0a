"""Lever requests (REQ-<n>): the record and its states (stored by levers/store.py).

States: planned (dry-run; terminal), pending_approval, approved, denied,
expired, stale (target changed after approval), executing, done, failed,
undoing, undone. `executing` and `undoing` are in flight: the store keeps them
in one index, so a restart finds what a dead process left half-way.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

STATES = (
    "planned",
    "pending_approval",
    "approved",
    "denied",
    "expired",
    "stale",
    "executing",
    "done",
    "failed",
    "undoing",
    "undone",
)
OPEN_STATES = ("pending_approval", "approved", "executing", "done", "undoing")
IN_FLIGHT = ("executing", "undoing")


class LeverRequest(BaseModel):
    id: str
    incident: str
    lever: str
    target: str
    cell: str  # cell name, or "fleet"
    context: str  # the kube context it acts on
    params: dict[str, Any] = Field(default_factory=dict)
    requester: str
    state: str
    dry_run: bool = False
    plan: dict[str, Any] = Field(default_factory=dict)  # method, path, content_type, body, kubectl, calls, changes
    pre_state: dict[str, Any] = Field(default_factory=dict)
    digest: str = ""
    needs_approval: list[str] = Field(default_factory=list)
    grant_id: str | None = None
    budget_override: bool = False  # a budget breach that the approval covers
    notes: list[str] = Field(default_factory=list)
    created_at: float
    approved_by: str | None = None
    approved_at: float | None = None
    started_at: float | None = None
    finished_at: float | None = None
    undone_by: str | None = None
    undone_at: float | None = None
    result: dict[str, Any] = Field(default_factory=dict)  # ok, message, resource_version, verified, reason

    def ids(self) -> dict[str, str]:
        """What names the request in every audit entry and report about it."""
        return {"request": self.id, "lever": self.lever, "target": self.target, "cell": self.cell}

    @property
    def label(self) -> str:
        where = "fleet" if self.cell == "fleet" else self.cell
        return f"{self.id} {self.lever} {self.target} ({where})"
