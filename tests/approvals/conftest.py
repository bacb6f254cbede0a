"""The approval tests' world: the real app over HTTP, fake Slack, a fake cell, a security channel
(tests/support/approvals.py)."""

from tests.support.approvals import world  # noqa: F401 - the fixture
