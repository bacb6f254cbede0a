"""Assemble the running app from settings: the composition root."""
from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web
from slack_bolt.async_app import AsyncApp

from bot import commands, redact
from bot.audit import AuditLog
from bot.clock import Clock, SystemClock
from bot.config import Settings
from bot.core.services import Services
from bot.incidents.repo import IncidentRepo
from bot.policy import load_policy
from bot.scheduler import Scheduler
from bot.slack.app import build_bolt
from bot.slack.gateway import SlackGateway, make_client
from bot.store import Redis, connect


@dataclass
class Runtime:
    services: Services
    bolt: AsyncApp
    web: web.Application


def build_services(settings: Settings, clock: Clock | None = None, redis: Redis | None = None) -> Services:
    commands.load_all()
    policy = load_policy(settings.firebreak_policy_dir)
    # The audit log and the logs scrub the policy's secret patterns as well as the built-in ones.
    redact.add_patterns((p.kind, p.pattern) for p in policy.comms.secret_patterns)
    r = redis if redis is not None else connect(settings.redis_url)
    clock = clock or SystemClock()
    token = settings.slack_bot_token.get_secret_value() if settings.slack_bot_token else ""
    client = make_client(token, settings.slack_api_url)
    svc = Services(
        settings=settings, policy=policy, redis=r, clock=clock, slack=SlackGateway(client),
        audit=AuditLog(r, clock), incidents=IncidentRepo(r),
    )
    svc.extras["scheduler"] = Scheduler(r, clock)
    return svc


async def _close(svc: Services) -> None:
    await svc.extras["after_ack"].close()  # let acknowledged requests finish first
    await svc.slack.close()
    for close in svc.closers:
        await close()


def build_runtime(settings: Settings, clock: Clock | None = None, redis: Redis | None = None) -> Runtime:
    from bot.server import build_web

    settings.require_slack()
    svc = build_services(settings, clock, redis)
    assert settings.slack_signing_secret is not None
    bolt = build_bolt(svc, svc.slack.client, settings.slack_signing_secret.get_secret_value())
    web_app = build_web(svc, bolt)
    web_app.on_cleanup.append(lambda _app: _close(svc))
    return Runtime(services=svc, bolt=bolt, web=web_app)
