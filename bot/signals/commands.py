"""The typed request a delivery becomes: one per alert group (a cell's pages, or its security alerts).

Never typed by people: the scheduler's delivery job (jobs.py) sends it, as Alertmanager
(``Source.alertmanager``), with the incident the group feeds, or none when it opens one.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from bot.core.request import Command
from bot.signals.models import Alert


class Alerts(Command):
    """One delivery's alerts for one group. The alerts themselves stay out of the audit's
    arguments (the entry says what changed; the incident keeps every alert)."""

    name: ClassVar[str] = "alerts"
    prose: ClassVar[frozenset[str]] = frozenset({"summary"})  # redacted, not refused (jobs.py)
    delivery: str = Field(max_length=64)
    group: str = Field(max_length=80)
    cell: str = Field(max_length=64)
    security: bool = False
    received_at: float
    count: int = Field(ge=0)  # alerts of the group in this delivery
    unlabelled: int = Field(default=0, ge=0)  # of those, how many had no usable `cell` label
    truncated: int = Field(default=0, ge=0)  # alerts Alertmanager left out of the delivery
    summary: str = Field(default="", exclude=True)  # commonAnnotations.summary (the title)
    alerts: tuple[Alert, ...] = Field(default=(), exclude=True)
    token: str = Field(default="", exclude=True)  # the group lock held for this request (store.py)
