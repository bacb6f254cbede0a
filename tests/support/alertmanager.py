"""A real Alertmanager (0.25) on loopback that delivers to a webhook, plus a
small aiohttp webhook receiver to catch what it sends.

Usage::

    async with WebhookReceiver(token="s3cret") as hook, \\
               AlertmanagerServer(tmp_path, hook.url, "s3cret") as am:
        await am.post_alerts([alert("TTFTBurn", cell="a"), alert("KVCacheFull", cell="a")])
        delivery = await hook.next(timeout=10)
        delivery.payload["version"] == "4"; delivery.headers["Authorization"] == "Bearer s3cret"

Routing: everything goes to one webhook receiver, grouped by ``cell``
(alerts for the same cell arrive together in one payload), group_wait and
group_interval 1s, repeat_interval 1h, send_resolved true.  Clustering is off
(``--cluster.listen-address=``), which also avoids a ~10 s gossip settle delay.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from .ports import free_port
from .services import ManagedServer, ServiceStartError, find_binary

__all__ = ["AlertmanagerServer", "Delivery", "WebhookReceiver", "alert", "iso_now"]


def iso_now(offset_s: float = 0.0) -> str:
    return datetime.fromtimestamp(time.time() + offset_s, UTC).isoformat().replace("+00:00", "Z")


def alert(
    alertname: str,
    *,
    cell: str | None = None,
    labels: dict | None = None,
    annotations: dict | None = None,
    starts_at: str | None = None,
    ends_at: str | None = None,
    generator_url: str | None = None,
) -> dict:
    """An alert in the /api/v2/alerts format."""
    lab = {"alertname": alertname, **({"cell": cell} if cell is not None else {}), **(labels or {})}
    a: dict[str, Any] = {"labels": lab, "annotations": dict(annotations or {})}
    if starts_at:
        a["startsAt"] = starts_at
    if ends_at:
        a["endsAt"] = ends_at
    if generator_url:
        a["generatorURL"] = generator_url
    return a


class AlertmanagerServer(ManagedServer):
    """``AlertmanagerServer(tmpdir, webhook_url, bearer_token)``; async context manager
    or ``await start()`` / ``await stop()``.  Attributes: ``url``, ``port``, ``pid``,
    ``startup_seconds``, ``config_path``."""

    log_name = "alertmanager.log"

    def __init__(
        self,
        tmpdir: str | Path,
        webhook_url: str,
        bearer_token: str | None = None,
        *,
        group_by: Sequence[str] = ("cell",),
        group_wait: str = "1s",
        group_interval: str = "1s",
        repeat_interval: str = "1h",
        send_resolved: bool = True,
        extra_args: Sequence[str] = (),
        startup_timeout: float = 20.0,
    ):
        super().__init__(tmpdir, startup_timeout)
        self.webhook_url = webhook_url
        self.bearer_token = bearer_token
        self.group_by = list(group_by)
        self.group_wait = group_wait
        self.group_interval = group_interval
        self.repeat_interval = repeat_interval
        self.send_resolved = send_resolved
        self.extra_args = list(extra_args)
        self.config_path = self.dir / "alertmanager.yml"
        self.storage_path = self.dir / "am-data"

    def config(self) -> dict:
        webhook: dict[str, Any] = {"url": self.webhook_url, "send_resolved": self.send_resolved, "max_alerts": 0}
        if self.bearer_token:
            webhook["http_config"] = {"authorization": {"type": "Bearer", "credentials": self.bearer_token}}
        return {
            "route": {
                "receiver": "firebreak-webhook",
                "group_by": self.group_by,
                "group_wait": self.group_wait,
                "group_interval": self.group_interval,
                "repeat_interval": self.repeat_interval,
            },
            "receivers": [{"name": "firebreak-webhook", "webhook_configs": [webhook]}],
        }

    async def _prepare(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.storage_path.mkdir(parents=True, exist_ok=True)
        # JSON is valid YAML and escapes the token/url safely.
        self.config_path.write_text(json.dumps(self.config(), indent=2) + "\n")

    def _argv(self) -> list[str]:
        return [
            find_binary("alertmanager", "prometheus-alertmanager"),
            f"--config.file={self.config_path}",
            f"--storage.path={self.storage_path}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--cluster.listen-address=",
            *self.extra_args,
        ]

    async def post_alerts(self, alerts: list[dict]) -> None:
        """POST ``alerts`` to /api/v2/alerts (raises on a non-2xx answer)."""
        timeout = aiohttp.ClientTimeout(total=10)
        async with (
            aiohttp.ClientSession(timeout=timeout) as s,
            s.post(f"{self.url}/api/v2/alerts", json=alerts) as resp,
        ):
            if resp.status // 100 != 2:
                raise ServiceStartError(f"POST /api/v2/alerts -> {resp.status}: {await resp.text()}")

    async def resolve_alerts(self, alerts: list[dict]) -> None:
        """Re-post ``alerts`` with endsAt=now so Alertmanager sends them as resolved."""
        now = iso_now(-1)
        await self.post_alerts([{**a, "endsAt": now} for a in alerts])

    async def get_alerts(self) -> list[dict]:
        timeout = aiohttp.ClientTimeout(total=10)
        async with aiohttp.ClientSession(timeout=timeout) as s, s.get(f"{self.url}/api/v2/alerts") as resp:
            resp.raise_for_status()
            return await resp.json()


@dataclass
class Delivery:
    headers: dict[str, str]
    payload: dict
    received_at: float


class WebhookReceiver:
    """aiohttp server on 127.0.0.1:<free port> recording every POST to ``path``.

    If ``token`` is set, requests without ``Authorization: Bearer <token>`` get
    401 (and are still recorded in ``rejected``)."""

    def __init__(self, path: str = "/alertmanager", token: str | None = None):
        self.path = path
        self.token = token
        self.deliveries: list[Delivery] = []
        self.rejected: list[Delivery] = []
        self.port: int | None = None
        self.url: str | None = None
        self._runner: web.AppRunner | None = None
        self._cond: asyncio.Condition | None = None

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        d = Delivery(dict(request.headers), body, time.monotonic())
        if self.token and request.headers.get("Authorization") != f"Bearer {self.token}":
            self.rejected.append(d)
            return web.Response(status=401)
        async with self._cond:
            self.deliveries.append(d)
            self._cond.notify_all()
        return web.Response(text="ok")

    async def start(self) -> WebhookReceiver:
        self._cond = asyncio.Condition()
        app = web.Application()
        app.router.add_post(self.path, self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        self.port = free_port()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
        self.url = f"http://127.0.0.1:{self.port}{self.path}"
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> WebhookReceiver:
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.stop()

    async def wait_for(self, predicate: Callable[[Delivery], bool] = lambda d: True, timeout: float = 10.0) -> Delivery:
        """First recorded delivery (past or future) matching ``predicate``."""

        async def _wait() -> Delivery:
            async with self._cond:
                while True:
                    for d in self.deliveries:
                        if predicate(d):
                            return d
                    await self._cond.wait()

        return await asyncio.wait_for(_wait(), timeout)

    async def next(self, timeout: float = 10.0) -> Delivery:
        """The delivery after those already seen when called."""
        seen = len(self.deliveries)

        async def _wait() -> Delivery:
            async with self._cond:
                while len(self.deliveries) <= seen:
                    await self._cond.wait()
                return self.deliveries[seen]

        return await asyncio.wait_for(_wait(), timeout)
