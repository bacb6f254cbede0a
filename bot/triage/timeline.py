"""How `triage` and `changed` read on the postmortem's timeline (registered in capability.py)."""

from __future__ import annotations

from bot.core.timeline import CommandDetail


def triaged(_: CommandDetail, by: str) -> str:
    return f"Triage snapshot by {by}"


def asked_changed(_: CommandDetail, by: str) -> str:
    return f"What changed, asked by {by}"
