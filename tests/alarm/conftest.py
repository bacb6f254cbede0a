"""The remediation alarm's tests run on the lever tests' fake cells and app (tests/support/lever_fixtures.py)."""

from tests.support.lever_fixtures import app, app_settings, cells, policy_overrides, prometheus  # noqa: F401 - fixtures
