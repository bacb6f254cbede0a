"""Pasted secrets in an incident channel: flagged by kind, never repeated, audited once per event."""

from __future__ import annotations

import pytest

from bot.comms.secrets import scan
from bot.policy import load_policy
from tests.support.comms import TITLE, _msg, _warnings
from tests.support.harness import MODES, audit_entries

pytestmark = pytest.mark.parametrize("mode", MODES)  # over HTTP and over Socket Mode (docs/operating.md)

EXTRA = load_policy().comms.secret_patterns
SLACK_TOKEN = "xoxb-2417-1234567890-AbCdEfGhIjKlMnOp"


@pytest.mark.parametrize(
    "text,kinds",
    [
        (f"try with {SLACK_TOKEN}", ["Slack token"]),
        ("curl -H 'Authorization: Bearer 9f8e7d6c5b4a39281706f5e4d3c2b1a0'", ["bearer token"]),
        ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk", ["private key"]),
        ("-----BEGIN RSA PRIVATE KEY-----", ["private key"]),
        ("aws key AKIAIOSFODNN7EXAMPLE", ["AWS access key"]),
        ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ["AWS secret key"]),
        ('{"private_key_id": "0123456789abcdef0123456789abcdef01234567"}', ["GCP service-account key"]),
        ("ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8", ["GitHub token"]),
        ("HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyzABCDEF12", ["Hugging Face token"]),
        ("postgres://admin:s3cretpw@db.internal:5432/app", ["password in a URL"]),
        (f"{SLACK_TOKEN} and AKIAIOSFODNN7EXAMPLE", ["Slack token", "AWS access key"]),
    ],
)
def test_secret_kinds_are_found(text, kinds):
    assert scan(text, EXTRA) == kinds


@pytest.mark.parametrize(
    "text",
    [
        "the bot token starts with xoxb- and lives in the vault",
        "Bearer tokens must never be pasted here",
        "-----BEGIN PUBLIC KEY-----",
        "-----BEGIN CERTIFICATE-----",
        "AKIA is the prefix of AWS access key ids",
        "the github token prefix is ghp_ (rotate at 04:00)",
        "see https://grafana.example.com/d/abc123?orgId=1&from=now-6h",
        "https://user@example.com/repo.git",  # a user, no password
        "sha256:9f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a39281706f5e4d3c2b1a0",
        "hf_hub_download failed for llama-70b",
    ],
)
def test_near_misses_are_not_flagged(text):
    assert scan(text, EXTRA) == []


async def test_pasted_token_is_flagged_by_kind_without_repeating_it(app):
    inc = await app.declare(TITLE, sev=2, cells=())
    status, _, _ = await app.sender.event(_msg(inc.channel_id, f"here you go {SLACK_TOKEN}"), event_id="Ev1")
    assert status == 200
    call = await app.slack.wait_for(lambda c: c.method == "chat.postMessage" and "warning" in c.args["text"])
    assert "<@UPASTER>" in call.args["text"] and "Slack token" in call.args["text"]
    assert call.args["thread_ts"] == "1796008300.000100"
    entries = await audit_entries(app, inc.id)
    flagged = [e for e in entries if e["action"] == "command.secret_flag"]
    assert len(flagged) == 1
    assert flagged[0]["actor"] == "UPASTER" and flagged[0]["detail"]["source"] == "event"
    assert flagged[0]["detail"]["args"] == {"kinds": ["Slack token"], "message_ts": "1796008300.000100"}
    everything = str(entries) + str([c.args for c in app.slack.calls])
    assert "AbCdEfGhIjKlMnOp" not in everything


async def test_retried_delivery_is_processed_once(app):
    inc = await app.declare(TITLE, sev=2, cells=())
    event = _msg(inc.channel_id, "key: AKIAIOSFODNN7EXAMPLE")
    await app.sender.event(event, event_id="EvRetry")
    await app.slack.wait_for(lambda c: "AWS access key" in str(c.args.get("text", "")))
    for n in (1, 2):
        status, _, _ = await app.sender.event(event, event_id="EvRetry", retry_num=n)
        assert status == 200
    # A later, different event is handled after the retries were received.
    await app.sender.event(_msg(inc.channel_id, f"oops {SLACK_TOKEN}", ts="1796008400.000100"), event_id="EvLater")
    await app.slack.wait_for(lambda c: "Slack token" in str(c.args.get("text", "")))
    await app.drain()  # every delivery handled: nothing more is coming
    assert len(_warnings(app, inc.channel_id)) == 2
    assert len([e for e in await audit_entries(app, inc.id) if e["action"] == "command.secret_flag"]) == 2


async def test_clean_messages_bots_and_other_channels_are_left_alone(app, slack):
    inc = await app.declare(TITLE, sev=2, cells=())
    other = slack.add_channel("random")
    await app.sender.event(_msg(inc.channel_id, "TTFT p99 back under 2s"), event_id="EvA")
    await app.sender.event(_msg(inc.channel_id, f"bot says {SLACK_TOKEN}", bot_id="BOTHER"), event_id="EvB")
    await app.sender.event(_msg(other, f"elsewhere {SLACK_TOKEN}"), event_id="EvC")
    await app.sender.event(
        {
            "type": "message",
            "subtype": "channel_join",
            "channel": inc.channel_id,
            "user": "UX",
            "text": f"{SLACK_TOKEN}",
            "ts": "1.2",
        },
        event_id="EvD",
    )
    # A person editing their message to add a secret is flagged (the marker for "all processed").
    await app.sender.event(
        {
            "type": "message",
            "subtype": "message_changed",
            "channel": inc.channel_id,
            "message": {"type": "message", "user": "UEDIT", "text": f"edit {SLACK_TOKEN}", "ts": "1796008300.000200"},
            "ts": "1796008301.0",
        },
        event_id="EvE",
    )
    call = await app.slack.wait_for(lambda c: "warning" in str(c.args.get("text", "")))
    await app.drain()  # every event handled: nothing more is coming
    assert "<@UEDIT>" in call.args["text"]
    assert len(_warnings(app, inc.channel_id)) == 1 and slack.messages(other) == []
    flagged = [e for e in await audit_entries(app) if e["action"] == "command.secret_flag"]
    assert [e["actor"] for e in flagged] == ["UEDIT"]


async def test_resolved_incident_channel_is_still_watched(app):
    inc = await app.declare(TITLE, sev=2, cells=())
    await app.run("resolved", channel=inc.channel_id)
    await app.sender.event(_msg(inc.channel_id, "-----BEGIN EC PRIVATE KEY-----"), event_id="EvR")
    call = await app.slack.wait_for(lambda c: "private key" in str(c.args.get("text", "")))
    assert call.args["channel"] == inc.channel_id
