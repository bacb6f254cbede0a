"""Shared steps for the comms tests: declare over Slack, tick the scheduler, read the channel."""
from __future__ import annotations

from typing import Any

from bot.incidents.models import Incident
from tests.harness import RunningApp


async def declare(app: RunningApp, title: str = "Chat latency", sev: int = 2, user: str = "U_IC",
                  extra: str = "") -> Incident:
    out = await app.run(f"declare {title} --sev {sev} {extra}".strip(), user=user)
    assert "Declared" in out, out
    inc_id = out.split()[1]
    inc = await app.services.incidents.get(inc_id)
    assert inc is not None
    return inc


async def tick(app: RunningApp) -> int:
    return await app.services.scheduler.tick(app.services)


def posts(app: RunningApp, channel: str, prefix: str) -> list[dict[str, Any]]:
    return [m for m in app.slack.messages(channel) if str(m.get("text", "")).startswith(prefix)]


def reminders(app: RunningApp, channel: str) -> list[dict[str, Any]]:
    return posts(app, channel, ":alarm_clock:")


def escalations(app: RunningApp, channel: str) -> list[dict[str, Any]]:
    return [m for m in posts(app, channel, ":rotating_light:") if "overdue" in m["text"]]


def button_values(msg: dict[str, Any]) -> dict[str, str]:
    out = {}
    for block in msg.get("blocks") or []:
        for el in block.get("elements") or []:
            if el.get("type") == "button":
                out[el["action_id"]] = el["value"]
    return out
