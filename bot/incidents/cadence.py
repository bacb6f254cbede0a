"""Comms cadence rules: when the next update is due. Pure functions.

A SEV raise moves the due inside Redis (scripts.SEV_RAISE), from the stored state.
"""
from __future__ import annotations

from bot.policy.models import CadencePolicy


def first_due(declared_at: float, sev: int, policy: CadencePolicy) -> float:
    return declared_at + policy.first_update_minutes.get(sev, policy.interval_minutes[sev]) * 60


def next_due_after_update(updated_at: float, sev: int, policy: CadencePolicy) -> float:
    return updated_at + policy.interval_minutes[sev] * 60
