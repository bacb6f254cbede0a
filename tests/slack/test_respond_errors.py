"""Issue 36 item 9: the reply through response_url (bot/slack/app.py). Slack unreachable or
refusing it is one warning (the command ran and was audited; only its echo was lost); a bug in
sending it is not passed off as that, but logged with its traceback."""

from __future__ import annotations

import asyncio
from collections.abc import MutableMapping
from typing import Any

import pytest
import structlog

from bot.chat import ChatError
from tests.support.harness import MODES

pytestmark = pytest.mark.parametrize("mode", MODES)  # over HTTP and over Socket Mode (docs/operating.md)


async def _help_with_respond(
    app, monkeypatch: pytest.MonkeyPatch, failure: BaseException
) -> list[MutableMapping[str, Any]]:
    async def respond(reply_to: str, text: str) -> None:
        raise failure

    monkeypatch.setattr(app.services.chat, "respond", respond)
    with structlog.testing.capture_logs() as logged:
        await app.command("help")
        await asyncio.wait_for(app.lane.drain(), 10)
    return [e for e in logged if e["event"] in ("respond_failed", "after_ack_failed")]


async def test_slack_refusing_the_reply_is_one_warning(app, monkeypatch):
    (line,) = await _help_with_respond(app, monkeypatch, ChatError("response_url", "http_404"))
    assert line["event"] == "respond_failed" and line["log_level"] == "warning" and "exc_info" not in line


async def test_a_bug_in_the_reply_is_logged_with_its_traceback(app, monkeypatch):
    (line,) = await _help_with_respond(app, monkeypatch, TypeError("a bug, not Slack"))
    assert line["log_level"] == "error" and line.get("exc_info") is True, line
