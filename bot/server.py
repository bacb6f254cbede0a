"""The HTTP surface: Slack events, health, readiness and metrics.

Shutting down (bot/serve.py) goes through ``Intake``: from SIGTERM /readyz answers 503,
so Kubernetes takes the pod out of the Service; requests still arriving are taken for
``linger`` seconds (the endpoints take a moment to update everywhere, and Slack does not
retry a slash command, button or form that gets a 5xx: the person would see an error),
and after that every POST (Slack, webhooks) gets a 503. Slack retries an Events API
delivery that got one, Alertmanager a webhook; GETs (/healthz, /metrics) keep answering.
"""

from __future__ import annotations

import asyncio
import time

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from redis.exceptions import RedisError
from slack_bolt.async_app import AsyncApp

from bot import logs, metrics
from bot.core.hooks import READINESS, SCRAPE
from bot.core.services import Services
from bot.metrics import REGISTRY
from bot.slack import inbound
from bot.slack.lane import Lane
from bot.store import ping

log = logs.get(__name__)

SLACK_PATH = "/slack/events"
UNSIGNED = "hash-chained only: FIREBREAK_AUDIT_KEY is unset, so whoever can write Redis can rewrite it undetected"
SCRAPE_TIMEOUT_S = 1.0  # a store-read gauge that cannot be read in time is NaN in this scrape
READY_CHECK_S = 0.7  # a capability's readiness check that takes longer is "not ready" this time


class Intake:
    """Whether the app still takes requests: open until ``drain``; then readiness fails at once,
    and POSTs are refused once ``linger`` seconds have passed."""

    def __init__(self) -> None:
        self.draining_since: float | None = None
        self.linger = 0.0

    def drain(self, linger: float) -> None:
        if self.draining_since is None:
            self.draining_since, self.linger = time.monotonic(), linger

    @property
    def draining(self) -> bool:
        return self.draining_since is not None

    def refusing(self) -> bool:
        return self.draining_since is not None and time.monotonic() - self.draining_since >= self.linger


INTAKE = web.AppKey("firebreak_intake", Intake)


async def start_local(
    app: web.Application,
    host: str = "127.0.0.1",
    port: int = 0,
    access_log: bool = True,
    shutdown_timeout: float = 60.0,
) -> tuple[web.AppRunner, int]:
    """Serve ``app`` on host:port (0: a free port); returns the runner and the bound port.
    ``shutdown_timeout``: at cleanup, how long requests still being answered may take."""
    runner = (
        web.AppRunner(app, shutdown_timeout=shutdown_timeout)
        if access_log
        else web.AppRunner(app, access_log=None, shutdown_timeout=shutdown_timeout)
    )
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]


def _gate(intake: Intake, lane: Lane | None) -> Middleware:
    @web.middleware
    async def gate(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method == "POST" and intake.refusing():
            log.info("request_refused_shutting_down", path=request.path[:100])
            return web.json_response({"ok": False, "error": "shutting_down"}, status=503)
        if request.path != SLACK_PATH:
            return await handler(request)
        started = time.perf_counter()
        if lane is None:
            resp = await handler(request)
        else:
            with lane.acking():  # after-ack work waits to start meanwhile (bot/slack/lane.py)
                resp = await handler(request)
        if 200 <= resp.status < 300:  # the ack Slack waits for (refusals are not acks)
            metrics.ACK_SECONDS.observe(time.perf_counter() - started)
        return resp

    return gate


async def _scrape(svc: Services) -> None:
    """Refresh the gauges read from the store (SCRAPE sets its gauges to NaN until read, so one
    that fails or times out is NaN in this scrape, not a stale value)."""
    if (refresh := svc.registry.provided(SCRAPE)) is not None:
        try:
            async with asyncio.timeout(SCRAPE_TIMEOUT_S):
                await refresh(svc)
        except (RedisError, TimeoutError, OSError) as exc:  # the store down or slow: this gauge is NaN
            log.warning("metrics_refresh_failed", hook=getattr(refresh, "__name__", "?"), error=type(exc).__name__)
        except Exception:  # a scrape never fails for one gauge; a bug is logged whole
            log.exception("metrics_refresh_failed", hook=getattr(refresh, "__name__", "?"))


def build_web(svc: Services, bolt: AsyncApp, lane: Lane | None = None) -> web.Application:
    intake = Intake()

    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    async def readyz(_: web.Request) -> web.Response:
        if intake.draining:  # shutting down: out of the Service before anything else
            return web.json_response({"ok": False, "draining": True}, status=503)
        ok = await ping(svc.redis)
        # Not a readiness condition: says what the audit log can prove (docs/security-model.md).
        audit = "signed checkpoints" if svc.settings.firebreak_audit_key else UNSIGNED
        body: dict[str, object] = {"ok": ok, "redis": ok, "audit": audit}
        if (check := svc.registry.provided(READINESS)) is not None:  # the admission self-test (levers/selftest.py)
            try:
                async with asyncio.timeout(READY_CHECK_S):
                    got = await check(svc)
            except Exception as exc:  # /readyz always answers: a check that fails or hangs is "not ready", said
                name = getattr(check, "__module__", "check").rsplit(".", 1)[-1]
                # A hang is one line; any other failure is the check's bug or its backend's: its traceback.
                log.warning("readiness_check_failed", check=name, exc_info=not isinstance(exc, TimeoutError))
                got = (name, False, f"the check failed: {type(exc).__name__}")
            if got is not None:
                name, ready, found = got
                body[name] = found
                ok = ok and ready
        body["ok"] = ok
        return web.json_response(body, status=200 if ok else 503)

    async def metrics_page(_: web.Request) -> web.Response:
        await _scrape(svc)
        return web.Response(body=generate_latest(REGISTRY), headers={"Content-Type": CONTENT_TYPE_LATEST})

    # Slack's largest bodies (a submitted form) are a few tens of KB; larger ones get a 413.
    app = web.Application(client_max_size=1024**2, middlewares=[_gate(intake, lane)])
    app[INTAKE] = intake
    app.router.add_post(SLACK_PATH, inbound.handler(bolt))
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics_page)
    # Endpoints a capability declared in its register (Registry.web).
    for method, path, make in svc.registry.http:
        app.router.add_route(method, path, make(svc))
    return app
