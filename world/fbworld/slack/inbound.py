"""Build and send Slack-signed inbound requests (commands, actions, views, events)."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import time
from typing import Any
from urllib.parse import urlencode

import aiohttp
from slack_sdk.signature import SignatureVerifier

DEFAULT_RESPONSE_URL = "https://hooks.slack.com/commands/T1/1/fake"
API_APP_ID = "AFAKE"
_seq = itertools.count(1)


def _trigger_id() -> str:
    return f"{next(_seq)}.1.fake-trigger"


def signature(body: bytes, secret: str, timestamp: str) -> str:
    """Slack's v0 signature of ``body``, made by slack_sdk's SignatureVerifier for every body Slack
    sends (UTF-8). slack_sdk decodes the body before signing, so it cannot sign bytes that are not
    UTF-8, which Slack never sends and the hostile-input tests do (to reach the app's parser through
    a good signature): for those alone, the same HMAC-SHA256 over the raw bytes
    (world/tests/slack/test_slack_signing.py checks both agree)."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        base = b"v0:" + timestamp.encode() + b":" + body
        return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    made = SignatureVerifier(secret).generate_signature(timestamp=timestamp, body=body)
    if made is None:  # slack_sdk makes none only without a timestamp or body; both are given
        raise ValueError("slack_sdk made no signature")
    return made


def sign(body: bytes, secret: str, timestamp: int | None = None) -> dict[str, str]:
    """Slack's v0 signature headers for ``body`` (``signature``)."""
    ts = str(int(time.time()) if timestamp is None else timestamp)
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": signature(body, secret, ts)}


def slash_command_body(
    text: str,
    user_id: str = "U_IC",
    channel_id: str = "C123",
    command: str = "/incident",
    team_id: str = "T1",
    response_url: str = DEFAULT_RESPONSE_URL,
    trigger_id: str | None = None,
    channel_name: str = "general",
    user_name: str | None = None,
) -> bytes:
    return urlencode(
        {
            "token": "verification-token",
            "team_id": team_id,
            "team_domain": "fake",
            "channel_id": channel_id,
            "channel_name": channel_name,
            "user_id": user_id,
            "user_name": user_name or user_id.lower(),
            "command": command,
            "text": text,
            "api_app_id": API_APP_ID,
            "is_enterprise_install": "false",
            "response_url": response_url,
            "trigger_id": trigger_id or _trigger_id(),
        }
    ).encode()


def _payload_body(payload: dict[str, Any]) -> bytes:
    return urlencode({"payload": json.dumps(payload)}).encode()


def _user(user_id: str, team_id: str) -> dict[str, str]:
    name = user_id.lower()
    return {"id": user_id, "username": name, "name": name, "team_id": team_id}


def block_actions_body(
    action_id: str,
    value: str,
    user_id: str,
    channel_id: str,
    message_ts: str | None = None,
    response_url: str = DEFAULT_RESPONSE_URL,
    trigger_id: str | None = None,
    block_id: str = "b",
    team_id: str = "T1",
    message: dict | None = None,
) -> bytes:
    ts = message_ts or f"{time.time():.6f}"
    return _payload_body(
        {
            "type": "block_actions",
            "api_app_id": API_APP_ID,
            "token": "verification-token",
            "user": _user(user_id, team_id),
            "team": {"id": team_id, "domain": "fake"},
            "channel": {"id": channel_id, "name": "channel"},
            "container": {"type": "message", "message_ts": ts, "channel_id": channel_id, "is_ephemeral": False},
            "message": message
            or {"type": "message", "ts": ts, "user": "UBOT", "bot_id": "BBOT", "text": "", "blocks": []},
            "actions": [
                {
                    "action_id": action_id,
                    "block_id": block_id,
                    "value": value,
                    "type": "button",
                    "action_ts": f"{time.time():.6f}",
                    "text": {"type": "plain_text", "text": value},
                }
            ],
            "response_url": response_url,
            "trigger_id": trigger_id or _trigger_id(),
            "state": {"values": {}},
        }
    )


def view_submission_body(
    callback_id: str,
    user_id: str,
    values: dict,
    private_metadata: str = "",
    team_id: str = "T1",
    view_id: str = "VFAKE",
) -> bytes:
    """``values`` is the Slack shape: {block_id: {action_id: {"type":..., "value":...}}}."""
    return _payload_body(
        {
            "type": "view_submission",
            "api_app_id": API_APP_ID,
            "token": "verification-token",
            "user": _user(user_id, team_id),
            "team": {"id": team_id, "domain": "fake"},
            "trigger_id": _trigger_id(),
            "response_urls": [],
            "view": {
                "id": view_id,
                "type": "modal",
                "callback_id": callback_id,
                "private_metadata": private_metadata,
                "team_id": team_id,
                "app_id": API_APP_ID,
                "bot_id": "BBOT",
                "hash": "1.fake",
                "title": {"type": "plain_text", "text": "Modal"},
                "blocks": [],
                "state": {"values": values},
            },
        }
    )


def event_body(event: dict, event_id: str, team_id: str = "T1") -> bytes:
    return json.dumps(
        {
            "token": "verification-token",
            "team_id": team_id,
            "api_app_id": API_APP_ID,
            "event": event,
            "type": "event_callback",
            "event_id": event_id,
            "event_time": int(time.time()),
            "authorizations": [{"team_id": team_id, "user_id": "UBOT", "is_bot": True, "is_enterprise_install": False}],
        }
    ).encode()


def url_verification_body(challenge: str) -> bytes:
    return json.dumps({"token": "verification-token", "challenge": challenge, "type": "url_verification"}).encode()


class SlackSender:
    """POSTs signed requests to ``{app_url}/slack/events`` like Slack does."""

    def __init__(self, app_url: str, secret: str, path: str = "/slack/events"):
        self.url = app_url.rstrip("/") + path
        self.secret = secret

    async def post(
        self, body: bytes, content_type: str, timestamp: int | None = None, extra_headers: dict[str, str] | None = None
    ) -> tuple[int, str, float]:
        headers = {
            "Content-Type": content_type,
            "User-Agent": "Slackbot 1.0",
            **sign(body, self.secret, timestamp),
            **(extra_headers or {}),
        }
        start = time.monotonic()
        async with aiohttp.ClientSession() as session, session.post(self.url, data=body, headers=headers) as resp:
            text = await resp.text()
            return resp.status, text, time.monotonic() - start

    async def command(self, text: str, user: str = "U_IC", channel: str = "C123", **kw):
        body = slash_command_body(text, user_id=user, channel_id=channel, **kw)
        return await self.post(body, "application/x-www-form-urlencoded")

    async def action(self, action_id: str, value: str, user: str = "U_IC", channel: str = "C123", **kw):
        body = block_actions_body(action_id, value, user, channel, **kw)
        return await self.post(body, "application/x-www-form-urlencoded")

    async def submit_view(self, callback_id: str, user: str = "U_IC", values: dict | None = None, **kw):
        body = view_submission_body(callback_id, user, values or {}, **kw)
        return await self.post(body, "application/x-www-form-urlencoded")

    async def event(
        self,
        event: dict,
        event_id: str = "Ev001",
        team_id: str = "T1",
        retry_num: int | None = None,
        retry_reason: str = "http_timeout",
    ):
        extra: dict[str, str] = {}
        timestamp = None
        if retry_num is not None:
            extra = {"X-Slack-Retry-Num": str(retry_num), "X-Slack-Retry-Reason": retry_reason}
            # Slack signs each retry when it sends it, at least its 3-second timeout after the
            # previous try: the same body under a later timestamp (never a byte-for-byte replay).
            timestamp = int(time.time()) + 3 * retry_num
        body = event_body(event, event_id, team_id)
        return await self.post(body, "application/json", timestamp=timestamp, extra_headers=extra)
