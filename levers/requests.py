"""Lever requests (REQ-<n>): the record and its states (stored by levers/store.py).

States (LeverState): planned (dry-run; terminal), pending_approval, approved,
denied, expired, stale (target changed after approval), cancelled (its incident was
resolved before it ran), executing, done, failed, undoing, undone; and refused,
which is reported but never stored. `executing` and `undoing` are in flight: the
store keeps them in one index, so a restart finds what a dead process left half-way.
The lever audit actions are LeverEvent.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field


class LeverState(StrEnum):
    """A lever request's state. str-valued: Redis, the audit and the metrics hold these strings."""

    planned = "planned"  # a dry run: terminal
    pending_approval = "pending_approval"
    approved = "approved"
    denied = "denied"
    expired = "expired"
    stale = "stale"  # the target changed after it was planned (and approved)
    cancelled = "cancelled"  # its incident was resolved before it ran: it never will
    executing = "executing"
    done = "done"
    failed = "failed"
    undoing = "undoing"
    undone = "undone"
    # A pull a check refused. Never stored (a refused pull stores no request): only the grant
    # report of a pull under break-glass says it (levers/pull.py).
    refused = "refused"


STATES: tuple[LeverState, ...] = tuple(s for s in LeverState if s is not LeverState.refused)  # what Redis holds
IN_FLIGHT = (LeverState.executing, LeverState.undoing)


class LeverEvent(StrEnum):
    """The lever audit actions (`lever.<event>`), each written where the request moves."""

    apply = "apply"  # the write went out (its outcome, done / failed, follows)
    done = "done"
    failed = "failed"
    stale = "stale"
    undo = "undo"
    undo_failed = "undo_failed"
    undo_unsettled = "undo_unsettled"
    cancelled = "cancelled"  # resolved before it ran (pending approval, or approved and not yet run)

    @property
    def action(self) -> str:
        return f"lever.{self.value}"

    @classmethod
    def settled(cls, state: LeverState) -> LeverEvent:
        """The event of an execution that settled in ``state`` (done, failed, stale)."""
        return cls(state.value)


class LeverRequest(BaseModel):
    id: str
    incident: str
    lever: str
    target: str
    cell: str  # cell name, or "fleet"
    context: str  # the kube context it acts on
    params: dict[str, Any] = Field(default_factory=dict)
    requester: str
    state: LeverState
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
