from tests.conftest import audit_entries


async def test_declare_creates_channel_card_and_audit(app):
    status, body, _ = await app.sender.command("declare GPU hang in us-east --sev 2 --cell us-east-3", user="U_IC")
    assert status == 200
    call = await app.slack.wait_for("pins.add")
    created = app.slack.calls_to("conversations.create")[0]
    assert created.args["name"].startswith("inc-20261130-1-gpu-hang-in-us-east")
    resp = await app.slack.wait_for_response()
    print(resp)
    entries = await audit_entries(app)
    assert entries[-1]["action"] == "command.declare"
    assert entries[-1]["incident"] == "INC-1"
