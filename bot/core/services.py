"""Everything a handler may use, built once at start and passed in."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bot.audit import AuditLog
from bot.clock import Clock
from bot.config import Settings
from bot.incidents.repo import IncidentRepo
from bot.policy import Policy
from bot.slack.gateway import SlackGateway
from bot.store import Redis


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
