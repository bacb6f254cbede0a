import pytest

from tests.support.harness import MODES, audit_entries

pytestmark = pytest.mark.parametrize("mode", MODES)  # over HTTP and over Socket Mode (docs/operating.md)


async def test_declare_creates_channel_card_and_audit(app):
    out = await app.run("declare GPU hang in us-east --sev 2 --cell us-east-3", user="U_IC")
    assert "Declared INC-1 (SEV2)" in out
    created = app.slack.calls_to("conversations.create")[0]
    assert created.args["name"].startswith("inc-20261130-1-gpu-hang-in-us-east")
    entries = await audit_entries(app)
    assert entries[-1]["action"] == "command.declare"
    assert entries[-1]["incident"] == "INC-1"
