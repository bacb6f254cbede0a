"""Comms cadence rules: when the next update is due. Pure functions."""
from __future__ import annotations

from bot.policy.models import CadencePolicy


def first_due(declared_at: float, sev: int, policy: CadencePolicy) -> float:
    return declared_at + policy.first_update_minutes.get(sev, policy.interval_minutes[sev]) * 60


def next_due_after_update(updated_at: float, sev: int, policy: CadencePolicy) -> float:
    return updated_at + policy.interval_minutes[sev] * 60


def due_after_raise(
    current_due: float | None, now: float, last_update_at: float | None, declared_at: float, new_sev: int,
    policy: CadencePolicy,
) -> float:
    """A raise pulls the due time in when the new interval is shorter; never pushes it out."""
    anchor_due = (
        next_due_after_update(last_update_at, new_sev, policy)
        if last_update_at is not None
        else first_due(declared_at, new_sev, policy)
    )
    if current_due is None:
        return anchor_due
    return min(current_due, max(anchor_due, now))
