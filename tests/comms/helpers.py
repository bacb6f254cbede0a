"""Shared steps for the comms tests: read the channel's reminders, escalations and buttons.

Open an incident with ``app.declare`` (tests/harness.py); the comms tests' usual one is
``app.declare(TITLE, sev=…, cells=())`` (no cells: only the policy's patterns guard its updates).
"""

from __future__ import annotations

from typing import Any

from tests.harness import RunningApp

TITLE = "Chat latency"


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
