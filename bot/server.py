"""The HTTP surface: Slack events, health, readiness and metrics."""
from __future__ import annotations

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.async_app import AsyncApp

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from bot.core.services import Services
from bot.metrics import REGISTRY
from bot.slack.inbound import to_bolt_request
from bot.store import ping

WEB_HOOKS: list = []  # other capabilities add (method, path, handler factory) here


def build_web(svc: Services, bolt: AsyncApp) -> web.Application:
    async def slack_events(request: web.Request) -> web.Response:
        bolt_resp = await bolt.async_dispatch(await to_bolt_request(request))
        return await to_aiohttp_response(bolt_resp)

    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    async def readyz(_: web.Request) -> web.Response:
        ok = await ping(svc.redis)
        return web.json_response({"ok": ok, "redis": ok}, status=200 if ok else 503)

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=generate_latest(REGISTRY), headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_post("/slack/events", slack_events)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    for method, path, factory in WEB_HOOKS:
        app.router.add_route(method, path, factory(svc))
    return app
