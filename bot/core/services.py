"""Everything a handler may use, built once at start (bot/runtime.py) and passed in."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from bot.audit import AuditLog
from bot.chat import Chat
from bot.clock import Clock
from bot.clusters import Clusters
from bot.config import Settings
from bot.core.registry import Registry
from bot.core.request import IncidentView
from bot.policy import Policy
from bot.prom import PromQuery
from bot.scheduler import Scheduler
from bot.store import Redis

T = TypeVar("T")


class IncidentLookup(Protocol):
    """How the executor finds a request's incident (bot/incidents provides it)."""

    async def get(self, inc_id: str) -> IncidentView | None: ...

    async def by_channel(self, channel_id: str) -> str | None: ...


@dataclass
class Services:
    settings: Settings
    policy: Policy
    redis: Redis
    clock: Clock
    chat: Chat
    audit: AuditLog
    scheduler: Scheduler
    registry: Registry
    incidents: IncidentLookup
    # The fleet's Kubernetes clusters, by kube context (bot/runtime.py builds them from KUBECONFIG).
    clusters: Clusters
    # The one Prometheus client (bot/runtime.py builds it from settings); None: PROMETHEUS_URL is unset.
    prometheus: PromQuery | None = None
    # A client for another Prometheus, by its base URL (a KEDA trigger's serverAddress): PROMETHEUS_URL's own
    # client for that URL, else one that carries none of Firebreak's credentials (bot/runtime.py). None:
    # this app asks no other Prometheus.
    prometheus_at: Callable[[str], PromQuery] | None = None
    # What was opened and must be closed at app cleanup (bot/runtime.close), e.g. the kube clients.
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    _parts: dict[Any, Any] = field(default_factory=dict)

    def part(self, make: Callable[[Services], T]) -> T:
        """A capability's own component (a store, a client pool): one per app, made on first use."""
        got = self._parts.get(make)
        if got is None:
            got = self._parts[make] = make(self)
        return got  # one value per factory: what it made
