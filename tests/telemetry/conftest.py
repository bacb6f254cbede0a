"""The telemetry tests run the real app over HTTP with the lever tests' fake cells (tests/support/lever_fixtures.py)."""

from __future__ import annotations

from tests.support.lever_fixtures import app, app_settings, cells, policy_overrides

__all__ = ["app", "app_settings", "cells", "policy_overrides"]
