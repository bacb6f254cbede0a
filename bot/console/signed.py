"""Slack-signed requests to the app's own /slack/events, as Slack would send them."""

from __future__ import annotations

import json
import secrets
import time
from typing import Any
from urllib.parse import urlencode

import aiohttp

from fbworld.slack import TEAM_ID as TEAM
from fbworld.slack import sign

APP_ID = "ACONSOLE"


def command_body(text: str, user: str, user_name: str, channel: str, channel_name: str, response_url: str) -> bytes:
    return urlencode(
        {
            "team_id": TEAM,
            "team_domain": "console",
            "channel_id": channel,
            "channel_name": channel_name,
            "user_id": user,
            "user_name": user_name,
            "command": "/incident",
            "text": text,
            "api_app_id": APP_ID,
            "response_url": response_url,
            "trigger_id": secrets.token_hex(8),
        }
    ).encode()


def action_body(
    action_id: str,
    value: str,
    user: str,
    user_name: str,
    channel: str | None,
    message_ts: str | None,
    response_url: str,
) -> bytes:
    payload: dict[str, Any] = {
        "type": "block_actions",
        "api_app_id": APP_ID,
        "team": {"id": TEAM, "domain": "console"},
        "user": {"id": user, "username": user_name, "name": user_name, "team_id": TEAM},
        "actions": [
            {
                "action_id": action_id,
                "block_id": "b",
                "value": value,
                "type": "button",
                "action_ts": f"{time.time():.6f}",
            }
        ],
        "response_url": response_url,
        "trigger_id": secrets.token_hex(8),
    }
    if channel:
        payload["channel"] = {"id": channel}
        payload["container"] = {"type": "message", "message_ts": message_ts, "channel_id": channel}
    return urlencode({"payload": json.dumps(payload)}).encode()


def submission_body(view: dict[str, Any], text: str, user: str, user_name: str) -> bytes:
    """The modal submitted with ``text`` in its first input (the only kind Firebreak opens)."""
    values: dict[str, Any] = {}
    for b in view.get("blocks") or []:
        if b.get("type") == "input" and not values:
            action = str((b.get("element") or {}).get("action_id", ""))
            values[str(b.get("block_id", ""))] = {action: {"type": "plain_text_input", "value": text}}
    payload = {
        "type": "view_submission",
        "api_app_id": APP_ID,
        "team": {"id": TEAM, "domain": "console"},
        "user": {"id": user, "username": user_name, "name": user_name, "team_id": TEAM},
        "trigger_id": secrets.token_hex(8),
        "view": {**view, "state": {"values": values}},
    }
    return urlencode({"payload": json.dumps(payload)}).encode()


def message_body(channel: str, user: str, text: str, ts: str) -> bytes:
    """A person's channel message, as the Events API delivers it (JSON)."""
    return json.dumps(
        {
            "type": "event_callback",
            "team_id": TEAM,
            "api_app_id": APP_ID,
            "event_id": f"Ev{secrets.token_hex(6)}",
            "event_time": int(time.time()),
            "event": {
                "type": "message",
                "channel": channel,
                "user": user,
                "text": text,
                "ts": ts,
                "channel_type": "channel",
                "event_ts": ts,
            },
        }
    ).encode()


class Sender:
    def __init__(self, url: str, secret: str) -> None:
        self.url = url
        self.secret = secret
        self._session: aiohttp.ClientSession | None = None

    async def post(self, body: bytes, content_type: str = "application/x-www-form-urlencoded") -> tuple[int, str]:
        if self._session is None:
            self._session = aiohttp.ClientSession()
        headers = {"Content-Type": content_type, **sign(body, self.secret)}
        async with self._session.post(self.url, data=body, headers=headers) as resp:
            return resp.status, await resp.text()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
