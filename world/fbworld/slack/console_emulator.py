"""A small Slack Web API emulator for the console, on loopback.

It implements only the methods Firebreak calls, keeps channels and messages
in memory, and hands every message the app sends to ``on_event`` so the
console can print it. It never injects faults: that is the test fake's job.

Files come through Slack's external upload flow (files.getUploadURLExternal, the
bytes POSTed to the upload URL, files.completeUploadExternal); a shared file is
shown as a post "[file] <title> (<n> lines)" and kept in ``files`` (``file_text``).
"""

from __future__ import annotations

import itertools
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import BodyPartReader, web

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
    files: list[str] = field(default_factory=list)  # a file share: the shared files' ids


@dataclass
class File:
    """An uploaded file: reserved (``length``), its bytes received, then shared in ``channel``."""

    id: str
    name: str
    length: int
    key: str  # the upload URL's last segment
    content: bytes | None = None
    title: str = ""
    channel: str | None = None
    comment: str = ""
    shared: bool = False

    @property
    def text(self) -> str:
        return (self.content or b"").decode("utf-8", errors="replace")

    @property
    def lines(self) -> int:
        return len(self.text.splitlines())

    def label(self) -> str:
        n = self.lines
        return f"[file] {self.title or self.name} ({n} line{'' if n == 1 else 's'})"


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
    file: str | None = None  # post of a shared file: its id (content in SlackEmulator.files)


def _args(request: web.Request, raw: bytes) -> dict[str, Any]:
    # slack_sdk sends chat.* and views.* as JSON, the rest as query/form params.
    args: dict[str, Any] = dict(request.query)
    if request.content_type == "application/json" and raw:
        args.update(json.loads(raw))
    elif raw:
        from urllib.parse import parse_qsl

        args.update(parse_qsl(raw.decode()))
    for key in ("blocks", "view", "files"):
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
        self.files: dict[str, File] = {}
        self._upload_keys: dict[str, str] = {}  # upload URL key -> file id
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
            "files.getUploadURLExternal": self._upload_url,
            "files.completeUploadExternal": self._complete_upload,
        }

    # lifecycle --------------------------------------------------------------
    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/api/{method}", self._api)
        app.router.add_post("/response/{key}", self._response)
        app.router.add_post("/upload/{key}", self._upload)
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

    def file_text(self, file_id: str) -> str:
        """A shared file's content (UTF-8), or "" when there is no such file."""
        f = self.files.get(file_id)
        return f.text if f is not None and f.shared else ""

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

    async def _upload(self, request: web.Request) -> web.Response:
        """An upload URL: the bytes, raw or as a multipart form's file part (no token)."""
        f = self.files.get(self._upload_keys.get(request.match_info["key"], ""))
        if f is None or f.shared:
            return web.Response(status=404, text="Not Found")
        if request.content_type == "multipart/form-data":
            data = b""
            async for part in await request.multipart():
                if isinstance(part, BodyPartReader) and part.name in ("file", "filename"):
                    data = bytes(await part.read(decode=True))
                    break
        else:
            data = await request.read()
        f.content = data
        return web.Response(text=f"OK - {len(data)}")

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

    def _upload_url(self, a: dict[str, Any]) -> dict[str, Any]:
        try:
            length = int(str(a.get("length", "")))
        except ValueError:
            raise ApiError("invalid_arguments") from None
        if not a.get("filename") or length <= 0:
            raise ApiError("missing_argument")
        f = File(f"F{self._tag}{next(self._ids):04d}", str(a["filename"]), length, secrets.token_urlsafe(16))
        self.files[f.id], self._upload_keys[f.key] = f, f.id
        return {"upload_url": f"{self.base_url}/upload/{f.key}", "file_id": f.id}

    def _complete_upload(self, a: dict[str, Any]) -> dict[str, Any]:
        entries = a.get("files")
        if not isinstance(entries, list) or not entries:
            raise ApiError("invalid_arguments")
        picked: list[tuple[File, str]] = []
        for entry in entries:
            f = self.files.get(str(entry.get("id", ""))) if isinstance(entry, dict) else None
            if f is None or f.shared or f.content is None:
                raise ApiError("file_not_found")
            if len(f.content) != f.length:
                raise ApiError("file_upload_size_mismatch")
            picked.append((f, str(entry.get("title") or f.name)))
        ch = self._channel(a.get("channel_id")) if a.get("channel_id") else None
        if ch is not None and BOT_USER not in ch.members:
            raise ApiError("not_in_channel")
        for f, title in picked:
            f.title, f.shared, f.comment = title, True, str(a.get("initial_comment") or "")
            f.channel = ch.id if ch else None
            self._upload_keys.pop(f.key, None)
        if ch is not None:
            comment = str(a.get("initial_comment") or "")
            ids = [f.id for f, _ in picked]
            msg = Message(ch.id, self._next_ts(), comment, [], files=ids)
            self.messages[(ch.id, msg.ts)] = msg
            for f, _ in picked:
                # One post per file, as the console prints one line per thing it shows.
                text = "\n".join(part for part in (comment if f is picked[0][0] else "", f.label()) if part)
                self.on_event(Event("post", ch.id, text, [], msg.ts, file=f.id))
        return {"files": [{"id": f.id, "name": f.name, "title": f.title} for f, _ in picked]}

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
