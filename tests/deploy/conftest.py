"""The lever tests' fake cells and app (tests/support/lever_fixtures.py), for running the levers under the
RBAC deploy/ grants (test_rbac_live.py)."""

from tests.support.lever_fixtures import app, cells, policy_overrides, prometheus  # noqa: F401 (fixtures)
