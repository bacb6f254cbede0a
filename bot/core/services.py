"""Everything a handler may use, built once at start and passed in."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from bot.audit import AuditLog
from bot.clock import Clock
from bot.config import Settings
from bot.incidents.repo import IncidentRepo
from bot.policy import Policy
from bot.slack.gateway import SlackGateway
from bot.store import Redis

if TYPE_CHECKING:
    from bot.scheduler import Scheduler


@dataclass
class Services:
    settings: Settings
    policy: Policy
    redis: Redis
    clock: Clock
    slack: SlackGateway
    audit: AuditLog
    incidents: IncidentRepo
    # Capabilities that arrive with later work (kube clients, scheduler, Prometheus)
    # register themselves here by name so the core does not import them.
    extras: dict[str, Any] = field(default_factory=dict)
    # What such a capability opened and must close at app cleanup (bot/runtime._close), e.g. kube clients.
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    @property
    def scheduler(self) -> "Scheduler":
        """The durable timers (bot/scheduler), the one way to reach them."""
        return self.extras["scheduler"]
