"""Assemble the running app from settings: the composition root.

``CAPABILITIES`` is the one list of what Firebreak can do. Each entry is a
capability's ``register(reg)``: open it to see every command, button, form,
job, observer, start-up hook and extension it adds.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from prometheus_client.metrics import MetricWrapperBase
from pydantic_settings import BaseSettings
from slack_bolt.async_app import AsyncApp

from bot import logs, metrics, redact
from bot.approvals import capability as approvals
from bot.audit import AuditLog
from bot.audit import migrations as audit_migrations
from bot.audit.sign import Checkpointer, KeyFileError, load_private_key
from bot.chat import Chat
from bot.clock import Clock, SystemClock
from bot.clusters import Clusters
from bot.comms import capability as comms
from bot.config import ConfigError, KubeSettings, PrometheusSettings, Settings, SlackSettings
from bot.core import intents
from bot.core.registry import Registry
from bot.core.services import Services
from bot.incidents import capability as incidents
from bot.incidents.store import IncidentRepo
from bot.policy import load_policy
from bot.postmortem import capability as postmortem
from bot.prom import PromQuery
from bot.prom.connect import BasicAuth, BearerToken, Credentials, Prometheus
from bot.scheduler import Job, Scheduler
from bot.schema import Migration
from bot.server import UNSIGNED, build_web
from bot.signals import capability as signals
from bot.signals.remediation import capability as remediation_alarm
from bot.slack.app import build_bolt
from bot.slack.gateway import SlackGateway, make_client
from bot.slack.lane import Lane
from bot.store import Redis, connect
from bot.triage import capability as triage
from bot.version import user_agent
from levers import capability as levers
from levers import migrations as lever_migrations
from levers.catalogue import LEVERS
from levers.kube import Kube

# In this order: `/incident help` lists commands in the order they are registered.
CAPABILITIES: tuple[Callable[[Registry], None], ...] = (
    incidents.register,  # declare sev assess status mitigated resolved help role handoff accept
    comms.register,  # update, reminders and escalation, snooze, the update form, handoff nudges, secret flags
    levers.register,  # levers lever undo, lever settling, the open-levers status line
    approvals.register,  # breakglass, approve/deny, approval timers, grants for levers
    signals.register,  # POST /alertmanager: alerts open and join incidents, one summary per delivery
    remediation_alarm.register,  # the remediation alarm: GPU nodes fenced as unhealthy too fast for the cell
    triage.register,  # triage (the PromQL set per cell), changed (six streams of what changed)
    postmortem.register,  # postmortem, cause, action (AI-n and their due-date reminders)
    intents.register,  # the core's repair of requests interrupted between intent and audit entry
)

# The state's versions, in order: entry n takes Redis from schema version n-1 to n (bot/schema.py).
# Append only: a released entry is never edited, reordered or removed.
MIGRATIONS: tuple[Migration, ...] = (
    lever_migrations.MOVED_INDEX,  # 1: lever requests indexed by their latest move (`changed`)
    # 2: the audit log from a list to a hash by seq (issue 26)
    Migration(audit_migrations.BY_SEQ_NAME, audit_migrations.plan_by_seq, audit_migrations.apply_by_seq),
)


def build_registry() -> Registry:
    reg = Registry()
    for register in CAPABILITIES:
        register(reg)
    return reg


log = logs.get(__name__)


@dataclass
class Runtime:
    services: Services
    bolt: AsyncApp
    web: web.Application
    lane: Lane
    checkpoints: Checkpointer | None = None  # None: no FIREBREAK_AUDIT_KEY, the audit is only hash-chained


def _bound(svc: Services, fn: Callable[..., Awaitable[None]]) -> Any:
    """``fn`` with the services bound, keeping its name for the scheduler's logs."""
    return functools.update_wrapper(functools.partial(fn, svc), fn)


def build_services(
    settings: Settings, clock: Clock | None = None, redis: Redis | None = None, chat: Chat | None = None
) -> Services:
    policy = load_policy(settings.firebreak_policy_dir, levers=LEVERS)
    # The audit log and the logs scrub the policy's secret patterns as well as the built-in ones.
    redact.add_patterns((p.kind, p.pattern) for p in policy.comms.secret_patterns)
    r = redis if redis is not None else connect(settings.redis_url, ca_file=settings.redis_ca_file)
    clock = clock or SystemClock()
    audit = AuditLog(r, clock)
    registry = build_registry()
    svc = Services(
        settings=settings,
        policy=policy,
        redis=r,
        clock=clock,
        chat=chat or slack_gateway(settings),
        audit=audit,
        scheduler=Scheduler(r, clock, audit=audit, poll=settings.firebreak_scheduler_tick),
        registry=registry,
        incidents=IncidentRepo(r),
        clusters=(clusters := kube(settings, policy.levers.api_timeout_seconds)),
        prometheus=(prom := prometheus(settings)),
    )
    svc.closers.append(clusters.close)  # the clients' sessions, at app cleanup
    if prom is not None:
        svc.closers.append(prom.close)
    others = OtherPrometheus(settings, prom)
    svc.prometheus_at = others.at
    svc.closers.append(others.close)
    jobs: dict[str, Callable[[Job], Awaitable[None]]] = {k: _bound(svc, h) for k, h in registry.jobs.items()}
    svc.scheduler.bind(jobs, [_bound(svc, h) for h in registry.startup])
    return svc


def kube(settings: KubeSettings, api_timeout: float) -> Kube:
    """The app's one Kubernetes client, from KUBECONFIG: a client per context, made on first use, each
    call bounded by the policy's ``api_timeout_seconds``."""
    return Kube(settings.kubeconfig, api_timeout)


def prometheus(settings: PrometheusSettings) -> Prometheus | None:
    """The app's one Prometheus client, from PROMETHEUS_URL and its CA, credentials and timeout."""
    if not settings.prometheus_url:
        return None
    credentials: Credentials | None = None
    if settings.prometheus_bearer_token or settings.prometheus_bearer_token_file:
        credentials = BearerToken(settings.prometheus_bearer_token, settings.prometheus_bearer_token_file)
    elif settings.prometheus_username and settings.prometheus_password:
        credentials = BasicAuth(settings.prometheus_username, settings.prometheus_password)
    return Prometheus(
        settings.prometheus_url,
        ca_file=settings.prometheus_ca_file,
        credentials=credentials,
        timeout=settings.prometheus_timeout,
        user_agent=user_agent(),
    )


class OtherPrometheus:
    """Clients for Prometheus servers other than PROMETHEUS_URL, one per base URL, made on first use: a
    KEDA trigger's serverAddress (keda-pause's demand trend). PROMETHEUS_URL's credentials and CA are
    for PROMETHEUS_URL alone, so another URL gets neither (requests' default CA bundle); the same URL
    gets the app's own client. Addresses come from cluster objects, so their number is capped."""

    MAX = 32

    def __init__(self, settings: Settings, own: Prometheus | None) -> None:
        self._settings, self._own = settings, own
        self._clients: dict[str, Prometheus] = {}

    def at(self, url: str) -> PromQuery:
        base = url.rstrip("/")
        if self._own is not None and base == self._own.url:
            return self._own
        client = self._clients.get(base)
        if client is None:
            if len(self._clients) >= self.MAX:
                raise LookupError(f"Firebreak asks at most {self.MAX} other Prometheus servers")
            timeout = self._settings.prometheus_timeout
            client = self._clients[base] = Prometheus(base, timeout=timeout, user_agent=user_agent())
        return client

    async def close(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for c in clients:
            await c.close()


def slack_gateway(settings: SlackSettings) -> SlackGateway:
    """The app's one Slack Web API client, from SLACK_BOT_TOKEN and SLACK_API_URL."""
    token = settings.slack_bot_token.get_secret_value() if settings.slack_bot_token else ""
    return SlackGateway(make_client(token, settings.slack_api_url))


@dataclass(frozen=True)
class Integration:
    """One outbound integration's parts, as docs/contributing.md ("Add an outbound integration") lists them."""

    name: str
    port: type  # the Protocol the domain asks through, in the domain's terms
    settings: type[BaseSettings]  # its settings model: one of Settings' bases, its variables share a prefix
    build: Callable[..., object]  # builds its client from those settings, once, here in build_services
    metrics: tuple[MetricWrapperBase, ...]  # what it counts (bot/metrics.py)
    emulator: str  # its stand-in in world/ (fbworld is not the product: named here, never imported)


# Every service Firebreak calls out to. tests/test_integrations.py checks each one has every part.
INTEGRATIONS: tuple[Integration, ...] = (
    Integration("slack", Chat, SlackSettings, slack_gateway, (metrics.SLACK_API_ERRORS,), "fbworld.slack"),
    Integration("kubernetes", Clusters, KubeSettings, kube, (metrics.KUBE_API_ERRORS,), "fbworld.kube"),
    Integration(
        "prometheus",
        PromQuery,
        PrometheusSettings,
        prometheus,
        (metrics.PROMETHEUS_QUERY_ERRORS,),
        "fbworld.prometheus",
    ),
)


async def close(svc: Services, lane: Lane | None = None) -> None:
    if lane is not None:
        await lane.close()  # let acknowledged requests finish first
    await svc.chat.close()
    for closer in svc.closers:
        await closer()


def audit_key(settings: Settings) -> Ed25519PrivateKey | None:
    """FIREBREAK_AUDIT_KEY, read at start: a bad key stops the process (one line, exit 2)."""
    if settings.firebreak_audit_key is None:
        log.warning("audit_unsigned", detail=UNSIGNED)  # said once, at start, and in /readyz
        return None
    try:
        return load_private_key(settings.firebreak_audit_key)
    except KeyFileError as exc:
        raise ConfigError(f"bad configuration FIREBREAK_AUDIT_KEY: {exc}") from None


def build_runtime(settings: Settings, clock: Clock | None = None, redis: Redis | None = None) -> Runtime:
    settings.require_slack()
    assert settings.slack_signing_secret is not None  # require_slack checked it
    key = audit_key(settings)  # before any client is made: nothing to close on a bad key
    gateway = slack_gateway(settings)
    svc = build_services(settings, clock, redis, chat=gateway)
    lane = Lane()
    bolt = build_bolt(svc, gateway.client, settings.slack_signing_secret.get_secret_value(), lane)
    web_app = build_web(svc, bolt, lane)
    web_app.on_cleanup.append(lambda _app: close(svc, lane))
    checkpoints = None
    if key is not None:
        chan = settings.firebreak_audit_channel
        checkpoints = Checkpointer(svc.redis, svc.clock, key, post=svc.chat.post, channel=chan)
    return Runtime(services=svc, bolt=bolt, web=web_app, lane=lane, checkpoints=checkpoints)
