"""The lever tests' fake cells and app (tests/levers/conftest.py), for running the levers under the
RBAC deploy/ grants (test_rbac_live.py)."""

from tests.levers.conftest import app, cells, policy_overrides, prometheus  # noqa: F401 (fixtures)
