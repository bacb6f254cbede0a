"""The Slack app manifest asks for what the app uses, and points Slack at /slack/events."""

from __future__ import annotations

import yaml

from tests.support.core import REPO

URL = "https://firebreak.example.com/slack/events"


def test_manifest_declares_command_interactivity_events_and_scopes():
    m = yaml.safe_load((REPO / "deploy" / "slack-app-manifest.yaml").read_text())
    [cmd] = m["features"]["slash_commands"]
    assert (cmd["command"], cmd["url"], cmd["should_escape"]) == ("/incident", URL, True)
    assert m["settings"]["interactivity"] == {"is_enabled": True, "request_url": URL}
    # Message events in public and private incident channels (secret scanning); which scopes and
    # events exactly, derived from the app's code: tests/slack/test_scopes.py.
    assert m["settings"]["event_subscriptions"] == {
        "request_url": URL,
        "bot_events": ["message.channels", "message.groups"],
    }
    assert {"groups:write", "groups:history", "files:write", "commands"} <= set(m["oauth_config"]["scopes"]["bot"])
    assert m["settings"]["socket_mode_enabled"] is False
    assert len(m["display_information"]["description"]) <= 140  # Slack's limit for the short description
