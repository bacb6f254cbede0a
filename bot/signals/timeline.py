"""How the `alerts` requests read on the postmortem's timeline (registered in capability.py)."""

from __future__ import annotations

from bot.core.timeline import CommandDetail, who


class AlertsSeen(CommandDetail):
    opened: bool = False
    sev: int | None = None
    ic: str | None = None


def alerts_seen(d: AlertsSeen, by: str) -> str | None:
    if not d.opened:
        return None  # the alerts themselves are on the timeline
    ic = f"IC {who(d.ic)}" if d.ic else "no IC on call"
    return f"Opened by Alertmanager as SEV{d.sev} ({ic})"
