"""Redis unreachable: every way in still answers, briefly and without a stack trace."""

from __future__ import annotations

import json

import pytest

from tests.support.harness import start_app
from tests.support.ports import free_port

# The update form on the wire (bot/slack/forms.py), spelled out: open forms already carry these.
UPDATE_MODAL, UPDATE_BLOCK, UPDATE_INPUT = "cadence.update", "update", "text"


@pytest.fixture
async def app(slack, clock):
    """The app, with nothing listening where its Redis should be."""
    running = await start_app(slack, f"redis://127.0.0.1:{free_port()}/0", clock)
    yield running
    await running.runner.cleanup()


@pytest.mark.parametrize("text", ["status", "declare GPU hang --sev 2", "sev 1 worse"])
async def test_a_command_gets_a_short_reply_through_response_url(app, text, capsys):
    key = await app.command(text, user="UIC", channel="C_INC")
    out = await app.reply(key, timeout=15)
    assert out.startswith("Firebreak can't reach its store (ref `") and out.endswith(
        "`); nothing changed. Try again in a minute."
    ), out
    ref = out.split("`")[1]
    assert "Traceback" not in out
    assert app.slack.calls_to("conversations.create") == []
    # The log names the request id, so the ref in the reply finds the failure.
    assert f"request_id={ref}" in capsys.readouterr().out


async def test_a_button_gets_the_same_answer(app):
    key = await app.press("handoff.accept", "INC-1/HO-1", user="UCAROL", channel="C_INC")
    out = await app.reply(key, timeout=15)
    assert out.startswith("Firebreak can't reach its store") and "Traceback" not in out


async def test_a_form_submission_keeps_the_form_open_with_the_reason(app):
    values = {UPDATE_BLOCK: {UPDATE_INPUT: {"type": "plain_text_input", "value": "Chat API: ok"}}}
    status, body, _ = await app.sender.submit_view(UPDATE_MODAL, user="UIC", values=values, private_metadata="INC-1")
    assert status == 200, body
    assert json.loads(body)["errors"] == {
        UPDATE_BLOCK: "Firebreak can't reach its store; nothing changed. Try again in a minute."
    }
