"""Shared steps for the comms tests: read the channel's reminders, escalations and buttons.

Open an incident with ``app.declare`` (tests/support/harness.py); the comms tests' usual one is
``app.declare(TITLE, sev=…, cells=())`` (no cells: only the policy's patterns guard its updates).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.support.harness import RunningApp

TITLE = "Chat latency"
LEASE = 60  # the scheduler's lease: a dead claimer's job is handed out again after it


def kill_at_post(app: RunningApp, match: str, *, landed: bool) -> None:
    """The next chat.postMessage whose text contains ``match`` kills its caller: before the post
    reaches Slack (``landed=False``) or after it is in the channel (``landed=True``). The caller sees
    CancelledError, as a killed task does, so nothing after the call runs (no mark, no ack)."""
    real = app.services.chat.post

    async def killed(channel: str, text: str, *a: Any, **kw: Any) -> str:
        if match not in text:
            return await real(channel, text, *a, **kw)
        app.services.chat.post = real
        if landed:
            await real(channel, text, *a, **kw)
        raise asyncio.CancelledError()

    app.services.chat.post = killed


async def killed_tick(app: RunningApp) -> None:
    """A scheduler tick whose job is killed mid-way (see kill_at_post)."""
    with pytest.raises(asyncio.CancelledError):
        await app.tick()


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


def _msg(channel: str, text: str, user: str = "UPASTER", **extra) -> dict:
    return {"type": "message", "channel": channel, "user": user, "text": text, "ts": "1796008300.000100", **extra}


def _warnings(app, channel):
    return [m for m in app.slack.messages(channel) if m["text"].startswith(":warning:")]
