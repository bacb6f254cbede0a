"""A small Slack Web API emulator for the console, on loopback.

It implements only the methods Firebreak calls, keeps channels and messages
in memory, and hands every message the app sends to ``on_event`` so the
console can print it. It never injects faults: that is the test fake's job.
"""

from __future__ import annotations

import itertools
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from bot.server import start_local

BOT_USER = "UFIREBREAK"
TEAM = "TCONSOLE"


class ApiError(Exception):
    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


@dataclass
class Channel:
    id: str
    name: str
    members: set[str] = field(default_factory=set)


@dataclass
class Message:
    channel: str
    ts: str
    text: str
    blocks: list[dict[str, Any]]
    pinned: bool = False


@dataclass
class Event:
    """Something the app did that a person in the workspace would see."""

    kind: str  # post | update | pin | ephemeral | reply | view | channel
    channel: str | None
    text: str = ""
    blocks: list[dict[str, Any]] = field(default_factory=list)
    ts: str | None = None
    user: str | None = None  # ephemeral / reply: who sees it
    view: dict[str, Any] | None = None  # view: the opened modal, with its id


def _args(request: web.Request, raw: bytes) -> dict[str, Any]:
    # slack_sdk sends chat.* and views.* as JSON, the rest as query/form params.
    args: dict[str, Any] = dict(request.query)
    if request.content_type == "application/json" and raw:
        args.update(json.loads(raw))
    elif raw:
        from urllib.parse import parse_qsl

        args.update(parse_qsl(raw.decode()))
    for key in ("blocks", "view"):
        if isinstance(args.get(key), str):
            args[key] = json.loads(args[key])
    return args


class SlackEmulator:
    def __init__(self, token: str, on_event: Callable[[Event], None], names: Callable[[str], str]) -> None:
        self.token = token
        self.on_event = on_event
        self.names = names  # user id -> display name, for users.info
        # A per-run tag keeps channel ids unique even against a Redis that outlives the console.
        self._tag = secrets.token_hex(2).upper()
        self._ids = itertools.count(1)
        self._ts = itertools.count(1)
        self.channels: dict[str, Channel] = {}
        self.messages: dict[tuple[str, str], Message] = {}
        self.base_url = ""
        self._runner: web.AppRunner | None = None
        self._methods: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "auth.test": self._auth_test,
            "conversations.create": self._create,
            "conversations.invite": self._invite,
            "conversations.join": self._join,
            "chat.postMessage": self._post,
            "chat.update": self._update,
            "chat.postEphemeral": self._ephemeral,
            "pins.add": self._pin,
            "views.open": self._view,
            "users.info": self._user,
        }

    # lifecycle --------------------------------------------------------------
    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/api/{method}", self._api)
        app.router.add_post("/response/{key}", self._response)
        self._runner, port = await start_local(app, access_log=False)
        self.base_url = f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def api_url(self) -> str:
        return f"{self.base_url}/api/"

    def response_url(self, key: str) -> str:
        return f"{self.base_url}/response/{key}"

    # workspace --------------------------------------------------------------
    def add_channel(self, name: str) -> Channel:
        ch = Channel(id=f"C{self._tag}{next(self._ids):04d}", name=name, members={BOT_USER})
        self.channels[ch.id] = ch
        return ch

    def user_message(self, channel: str, text: str) -> str:
        """A person's message (the console's `say`): stored so replies in its thread have a parent."""
        ch = self._channel(channel)
        msg = Message(ch.id, self._next_ts(), text, [])
        self.messages[(ch.id, msg.ts)] = msg
        return msg.ts

    def by_name(self, name: str) -> Channel | None:
        return next((c for c in self.channels.values() if c.name == name.lstrip("#")), None)

    def _channel(self, cid: Any) -> Channel:
        ch = self.channels.get(str(cid))
        if ch is None:
            raise ApiError("channel_not_found")
        return ch

    def _next_ts(self) -> str:
        return f"{int(time.time())}.{next(self._ts):06d}"

    # HTTP -------------------------------------------------------------------
    async def _api(self, request: web.Request) -> web.Response:
        raw = await request.read()
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return web.json_response({"ok": False, "error": "invalid_auth"})
        method = self._methods.get(request.match_info["method"])
        if method is None:
            return web.json_response({"ok": False, "error": "unknown_method"})
        try:
            return web.json_response({"ok": True, **method(_args(request, raw))})
        except ApiError as e:
            return web.json_response({"ok": False, "error": e.code})

    async def _response(self, request: web.Request) -> web.Response:
        body = json.loads(await request.read() or b"{}")
        key = request.match_info["key"]
        self.on_event(Event("reply", None, str(body.get("text", "")), body.get("blocks") or [], user=key))
        return web.Response(text="ok")

    # methods ----------------------------------------------------------------
    def _auth_test(self, _: dict[str, Any]) -> dict[str, Any]:
        return {
            "url": "https://console.invalid/",
            "team": "console",
            "user": "firebreak",
            "team_id": TEAM,
            "user_id": BOT_USER,
            "bot_id": "BFIREBREAK",
        }

    def _create(self, a: dict[str, Any]) -> dict[str, Any]:
        name = str(a.get("name", ""))
        if not name or len(name) > 80 or name != name.lower() or " " in name:
            raise ApiError("invalid_name")
        if self.by_name(name):
            raise ApiError("name_taken")
        ch = self.add_channel(name)
        self.on_event(Event("channel", ch.id, ch.name))
        return {"channel": {"id": ch.id, "name": ch.name, "is_channel": True, "created": int(time.time())}}

    def _invite(self, a: dict[str, Any]) -> dict[str, Any]:
        ch = self._channel(a.get("channel"))
        users = {u for u in str(a.get("users", "")).split(",") if u}
        if users <= ch.members:
            raise ApiError("already_in_channel")
        ch.members |= users
        return {"channel": {"id": ch.id, "name": ch.name}}

    def _join(self, a: dict[str, Any]) -> dict[str, Any]:
        ch = self._channel(a.get("channel"))
        ch.members.add(BOT_USER)
        return {"channel": {"id": ch.id, "name": ch.name}}

    def _post(self, a: dict[str, Any]) -> dict[str, Any]:
        ch = self._channel(a.get("channel"))
        if not a.get("text") and not a.get("blocks"):
            raise ApiError("no_text")
        msg = Message(ch.id, self._next_ts(), str(a.get("text", "")), a.get("blocks") or [])
        self.messages[(ch.id, msg.ts)] = msg
        self.on_event(Event("post", ch.id, msg.text, msg.blocks, msg.ts))
        return {"channel": ch.id, "ts": msg.ts}

    def _update(self, a: dict[str, Any]) -> dict[str, Any]:
        msg = self.messages.get((str(a.get("channel")), str(a.get("ts"))))
        if msg is None:
            raise ApiError("message_not_found")
        msg.text, msg.blocks = str(a.get("text", msg.text)), a.get("blocks") or []
        self.on_event(Event("update", msg.channel, msg.text, msg.blocks, msg.ts))
        return {"channel": msg.channel, "ts": msg.ts}

    def _ephemeral(self, a: dict[str, Any]) -> dict[str, Any]:
        ch = self._channel(a.get("channel"))
        self.on_event(Event("ephemeral", ch.id, str(a.get("text", "")), a.get("blocks") or [], user=a.get("user")))
        return {"message_ts": self._next_ts()}

    def _pin(self, a: dict[str, Any]) -> dict[str, Any]:
        msg = self.messages.get((str(a.get("channel")), str(a.get("timestamp"))))
        if msg is None:
            raise ApiError("message_not_found")
        if msg.pinned:
            raise ApiError("already_pinned")
        msg.pinned = True
        self.on_event(Event("pin", msg.channel, msg.text, ts=msg.ts))
        return {}

    def _view(self, a: dict[str, Any]) -> dict[str, Any]:
        view = a.get("view")
        if not a.get("trigger_id") or not isinstance(view, dict):
            raise ApiError("invalid_arguments")
        title = (view.get("title") or {}).get("text", "")
        opened = {**view, "id": f"V{next(self._ids):04d}"}
        self.on_event(Event("view", None, title, view.get("blocks") or [], view=opened))
        return {"view": opened}

    def _user(self, a: dict[str, Any]) -> dict[str, Any]:
        uid = str(a.get("user", ""))
        if not uid:
            raise ApiError("user_not_found")
        name = self.names(uid)
        return {
            "user": {
                "id": uid,
                "team_id": TEAM,
                "name": name,
                "real_name": name,
                "is_bot": uid == BOT_USER,
                "tz": "UTC",
                "profile": {"display_name": name, "real_name": name},
            }
        }
