"""The triage tests' fake cells and app (tests/support/triage.py)."""

from tests.support.triage import app, app_settings, cells  # noqa: F401 - the fixtures
