"""The HTTP surface: Slack events, health, readiness and metrics."""

from __future__ import annotations

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from slack_bolt.async_app import AsyncApp

from bot.core.services import Services
from bot.metrics import REGISTRY
from bot.slack import inbound
from bot.store import ping


async def start_local(
    app: web.Application, host: str = "127.0.0.1", port: int = 0, access_log: bool = True
) -> tuple[web.AppRunner, int]:
    """Serve ``app`` on host:port (0: a free port); returns the runner and the bound port."""
    runner = web.AppRunner(app) if access_log else web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]


def build_web(svc: Services, bolt: AsyncApp) -> web.Application:
    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    async def readyz(_: web.Request) -> web.Response:
        ok = await ping(svc.redis)
        return web.json_response({"ok": ok, "redis": ok}, status=200 if ok else 503)

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=generate_latest(REGISTRY), headers={"Content-Type": CONTENT_TYPE_LATEST})

    # Slack's largest bodies (a submitted form) are a few tens of KB; larger ones get a 413.
    app = web.Application(client_max_size=1024**2)
    app.router.add_post("/slack/events", inbound.handler(svc, bolt))
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    # Endpoints a capability declared in its register (Registry.web).
    for method, path, make in svc.registry.http:
        app.router.add_route(method, path, make(svc))
    return app
