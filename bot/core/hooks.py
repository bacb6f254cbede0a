"""Extension points every capability may fill (declared here because more than one layer adds to them)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from bot.core.registry import Hook
from bot.core.request import IncidentView
from bot.core.services import Services

# A line for `/incident status` (open levers, pending approvals, grants), or None.
StatusLine = Callable[[Services, IncidentView], Awaitable["str | None"]]
STATUS_LINE: Hook[StatusLine] = Hook("status_line")
