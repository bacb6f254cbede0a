"""Socket Mode end to end: slack_sdk's own client in the app, connected to the emulator's
apps.connections.open and WebSocket (world/fbworld/slack/socket_mode.py).

The same request path as HTTP (bot/slack/inbound.py): commands are answered, a second command is
not taken for a replay of the first (nothing is signed on the socket), a payload Slack delivers
again, in a new envelope, is acted on once (bot/slack/replays.py), a bad payload is acked and
does nothing, and the app keeps working across Slack's disconnect/reconnect. The command, button,
form and event suites run in this mode too (docs/operating.md lists them)."""

from __future__ import annotations

import aiohttp
import pytest

from bot.slack.replays import ALREADY
from fbworld.slack import FakeSlack, block_actions_body, event_body, slash_command_body
from fbworld.slack.socket_mode import SLASH_COMMANDS, envelope_of
from tests.support import workspace
from tests.support.comms import _msg, _warnings
from tests.support.core import CAROL
from tests.support.harness import APP_TOKEN, TOKEN, RunningApp, audit_entries
from tests.support.serve import Serve

pytestmark = pytest.mark.parametrize("mode", ["socket"])

IC = "U_IC"


def _command(slack: FakeSlack, text: str, key: str) -> dict:
    """The payload of a slash_commands envelope: the fields Slack would POST over HTTP."""
    body = slash_command_body(text, user_id=IC, channel_id="C_GENERAL", response_url=slack.response_url(key))
    return envelope_of(body, "application/x-www-form-urlencoded")[1]


async def test_a_command_over_socket_mode_is_answered(app: RunningApp) -> None:
    assert app.slack.socket.opened == 1 and app.slack.socket.connections == 1
    out = await app.run("declare GPU hang --sev 2 --cell us-east-3")
    assert out.startswith("Declared INC-1"), out


async def test_a_second_different_command_is_not_already_received(app: RunningApp) -> None:
    first = await app.run("declare GPU hang --sev 2 --cell us-east-3")
    second = await app.run("declare Disk full --sev 3 --cell us-east-3")
    assert first.startswith("Declared INC-1") and second.startswith("Declared INC-2"), (first, second)
    assert ALREADY not in first + second


async def test_an_envelope_delivered_again_does_nothing_twice(app: RunningApp) -> None:
    payload = _command(app.slack, "declare GPU hang --sev 2 --cell us-east-3", "again")
    await app.slack.socket.deliver(SLASH_COMMANDS, payload, envelope_id="env-1")
    assert (await app.reply("again")).startswith("Declared INC-1")
    ack = await app.slack.socket.deliver(
        SLASH_COMMANDS, payload, envelope_id="env-1", retry_attempt=1, retry_reason="timeout"
    )
    assert ack.attempts == 1  # acked again (Slack stops sending it)
    await app.drain()
    replies = [r["text"] for r in app.slack.responses_for("again")]
    assert replies[1:] == [ALREADY], replies
    assert len(app.slack.calls_to("conversations.create")) == 1


async def test_an_envelope_not_acked_in_time_is_delivered_again_and_acted_on_once(app: RunningApp) -> None:
    socket = app.slack.socket
    socket.ack_timeout = 0.5
    socket.lose_acks(1)  # the first delivery's ack never reaches Slack
    ack = await socket.deliver(SLASH_COMMANDS, _command(app.slack, "declare GPU hang --sev 2 --cell us-east-3", "slow"))
    assert ack.attempts == 2, ack
    await app.drain()
    texts = [r["text"] for r in app.slack.responses_for("slow")]
    assert sum(t.startswith("Declared INC-1") for t in texts) == 1, texts
    assert len(app.slack.calls_to("conversations.create")) == 1


async def test_a_redelivery_comes_in_a_new_envelope_and_a_button_runs_once(app: RunningApp) -> None:
    """Slack names each delivery with its own envelope id: the duplicate is known by the payload's
    trigger_id (bot/slack/replays.py), not by the envelope."""
    inc = await app.declare("GPU hang", sev=3, cells=())
    ch = inc.channel_id or ""  # declare asserted it
    await app.run(f"handoff ic <@{CAROL}>", channel=ch)
    socket = app.slack.socket
    socket.ack_timeout = 0.5
    socket.lose_acks(1)
    body = block_actions_body("handoff.accept", f"{inc.id}/HO-1", CAROL, ch)
    sent = len(socket.acks)
    ack = await socket.deliver(*envelope_of(body, "application/x-www-form-urlencoded"))
    assert ack.attempts == 2 and len(socket.acks) == sent + 1, ack
    [first, second] = [e for link in socket._links for e in link.delivered][-2:]
    assert first != second == ack.envelope_id
    await app.drain()
    entries = [e for e in await audit_entries(app) if e["action"] == "command.accept"]
    assert [e["detail"]["result"] for e in entries] == ["ok"], entries


async def test_an_event_redelivered_after_a_lost_ack_is_flagged_once(app: RunningApp) -> None:
    """Slack's retry of an event is a new delivery (retry_attempt 1): the event's own dedupe
    (bot/comms/watch.py) sees it was handled."""
    inc = await app.declare("GPU hang", sev=2, cells=())
    socket = app.slack.socket
    socket.ack_timeout = 0.5
    socket.lose_acks(1)
    body = event_body(_msg(inc.channel_id or "", "key: AKIAIOSFODNN7EXAMPLE"), "EvLost")
    ack = await socket.deliver(*envelope_of(body, "application/json"))
    assert ack.attempts == 2, ack
    await app.drain()
    assert len(_warnings(app, inc.channel_id)) == 1


async def test_a_bad_payload_is_acked_and_does_nothing(app: RunningApp, capsys: pytest.CaptureFixture[str]) -> None:
    ack = await app.slack.socket.deliver(SLASH_COMMANDS, {"command": "/incident", "user_id": 5, "text": "declare X"})
    assert ack.payload is None and ack.attempts == 1
    await app.drain()
    refused = [line for line in capsys.readouterr().out.splitlines() if "slack_request_refused" in line]
    assert len(refused) == 1 and "reason=user_missing" in refused[0] and "mode=socket" in refused[0], refused
    assert app.slack.calls == [] and await audit_entries(app) == []
    assert await app.services.redis.keys("*") == []


async def test_disconnect_and_reconnect_keep_it_working(app: RunningApp) -> None:
    socket = app.slack.socket
    assert (await app.run("declare GPU hang --sev 2 --cell us-east-3")).startswith("Declared INC-1")
    for reason in ("warning", "refresh_requested"):
        before = socket.connections
        await socket.disconnect(reason)
        await socket.wait_connected(before + 1)
    assert socket.opened == 3  # a new URL from apps.connections.open for each connection
    assert (await app.run("declare Disk full --sev 3 --cell us-east-3")).startswith("Declared INC-2")


@pytest.mark.parametrize(
    ("token", "error"),
    [(TOKEN, "not_allowed_token_type"), ("xapp-1-not-this-app", "invalid_auth"), ("", "not_authed")],
)
async def test_apps_connections_open_takes_only_the_app_token(slack: FakeSlack, mode: str, token: str, error: str):
    slack.socket.app_token = APP_TOKEN
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession() as s, s.post(slack.api_url + "apps.connections.open", headers=headers) as r:
        assert await r.json() == {"ok": False, "error": error}
    app_token = {"Authorization": f"Bearer {APP_TOKEN}"}  # and the app token is good for nothing else
    async with aiohttp.ClientSession() as s, s.post(slack.api_url + "auth.test", headers=app_token) as r:
        assert await r.json() == {"ok": False, "error": "not_allowed_token_type"}


async def test_firebreak_serve_with_an_app_token_answers_over_socket_mode(slack: FakeSlack, redis_url: str, mode: str):
    workspace.seed(slack)
    slack.socket.app_token = APP_TOKEN
    serve = Serve(redis_url, slack)
    serve.env["SLACK_APP_TOKEN"] = APP_TOKEN
    await serve.start()
    try:
        assert (await serve.wait_for(lambda e: e.get("event") == "serving", 5))["mode"] == "socket"
        ack = await slack.socket.deliver(SLASH_COMMANDS, _command(slack, "declare GPU hang --sev 2", "serve"))
        assert ack.attempts == 1
        reply = await slack.wait_for_response("serve", timeout=15)
        assert str(reply.body.get("text", "")).startswith("Declared INC-1"), reply.body
    finally:
        await serve.stop()
