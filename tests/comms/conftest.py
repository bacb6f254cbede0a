from __future__ import annotations

from typing import AsyncIterator

import pytest

from tests.harness import RunningApp, start_app


@pytest.fixture
async def app_with_stakeholders(slack, redis_url, clock) -> AsyncIterator[RunningApp]:
    """The app with FIREBREAK_STAKEHOLDER_CHANNEL set to a channel the fake Slack knows."""
    channel = slack.add_channel("stakeholders")
    running = await start_app(slack, redis_url, clock, firebreak_stakeholder_channel=channel)
    running.stakeholders = channel
    yield running
    await running.stop()
