"""The telemetry tests run the real app over HTTP with the lever tests' fake cells (tests/levers/conftest.py)."""

from __future__ import annotations

from tests.levers.conftest import app, app_settings, cells, policy_overrides

__all__ = ["app", "app_settings", "cells", "policy_overrides"]
