"""A world for approval tests: the real app over HTTP, fake Slack, a fake cell, a security channel."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from fbworld.kube import FakeKubeCluster, samples, write_kubeconfig
from fbworld.slack import FakeSlack
from levers.store import lever_store
from tests.support.harness import RunningApp, start_app
from tests.support.messages import channel_texts
from tests.support.messages import text_of as text_of

SEC = "C_SEC"
CELL = "us-east-3"
CQ_PATH = r"/clusterqueues/research-h100$"
DRAIN = "lever kueue-hold-drain research-h100 --cell us-east-3"


@dataclass
class World:
    app: RunningApp
    cell: FakeKubeCluster
    slack: FakeSlack
    kubeconfig: str
    channel: str = ""

    @property
    def svc(self) -> Any:
        return self.app.services

    async def declare(self, sev: int = 2, **roles: str) -> None:
        """`app.declare` as U_IC in the cell, then talk in the incident's channel from here on."""
        inc = await self.app.declare("Research queue starving", sev=sev, cells=(CELL,), roles=roles)
        self.channel = inc.channel_id

    async def run(self, text: str, user: str, app: RunningApp | None = None) -> str:
        """The reply to a command. A lever's ack only says "planning…": wait for its real reply."""
        a = app or self.app
        key = await a.command(text, user=user, channel=self.channel)
        ack = a.last_ack or ""
        if ack.strip() and "planning" not in ack.lower():
            return await a.settled(key, ack)
        return await a.reply(key)

    async def press(self, action: str, value: str, user: str, app: RunningApp | None = None) -> str:
        a = app or self.app
        key = await a.press(action, value, user=user, channel=self.channel)
        return await a.reply(key)

    async def tick(self, app: RunningApp | None = None) -> int:
        """Run the due jobs (in ``app``, default this world's); how many ran."""
        return await (app or self.app).tick()

    def patches(self, path: str = CQ_PATH) -> list:
        """The PATCHes that could store something (a dry run's dryRun=All stores nothing)."""
        return [r for r in self.cell.find_requests("PATCH", path) if r.query.get("dryRun") != "All"]

    def cards(self, action_id: str) -> list[dict]:
        """Messages in the incident channel that carry (or carried) this action's button."""
        out = []
        for m in self.slack.messages(self.channel):
            history = [m.get("blocks") or []] + [e.get("blocks") or [] for e in m["edits"]]
            if any(
                el.get("action_id") == action_id for blocks in history for b in blocks for el in b.get("elements", [])
            ):
                out.append(m)
        return out

    def security_posts(self) -> list[str]:
        return channel_texts(self.app, SEC)

    async def restart(self) -> RunningApp:
        """A new Firebreak process on the same Redis (the old one is gone), start hooks run."""
        await self.app.stop()
        self.app = await start_app(
            self.slack,
            self.app.services.settings.redis_url,
            self.app.services.clock,
            kubeconfig=self.kubeconfig,
            firebreak_security_channel=SEC,
        )
        for hook in self.app.services.scheduler.startup:
            await hook()
        return self.app

    async def second_process(self) -> RunningApp:
        return await start_app(
            self.slack,
            self.app.services.settings.redis_url,
            self.app.services.clock,
            kubeconfig=self.kubeconfig,
            firebreak_security_channel=SEC,
        )


def buttons(message: dict) -> list[str]:
    return [
        el.get("action_id")
        for b in message.get("blocks") or []
        for el in b.get("elements", [])
        if el.get("type") == "button"
    ]


@pytest.fixture
async def world(slack: FakeSlack, redis_url: str, clock, tmp_path) -> AsyncIterator[World]:
    slack.add_channel("security-ir", channel_id=SEC)
    async with FakeKubeCluster(CELL) as cell:
        cell.put(samples.cluster_queue())
        kc = str(write_kubeconfig(tmp_path / "kubeconfig", {CELL: cell.url}))
        app = await start_app(slack, redis_url, clock, kubeconfig=kc, firebreak_security_channel=SEC)
        w = World(app, cell, slack, kc)
        try:
            yield w
        finally:
            await w.app.stop()
            await asyncio.sleep(0)


async def grant(world, scope="kueue-hold", minutes=30, user="UX") -> str:
    out = await world.run(f"breakglass {scope} {minutes} ops lead unreachable", user=user)
    assert out.startswith("BG-") and "It needs the IC (<@U_IC>)" in out, out
    return out.split(" ", 1)[0]


async def request_drain(world) -> str:
    await world.declare(ops="UOPS", comms="UCOMMS")
    out = await world.run(DRAIN, user="UOPS")
    m = re.search(r"REQ-\d+", out)
    assert m, out
    rid = m.group(0)
    assert (await lever_store(world.svc).get(rid)).state == "pending_approval"
    return rid


def card(world, rid: str) -> dict:
    [m] = [m for m in world.cards("lever.approve") if rid in text_of(m) or rid in str(m.get("edits"))]
    return m
