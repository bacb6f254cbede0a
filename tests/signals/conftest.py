from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.support.harness import RunningApp, start_app
from tests.support.services import ensure_services_installed
from tests.support.signals import TOKEN, policy_dir


@pytest.fixture
async def app(slack, redis_url, clock, tmp_path: Path) -> AsyncIterator[RunningApp]:
    """The app with ALERTMANAGER_TOKEN, a security channel (``app.security``) and an oncall.yaml
    naming ONCALL_A for CELL_A and nobody for CELL_B."""
    security = slack.add_channel("security")
    running = await start_app(
        slack,
        redis_url,
        clock,
        alertmanager_token=TOKEN,
        firebreak_policy_dir=policy_dir(tmp_path),
        firebreak_security_channel=security,
    )
    running.security = security
    yield running
    await running.stop()


@pytest.fixture(scope="session")
def services_installed() -> None:
    ensure_services_installed()  # runs .ci/install-services.sh only when a binary is missing
