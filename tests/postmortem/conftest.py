"""Fixtures for the postmortem: the real app (tests/support/harness.py) on the ManualClock at T0
(tests/conftest.py). Shared by the facts/actions tests and the document tests; append fixtures
below, and override ``app_settings`` in a module (or a test) for prometheus_url and friends."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.support.harness import RunningApp, start_app


@pytest.fixture
def app_settings() -> dict:
    """Settings for the app (overridden per module or test: prometheus_url, firebreak_policy_dir…)."""
    return {}


@pytest.fixture
async def app(slack, redis_url, clock, app_settings: dict) -> AsyncIterator[RunningApp]:
    running = await start_app(slack, redis_url, clock, **app_settings)
    yield running
    await running.stop()
