"""SlackEmulator: an aiohttp server speaking the Slack Web API methods Firebreak calls, strictly.

One model of the Web API for the tests, bench/ and `firebreak console`: methods, Slack's error
names, the external upload flow, history with cursors and metadata, response_url posts. Every call
is recorded (``calls``). Two hooks: ``on_event`` is handed each thing a person in the workspace
would see (the console prints them), ``names`` answers users.info. Faults (errors, HTTP 5xx,
delays, 429s, broken uploads) are an opt-in layer: faults.FakeSlack, which the tests use.

Body formats (confirmed from slack_sdk 3.48 web/async_client.py + internal_utils.py):
  * chat.postMessage / chat.update / chat.postEphemeral / views.* are sent as JSON
    bodies (Content-Type: application/json;charset=utf-8).
  * most other methods (auth.test, conversations.*, chat.delete, pins.add, users.info)
    are sent with ``params=`` which aiohttp puts in the *URL query string*; the body is
    empty although Content-Type says application/x-www-form-urlencoded. Other
    clients (e.g. the sync WebClient, curl) put them in a form body. We merge all three.
  * the token travels as ``Authorization: Bearer xoxb-...`` (or a ``token`` arg).

Files go through Slack's external upload flow (files.upload is retired): files.getUploadURLExternal
hands out ``{base}/upload/v1/<key>``, which takes the bytes (raw body, or multipart with the file
part) without a token and answers 200 ``OK - <bytes>``; files.completeUploadExternal then shares
them. ``files(channel)`` / ``file(id)`` read them back (state.File: name, title, content, ...).

Scopes: the bot token has the scopes the app's manifest asks for (deploy/slack-app-manifest.yaml),
unless given others. A method called without the scope Slack's reference says it needs for that
conversation's kind (scopes.METHOD_SCOPES) answers ``missing_scope`` as Slack does, and posting in a
public channel the app is not in needs ``chat:write.public`` (else ``not_in_channel``).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Self

from aiohttp import BodyPartReader, web

from . import scopes as _scopes
from .socket_mode import OPEN, SocketMode
from .state import BOT_ID, BOT_USER_ID, TEAM_ID, File, SlackError, SlackState, UserGroup

UPLOAD_URL = "upload_url"  # the Call.method recorded for a POST to an upload URL
_JSON_FIELDS = ("blocks", "attachments", "view", "metadata", "files")
_LIST_TYPES = {
    "public_channel": _scopes.PUBLIC,
    "private_channel": _scopes.PRIVATE,
    "im": _scopes.IM,
    "mpim": _scopes.MPIM,
}


@dataclass
class Call:
    method: str
    args: dict[str, Any]
    headers: dict[str, str]
    timestamp: float = field(default_factory=time.time)
    http_verb: str = "POST"
    content_type: str = ""
    token: str | None = None


@dataclass
class ResponseUrlPost:
    key: str
    body: dict[str, Any]
    headers: dict[str, str]
    timestamp: float = field(default_factory=time.time)


@dataclass
class Event:
    """Something the app did that a person in the workspace would see (the ``on_event`` hook)."""

    kind: str  # post | update | pin | ephemeral | reply | view | channel
    channel: str | None
    text: str = ""
    blocks: list[dict[str, Any]] = field(default_factory=list)
    ts: str | None = None
    user: str | None = None  # ephemeral / reply: who sees it (reply: the response_url key)
    view: dict[str, Any] | None = None  # view: the opened modal, with its id
    file: str | None = None  # post of a shared file: its id (``file(id)``)


class SlackEmulator:
    """The Slack Web API + response_url endpoint. Use ``url = await start()``."""

    def __init__(
        self,
        clock: Callable[[], float] | None = None,
        *,
        token: str | None = None,
        on_event: Callable[[Event], None] | None = None,
        names: Callable[[str], str] | None = None,
        id_tag: str = "",
        scopes: Iterable[str] | None = None,
    ) -> None:
        """``clock``: what message ts are taken from (Slack's are the time of posting); None keeps
        the fixed-base counter. ``token``: the one bot token accepted (None: any ``xoxb-``).
        ``on_event``: handed each Event. ``names``: user id -> name for users.info (else
        ``add_user``'s). ``id_tag``: in every id made (see SlackState). ``scopes``: the bot token's
        scopes, in the order Slack lists them (None: the app manifest's; scopes.ALL_SCOPES for a
        test of the emulator's every method)."""
        self.state = SlackState(clock, id_tag)
        self.token = token
        self.on_event = on_event
        self.names = names
        self.calls: list[Call] = []
        self.responses: list[ResponseUrlPost] = []
        self._ephemerals: list[dict[str, Any]] = []
        self.views: dict[str, dict[str, Any]] = {}
        self.users: dict[str, dict[str, Any]] = {}
        if scopes is None:
            granted = _scopes.manifest_scopes()
        elif isinstance(scopes, (set, frozenset)):
            granted = sorted(scopes)  # a set has no order; Slack's list has a stable one
        else:
            granted = list(scopes)
        self.scopes: tuple[str, ...] = tuple(granted)  # assign to regrant (the app reinstalled)
        self._runner: web.AppRunner | None = None
        self.base_url = ""  # "http://127.0.0.1:PORT"
        self.socket = SocketMode()  # apps.connections.open and its WebSocket (socket_mode.py)
        self._handlers: dict[str, Callable[[dict], dict]] = {
            "auth.test": self._auth_test,
            "conversations.create": self._conv_create,
            "conversations.invite": self._conv_invite,
            "conversations.join": self._conv_join,
            "conversations.info": self._conv_info,
            "conversations.list": self._conv_list,
            "conversations.history": self._conv_history,
            "conversations.archive": self._conv_archive,
            "chat.postMessage": self._post_message,
            "chat.update": self._chat_update,
            "chat.postEphemeral": self._post_ephemeral,
            "chat.delete": self._chat_delete,
            "pins.add": self._pins_add,
            "views.open": self._views_open,
            "views.update": self._views_update,
            "users.info": self._users_info,
            "users.lookupByEmail": self._users_lookup_by_email,
            "files.getUploadURLExternal": self._files_get_upload_url,
            "files.completeUploadExternal": self._files_complete_upload,
            "files.info": self._files_info,
            "usergroups.list": self._usergroups_list,
            "usergroups.users.list": self._usergroups_users_list,
        }

    # lifecycle ----------------------------------------------------------
    async def start(self) -> str:
        app = web.Application()
        app.router.add_route("*", "/api/{method}", self._handle_api)
        app.router.add_post("/response/{key}", self._handle_response_url)
        app.router.add_route("*", "/upload/v1/{key}", self._handle_upload)
        app.router.add_get("/link/", self.socket.handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.base_url = self.socket.base_url = f"http://127.0.0.1:{port}"
        return self.api_url

    async def stop(self) -> None:
        await self.socket.close()  # a Socket Mode client's WebSocket would hold the cleanup up
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.stop()

    @property
    def api_url(self) -> str:
        return f"{self.base_url}/api/"

    # setup helpers --------------------------------------------------------
    def add_channel(
        self,
        name: str,
        members=(),
        bot_member: bool = True,
        channel_id: str | None = None,
        is_private: bool = False,
    ) -> str:
        return self.state.add_channel(name, members, bot_member, channel_id, is_private).id

    def add_user(self, user_id: str, name: str | None = None, real_name: str | None = None, **extra) -> None:
        self.users[user_id] = {"name": name, "real_name": real_name, **extra}

    def add_usergroup(self, handle: str, users=(), name: str | None = None, group_id: str | None = None) -> str:
        """A user group ``@handle`` with ``users`` in it, as an admin makes one; its id (S…)."""
        return self.state.add_usergroup(handle, users, name, group_id).id

    def set_usergroup_users(self, group: str, users) -> None:
        """The group (id or handle) now has exactly ``users`` (an admin editing it)."""
        self.state.set_usergroup_users(group, users)

    def disable_usergroup(self, group: str) -> None:
        self.state.disable_usergroup(group)

    def enable_usergroup(self, group: str) -> None:
        self.state.enable_usergroup(group)

    def usergroup(self, group: str) -> UserGroup:
        return self.state.usergroup(group)

    def response_url(self, key: str) -> str:
        return f"{self.base_url}/response/{key}"

    def join(self, channel: str, user: str) -> None:
        """``user`` is in ``channel`` (a person types only where they are a member)."""
        ch = self.state.channel(channel)
        if user not in ch.members:
            ch.members.append(user)

    def user_message(self, channel: str, user: str, text: str) -> str:
        """A person's message (the console's `say`), kept so replies in its thread have a parent."""
        return self.state.user_message(channel, user, text).ts

    def file_text(self, file_id: str) -> str:
        """A shared file's content (UTF-8), or "" when there is no such shared file."""
        f = self.state.files.get(file_id)
        return f.text if f is not None and f.completed else ""

    def _emit(self, event: Event) -> None:
        if self.on_event is not None:
            self.on_event(event)

    # the fault layer's hooks (faults.FakeSlack): no faults here ------------------
    async def _fault(self, method: str) -> web.Response | None:
        """An answer that stands in for ``method``'s, before the token is checked; None: none."""
        return None

    def _upload_fault(self) -> web.Response | None:
        return None

    def _received(self, data: bytes) -> bytes:
        """The bytes an upload URL keeps of ``data``."""
        return data

    # queries ----------------------------------------------------------------
    def calls_to(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    def messages(self, channel_id: str) -> list[dict[str, Any]]:
        return [
            {**m.to_api(), "channel": m.channel, "edits": list(m.edits)}
            for m in self.state.messages.get(channel_id, [])
        ]

    def channel(self, channel_id: str):
        """The state.Channel object (id, name, members, pins, created)."""
        return self.state.channels[channel_id]

    def files(self, channel: str | None = None) -> list[File]:
        """Files shared through completeUploadExternal (in ``channel``, when given), oldest first."""
        return [f for f in self.state.files.values() if f.completed and (channel is None or channel in f.channels)]

    def file(self, file_id: str) -> File:
        """A file by id, shared or not (state.File: name, title, length, content, channels, ...)."""
        return self.state.files[file_id]

    def ephemerals(self, channel: str | None = None, user: str | None = None) -> list[dict]:
        return [
            e
            for e in self._ephemerals
            if (channel is None or e["channel"] == channel) and (user is None or e["user"] == user)
        ]

    def responses_for(self, key: str) -> list[dict[str, Any]]:
        return [r.body for r in self.responses if r.key == key]

    async def wait_for(self, predicate: Callable[[Call], bool] | str, timeout: float = 5.0) -> Call:
        """Poll until a recorded call matches; a str matches by method name."""
        if isinstance(predicate, str):
            method = predicate
            predicate = lambda c: c.method == method  # noqa: E731
        deadline = time.monotonic() + timeout
        while True:
            for call in list(self.calls):
                if predicate(call):
                    return call
            if time.monotonic() >= deadline:
                seen = [c.method for c in self.calls]
                raise TimeoutError(f"no matching Slack call within {timeout}s; saw {seen}")
            await asyncio.sleep(0.01)

    async def wait_for_response(self, key: str | None = None, timeout: float = 5.0) -> ResponseUrlPost:
        deadline = time.monotonic() + timeout
        while True:
            for r in list(self.responses):
                if key is None or r.key == key:
                    return r
            if time.monotonic() >= deadline:
                raise TimeoutError(f"no response_url POST for {key!r} within {timeout}s")
            await asyncio.sleep(0.01)

    # HTTP plumbing --------------------------------------------------------
    @staticmethod
    async def _parse_args(request: web.Request) -> dict[str, Any]:
        args: dict[str, Any] = dict(request.query)
        ctype = request.content_type
        if ctype == "application/json":
            raw = await request.read()
            if raw:
                args.update(json.loads(raw))
        elif ctype in ("application/x-www-form-urlencoded", "multipart/form-data"):
            args.update({k: v for k, v in (await request.post()).items() if isinstance(v, str)})
        for key in _JSON_FIELDS:
            if isinstance(args.get(key), str) and args[key].strip()[:1] in ("[", "{"):
                args[key] = json.loads(args[key])
        return args

    async def _handle_api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        args = await self._parse_args(request)
        auth = request.headers.get("Authorization", "")
        token = auth[len("Bearer ") :] if auth.startswith("Bearer ") else None
        token = args.pop("token", None) or token
        self.calls.append(
            Call(
                method=method,
                args=args,
                headers=dict(request.headers),
                http_verb=request.method,
                content_type=request.content_type,
                token=token,
            )
        )

        fault = await self._fault(method)
        if fault is not None:
            return fault
        if not token:
            return web.json_response({"ok": False, "error": "not_authed"})
        if token.startswith("xapp-") or method == OPEN:
            # Slack's token types: an app-level token opens Socket Mode connections and nothing else.
            if not (token.startswith("xapp-") and method == OPEN):
                return web.json_response({"ok": False, "error": "not_allowed_token_type"})
            return web.json_response(self.socket.open(token))
        if not token.startswith("xoxb-") or (self.token is not None and token != self.token):
            return web.json_response({"ok": False, "error": "invalid_auth"})
        handler = self._handlers.get(method)
        if handler is None:
            return web.json_response({"ok": False, "error": "unknown_method"})
        needed = self._missing_scope(method, args)
        if needed is not None:
            # Slack's answer: a 200 naming the scope the call needed and the ones the token has.
            return web.json_response(
                {"ok": False, "error": "missing_scope", "needed": needed, "provided": ",".join(self.scopes)}
            )
        try:
            body = handler(args)
        except SlackError as e:
            body = {"ok": False, "error": e.code}
        return web.json_response(body)

    def _missing_scope(self, method: str, args: dict[str, Any]) -> str | None:
        """The scope ``method`` needs here that the token lacks (None: it has what it needs, or the
        method's own checks answer first: a channel the bot cannot see is channel_not_found)."""
        needs = _scopes.METHOD_SCOPES[method]  # every served method is in the table (world/tests/slack)
        if not needs:
            return None
        if _scopes.ANY in needs:
            return None if needs[_scopes.ANY] in self.scopes else needs[_scopes.ANY]
        if not any(s in self.scopes for s in needs.values()):
            return _scopes.needed(method, None)  # none of the method's scopes: Slack names the first
        for kind in self._kinds(method, args):
            of_kind = needs.get(kind)
            if of_kind is not None and of_kind not in self.scopes:
                return of_kind
        return None

    def _kinds(self, method: str, args: dict[str, Any]) -> list[str]:
        """The kinds of conversation the call is about (public, private, im): made, listed, or named
        by its ``channel``; none when the channel cannot be seen (the method says so itself)."""
        if method == "conversations.create":
            return [_scopes.PRIVATE if _flag(args.get("is_private")) else _scopes.PUBLIC]
        if method == "conversations.list":
            types = [t.strip() for t in str(args.get("types") or "public_channel").split(",") if t.strip()]
            return [_LIST_TYPES[t] for t in types if t in _LIST_TYPES]
        try:
            ch = self.state.visible_channel(args.get("channel"))
        except SlackError:
            return []
        if ch.id.startswith("D"):
            return [_scopes.IM]
        return [_scopes.PRIVATE if ch.is_private else _scopes.PUBLIC]

    async def _handle_response_url(self, request: web.Request) -> web.Response:
        raw = await request.read()
        try:
            body = json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            return web.Response(status=400, text="invalid_payload")
        key = request.match_info["key"]
        self.responses.append(ResponseUrlPost(key=key, body=body, headers=dict(request.headers)))
        self._emit(Event("reply", None, str(body.get("text", "")), body.get("blocks") or [], user=key))
        return web.Response(text="ok")

    async def _handle_upload(self, request: web.Request) -> web.Response:
        """The upload URL: POST only, raw bytes or a multipart form's file part; the URL itself
        is the credential (no token). Unknown, or spent by completeUploadExternal: 404. Recorded
        as a Call to UPLOAD_URL with args {"key", "bytes"}."""
        if request.method != "POST":
            return web.Response(status=405, text="Method Not Allowed")
        key = request.match_info["key"]
        if request.content_type == "multipart/form-data":
            data = b""
            reader = await request.multipart()
            async for part in reader:
                if isinstance(part, BodyPartReader) and part.name in ("file", "filename"):
                    data = bytes(await part.read(decode=True))
                    break
        else:
            data = await request.read()
        self.calls.append(
            Call(
                method=UPLOAD_URL,
                args={"key": key, "bytes": len(data)},
                headers=dict(request.headers),
                content_type=request.content_type,
            )
        )
        fault = self._upload_fault()
        if fault is not None:
            return fault
        received = len(data)
        data = self._received(data)
        f = self.state.receive_upload(key, data)
        if f is None:
            return web.Response(status=404, text="Not Found")
        return web.Response(text=f"OK - {received}")

    # Web API methods ------------------------------------------------------
    def _auth_test(self, args: dict) -> dict:
        return {
            "ok": True,
            "url": "https://fake.slack.com/",
            "team": "Fake Team",
            "user": "firebreak",
            "team_id": TEAM_ID,
            "user_id": BOT_USER_ID,
            "bot_id": BOT_ID,
            "is_enterprise_install": False,
        }

    def _conv_create(self, args: dict) -> dict:
        ch = self.state.create_channel(args.get("name", ""), is_private=_flag(args.get("is_private")))
        self._emit(Event("channel", ch.id, ch.name))
        return {"ok": True, "channel": ch.to_api()}

    def _conv_invite(self, args: dict) -> dict:
        ch = self.state.writable_channel(args.get("channel"))
        if ch.archived:
            raise SlackError("is_archived")
        users = [u.strip() for u in str(args.get("users", "")).split(",") if u.strip()]
        if not users:
            raise SlackError("no_user")
        if BOT_USER_ID in users:
            raise SlackError("cant_invite_self")
        if any(u in ch.members for u in users):
            raise SlackError("already_in_channel")
        ch.members.extend(users)
        return {"ok": True, "channel": ch.to_api()}

    def _conv_join(self, args: dict) -> dict:
        ch = self.state.visible_channel(args.get("channel"))
        if ch.is_private:  # Slack: a private channel is joined only by invitation
            raise SlackError("method_not_supported_for_channel_type")
        body: dict[str, Any] = {"ok": True}
        if ch.bot_member:
            body["warning"] = "already_in_channel"
        ch.bot_member = True
        if BOT_USER_ID not in ch.members:
            ch.members.append(BOT_USER_ID)
        body["channel"] = ch.to_api()
        return body

    def _conv_info(self, args: dict) -> dict:
        return {"ok": True, "channel": self.state.visible_channel(args.get("channel")).to_api()}

    def _conv_list(self, args: dict) -> dict:
        """As Slack: `types` (default public_channel) picks public and/or private channels; a private
        channel is listed only to a member; archived ones only without exclude_archived."""
        types = {t.strip() for t in str(args.get("types") or "public_channel").split(",") if t.strip()}
        unknown = types - {"public_channel", "private_channel", "mpim", "im"}
        if unknown:
            raise SlackError("invalid_types")
        skip_archived = _flag(args.get("exclude_archived"))
        listed = [
            ch.to_api()
            for ch in self.state.channels.values()
            if not ch.id.startswith("D")
            and ("private_channel" if ch.is_private else "public_channel") in types
            and (ch.bot_member or not ch.is_private)
            and not (skip_archived and ch.archived)
        ]
        return {"ok": True, "channels": listed, "response_metadata": {"next_cursor": ""}}

    def _conv_history(self, args: dict) -> dict:
        """As Slack: the channel's top-level messages (thread replies are left out), newest first,
        strictly between `oldest` and `latest` (`inclusive` takes the bounds in), `limit` per page
        (default 100, at most 999) with an opaque `cursor`, and message metadata only with
        `include_all_metadata`."""
        ch = self.state.writable_channel(args.get("channel"))
        inclusive = _flag(args.get("inclusive"))
        oldest, latest = _ts_arg(args, "oldest", 0.0), _ts_arg(args, "latest", float("inf"))
        try:
            limit = int(args.get("limit") or 100)
        except ValueError:
            raise SlackError("invalid_limit") from None
        limit = min(max(limit, 1), 999)
        top = [m for m in reversed(self.state.messages[ch.id]) if not m.thread_ts or m.thread_ts == m.ts]

        def within(ts: float) -> bool:
            lo = ts >= oldest if inclusive else ts > oldest
            hi = ts <= latest if inclusive else ts < latest
            return lo and hi

        msgs = [m for m in top if within(float(m.ts))]
        cursor = args.get("cursor")
        if cursor:
            try:
                before = base64.b64decode(str(cursor), validate=True).decode().removeprefix("next_ts:")
                start = next(i for i, m in enumerate(msgs) if m.ts.replace(".", "") == before)
            except (binascii.Error, UnicodeDecodeError, StopIteration):
                raise SlackError("invalid_cursor") from None
            msgs = msgs[start:]
        page, rest = msgs[:limit], msgs[limit:]
        meta = _flag(args.get("include_all_metadata"))
        body: dict[str, Any] = {
            "ok": True,
            "messages": [m.to_api(include_metadata=meta) for m in page],
            "has_more": bool(rest),
            "pin_count": len(ch.pins),
        }
        if rest:
            token = base64.b64encode(f"next_ts:{rest[0].ts.replace('.', '')}".encode()).decode()
            body["response_metadata"] = {"next_cursor": token}
        return body

    def _conv_archive(self, args: dict) -> dict:
        self.state.archive(args.get("channel"))
        return {"ok": True}

    def _post_message(self, args: dict) -> dict:
        if not args.get("text") and not args.get("blocks") and not args.get("attachments"):
            raise SlackError("no_text")
        metadata = args.get("metadata")
        if metadata is not None:
            # Slack: a JSON object with a string event_type and an object event_payload.
            if not isinstance(metadata, dict):
                raise SlackError("invalid_metadata_format")
            kind, payload = metadata.get("event_type"), metadata.get("event_payload")
            if not isinstance(kind, str) or not kind or not isinstance(payload, dict):
                raise SlackError("invalid_metadata_schema")
        msg = self.state.post(
            args.get("channel"),
            args.get("text", ""),
            args.get("blocks"),
            args.get("thread_ts"),
            metadata,
            as_nonmember=_scopes.POST_AS_NONMEMBER in self.scopes,
        )
        self._emit(Event("post", msg.channel, msg.text, msg.blocks or [], msg.ts))
        return {"ok": True, "channel": msg.channel, "ts": msg.ts, "message": msg.to_api(include_metadata=True)}

    def _chat_update(self, args: dict) -> dict:
        msg = self.state.update(args.get("channel"), args.get("ts"), args.get("text"), args.get("blocks"))
        self._emit(Event("update", msg.channel, msg.text, msg.blocks or [], msg.ts))
        return {"ok": True, "channel": msg.channel, "ts": msg.ts, "text": msg.text, "message": msg.to_api()}

    def _post_ephemeral(self, args: dict) -> dict:
        if not args.get("user"):
            raise SlackError("user_not_found")
        ch = self.state.writable_channel(args.get("channel"))
        if args["user"] not in ch.members:  # Slack shows an ephemeral only to a member
            raise SlackError("user_not_in_channel")
        ts = self.state.next_ts()
        self._ephemerals.append(
            {
                "channel": ch.id,
                "user": args["user"],
                "message_ts": ts,
                "text": args.get("text", ""),
                "blocks": args.get("blocks"),
                "thread_ts": args.get("thread_ts"),
            }
        )
        self._emit(Event("ephemeral", ch.id, str(args.get("text", "")), args.get("blocks") or [], user=args["user"]))
        return {"ok": True, "message_ts": ts}

    def _chat_delete(self, args: dict) -> dict:
        msg = self.state.delete(args.get("channel"), args.get("ts"))
        return {"ok": True, "channel": msg.channel, "ts": msg.ts}

    def _pins_add(self, args: dict) -> dict:
        self.state.pin(args.get("channel"), args.get("timestamp"))
        msg = self.state.find_message(args.get("channel"), args.get("timestamp"))
        self._emit(Event("pin", msg.channel, msg.text, ts=msg.ts))
        return {"ok": True}

    def _views_open(self, args: dict) -> dict:
        if not args.get("trigger_id") or not isinstance(args.get("view"), dict):
            raise SlackError("invalid_arguments")
        view_id = self.state.next_id("V")
        opened = self._store_view(view_id, args["view"])
        title = (opened.get("title") or {}).get("text", "")
        self._emit(Event("view", None, title, opened.get("blocks") or [], view=opened))
        return {"ok": True, "view": opened}

    def _views_update(self, args: dict) -> dict:
        view_id = args.get("view_id")
        if not view_id and args.get("external_id"):
            view_id = next((k for k, v in self.views.items() if v.get("external_id") == args["external_id"]), None)
        if view_id not in self.views:
            raise SlackError("not_found")
        if not isinstance(args.get("view"), dict):
            raise SlackError("invalid_arguments")
        return {"ok": True, "view": self._store_view(view_id, args["view"])}

    def _store_view(self, view_id: str, view: dict) -> dict:
        stored = {
            **view,
            "id": view_id,
            "team_id": TEAM_ID,
            "app_id": "AFAKE",
            "bot_id": BOT_ID,
            "hash": self.state.next_ts(),
            "state": {"values": {}},
        }
        self.views[view_id] = stored
        return stored

    def _users_info(self, args: dict) -> dict:
        uid = args.get("user")
        if not uid:
            raise SlackError("user_not_found")
        extra = dict(self.users.get(uid, {}))
        named = self.names(uid) if self.names is not None else None
        name = extra.pop("name", None) or named or uid.lower()
        real_name = extra.pop("real_name", None) or named or f"User {uid}"
        user = {
            "id": uid,
            "team_id": TEAM_ID,
            "name": name,
            "real_name": real_name,
            "deleted": False,
            "is_bot": uid == BOT_USER_ID,
            "tz": "UTC",
            "tz_label": "Coordinated Universal Time",
            "tz_offset": 0,
            "profile": {"real_name": real_name, "display_name": name, "email": f"{name}@example.com"},
            **extra,
        }
        return {"ok": True, "user": user}

    def _users_lookup_by_email(self, args: dict) -> dict:
        """As Slack: the member (one ``add_user`` made) whose profile has ``email``, in users.info's
        shape; else users_not_found."""
        email = str(args.get("email") or "").strip().lower()
        if not email:
            raise SlackError("invalid_arguments")
        for uid in list(self.users):
            user = self._users_info({"user": uid})["user"]
            if str(user["profile"].get("email", "")).lower() == email:
                return {"ok": True, "user": user}
        raise SlackError("users_not_found")

    def _files_get_upload_url(self, args: dict) -> dict:
        f = self.state.reserve_file(
            args.get("filename"), args.get("length"), args.get("alt_txt"), args.get("snippet_type")
        )
        return {"ok": True, "upload_url": f"{self.base_url}/upload/v1/{f.upload_key}", "file_id": f.id}

    def _files_complete_upload(self, args: dict) -> dict:
        channels = [c.strip() for c in str(args.get("channels") or "").split(",") if c.strip()]
        if args.get("channel_id"):
            channels = [str(args["channel_id"]), *[c for c in channels if c != args["channel_id"]]]
        done = self.state.complete_files(
            args.get("files"), channels, args.get("initial_comment"), args.get("thread_ts")
        )
        comment = str(args.get("initial_comment") or "")
        for channel in dict.fromkeys(c for f in done for c in f.channels):
            for f in done:  # one Event per file: a person sees one line per shared file
                text = "\n".join(part for part in (comment if f is done[0] else "", f.label()) if part)
                self._emit(Event("post", channel, text, [], f.message_ts[channel], file=f.id))
        # As Slack: the shares are filled in asynchronously, so the answer lists the files only.
        return {"ok": True, "files": [f.to_api() for f in done]}

    def _files_info(self, args: dict) -> dict:
        f = self.state.files.get(str(args.get("file") or ""))
        if f is None or not f.completed:
            raise SlackError("file_not_found")
        return {"ok": True, "file": {**f.to_api(), "channels": list(f.channels)}, "comments": []}

    def _usergroups_list(self, args: dict) -> dict:
        """As Slack: every group, enabled only unless ``include_disabled``; members only with
        ``include_users``, their number with ``include_count``."""
        disabled, users, count = (_flag(args.get(k)) for k in ("include_disabled", "include_users", "include_count"))
        groups = [g for g in self.state.usergroups.values() if disabled or not g.disabled_at]
        return {"ok": True, "usergroups": [g.to_api(users, count) for g in groups]}

    def _usergroups_users_list(self, args: dict) -> dict:
        """As Slack: ``usergroup`` (an id, S…) is required; unknown, or disabled without
        ``include_disabled``, is no_such_subteam."""
        group = args.get("usergroup")
        if not group:
            raise SlackError("invalid_arguments")
        if str(group) not in self.state.usergroups:  # an id only: Slack does not take a handle here
            raise SlackError("no_such_subteam")
        g = self.state.usergroup(str(group), include_disabled=_flag(args.get("include_disabled")))
        return {"ok": True, "users": list(g.users)}


def _flag(value: Any) -> bool:
    """A boolean Web API argument as Slack reads it ("true", "1", true)."""
    return value is True or str(value).lower() in ("true", "1")


def _ts_arg(args: dict, name: str, default: float) -> float:
    raw = args.get(name)
    if raw in (None, ""):
        return default
    try:
        return float(raw)
    except (TypeError, ValueError):
        raise SlackError(f"invalid_ts_{name}") from None
