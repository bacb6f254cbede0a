"""Shared pieces of the signals tests: the app's policy, Alertmanager-shaped payloads, and
waiting on outcomes (the scheduler's delivery jobs run when a test ticks the app)."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import aiohttp

from bot.incidents.models import Incident
from bot.incidents.store import repo
from bot.store import Keys
from tests.support.harness import RunningApp
from tests.support.messages import channel_texts as texts  # a channel's texts, as the signals tests call them
from tests.support.services import REPO_ROOT

T = TypeVar("T")

TOKEN = "am-test-token-5f2c"
CELL_A = "us-east-1"  # someone is on call
CELL_B = "us-east-2"  # nobody is on call
ONCALL_A = "UONCALLA"


def policy_dir(tmp: Path, oncall: dict[str, str | None] | None = None) -> Path:
    """The packaged policies, with an oncall.yaml naming ONCALL_A for CELL_A (or ``oncall``)."""
    d = tmp / "policies"
    d.mkdir(exist_ok=True)
    for f in (REPO_ROOT / "policies").glob("*.yaml"):
        shutil.copy(f, d / f.name)
    cells = {CELL_A: ONCALL_A} if oncall is None else oncall
    (d / "oncall.yaml").write_text(json.dumps({"default": None, "cells": cells}) + "\n")
    return d


def wire(
    alertname: str,
    *,
    cell: str | None = CELL_A,
    status: str = "firing",
    severity: str | None = "page",
    node: str | None = None,
    sev: str | None = None,
    category: str | None = None,
    summary: str | None = None,
    fingerprint: str | None = None,
    starts_at: str = "2026-11-30T03:05:00.123456789Z",
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One alert as Alertmanager's webhook sends it."""
    lab = {"alertname": alertname}
    for k, v in (("cell", cell), ("severity", severity), ("node", node), ("sev", sev), ("category", category)):
        if v is not None:
            lab[k] = v
    lab.update(labels or {})
    fp = fingerprint or f"{abs(hash(tuple(sorted(lab.items())))):016x}"[:16]
    return {
        "status": status,
        "labels": lab,
        "annotations": {"summary": summary} if summary else {},
        "startsAt": starts_at,
        "endsAt": "2026-11-30T04:00:00Z" if status == "resolved" else "0001-01-01T00:00:00Z",
        "generatorURL": f"http://prometheus:9090/graph?g0.expr=up%7Balertname%3D%22{alertname}%22%7D&g0.tab=1",
        "fingerprint": fp,
    }


def payload(alerts: list[dict[str, Any]], *, summary: str | None = None, version: Any = "4") -> dict[str, Any]:
    firing = any(a["status"] == "firing" for a in alerts)
    return {
        "version": version,
        "groupKey": '{}:{cell="x"}',
        "truncatedAlerts": 0,
        "status": "firing" if firing else "resolved",
        "receiver": "firebreak",
        "groupLabels": {},
        "commonLabels": {},
        "commonAnnotations": {"summary": summary} if summary else {},
        "externalURL": "http://alertmanager:9093",
        "alerts": alerts,
    }


async def post(
    app: RunningApp,
    body: Any,
    *,
    token: str | None = TOKEN,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, Any]]:
    """POST to the app's /alertmanager over HTTP: a dict is sent as JSON; bytes, or an async
    generator of them (chunked, no Content-Length), as they are."""
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    h = {"Content-Type": "application/json", **(headers or {})}
    if token is not None:
        h.setdefault("Authorization", f"Bearer {token}")
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as s,
        s.post(f"{app.url}/alertmanager", data=data, headers=h) as resp,
    ):
        try:
            got = await resp.json(content_type=None)
        except ValueError:
            got = {"text": await resp.text()}
        return resp.status, got


async def settle(app: RunningApp, check: Callable[[], Awaitable[T]], timeout: float = 15.0) -> T:
    """Tick the app's scheduler until ``check()`` returns something truthy; that value."""
    deadline = time.monotonic() + timeout
    while True:
        await app.tick()
        got = await check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"not settled after {timeout}s: {got!r}")
        await asyncio.sleep(0.05)


async def incidents(app: RunningApp) -> list[Incident]:
    """Every incident there is, in number order."""
    r = app.services.redis
    n = int(await r.get(Keys.INCIDENT_SEQ) or 0)
    found = [await repo(app.services).get(f"INC-{i}") for i in range(1, n + 1)]
    return [i for i in found if i is not None]


async def pending_jobs(app: RunningApp) -> int:
    return int(await app.services.redis.zcard(Keys.sched("due")))


def summaries(app: RunningApp, channel: str | None) -> list[str]:
    """The alert summaries in a channel (not the card, not other posts)."""
    return [t for t in texts(app, channel) if re.search(r"[0-9]+ alerts? (firing in|resolved:) `", t)]
