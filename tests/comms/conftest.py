from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.support.harness import RunningApp, start_app


@pytest.fixture
async def app(request: pytest.FixtureRequest, slack, redis_url, clock) -> AsyncIterator[RunningApp]:
    """The app. Marked ``@pytest.mark.stakeholders``, a test gets FIREBREAK_STAKEHOLDER_CHANNEL set
    to a channel the fake Slack knows (its id: ``app.stakeholders``)."""
    settings: dict[str, str] = {}
    channel = None
    if request.node.get_closest_marker("stakeholders") is not None:
        channel = slack.add_channel("stakeholders")
        settings["firebreak_stakeholder_channel"] = channel
    running = await start_app(slack, redis_url, clock, **settings)
    running.stakeholders = channel
    yield running
    await running.stop()
