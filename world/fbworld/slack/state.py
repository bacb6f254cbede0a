"""In-memory Slack workspace state: the model the Slack emulator (server.py) serves."""

from __future__ import annotations

import itertools
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

BOT_USER_ID = "UBOT"
BOT_ID = "BBOT"
TEAM_ID = "T1"

_NAME_RE = re.compile(r"^[a-z0-9_-]{1,80}$")
_HANDLE_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,79}$")


class SlackError(Exception):
    """Raised by state operations; becomes {"ok": false, "error": code}."""

    def __init__(self, code: str):
        super().__init__(code)
        self.code = code


@dataclass
class Channel:
    id: str
    name: str
    members: list[str] = field(default_factory=list)
    pins: list[str] = field(default_factory=list)
    created: int = field(default_factory=lambda: int(time.time()))
    bot_member: bool = True
    archived: bool = False
    is_general: bool = False
    # A private channel: seen, joined and posted to only by its members (the bot included).
    is_private: bool = False

    def to_api(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "is_channel": not self.is_private,
            "is_group": self.is_private,
            "is_private": self.is_private,
            "is_archived": self.archived,
            "is_general": self.is_general,
            "is_member": self.bot_member,
            "created": self.created,
            "creator": BOT_USER_ID,
            "num_members": len(self.members),
        }


@dataclass
class Message:
    ts: str
    channel: str
    text: str = ""
    blocks: list | None = None
    thread_ts: str | None = None
    user: str = BOT_USER_ID
    edits: list[dict[str, Any]] = field(default_factory=list)
    metadata: dict[str, Any] | None = None  # chat.postMessage `metadata` (event_type, event_payload)
    subtype: str | None = None  # e.g. "channel_archive", "file_share"
    files: list[dict[str, Any]] | None = None  # a file share: the shared files, as Slack lists them

    def to_api(self, include_metadata: bool = False) -> dict[str, Any]:
        msg: dict[str, Any] = {
            "type": "message",
            "user": self.user,
            "text": self.text,
            "ts": self.ts,
            "team": TEAM_ID,
        }
        if self.subtype:
            msg["subtype"] = self.subtype
        if self.subtype in (None, "file_share"):  # system messages (channel_archive) carry no bot_id
            msg["bot_id"] = BOT_ID
        if self.files is not None:
            msg["files"] = [dict(f) for f in self.files]
        if self.blocks is not None:
            msg["blocks"] = self.blocks
        if self.metadata is not None and include_metadata:
            msg["metadata"] = self.metadata
        if self.thread_ts:
            msg["thread_ts"] = self.thread_ts
        if self.edits:
            msg["edited"] = {"user": BOT_USER_ID, "ts": self.edits[-1]["edited_ts"]}
        return msg


@dataclass
class File:
    """One file of the external upload flow: reserved by files.getUploadURLExternal (``length``
    promised), its bytes POSTed to the upload URL (``content``), then shared by
    files.completeUploadExternal (``completed``, ``channel``, ``title``, ``initial_comment``)."""

    id: str
    name: str
    length: int
    upload_key: str
    alt_txt: str | None = None
    snippet_type: str | None = None
    content: bytes | None = None  # None until the upload URL has received the bytes
    uploads: int = 0  # POSTs to the upload URL (a retried upload replaces the bytes)
    title: str = ""
    completed: bool = False
    channels: list[str] = field(default_factory=list)  # where it was shared (none: private)
    initial_comment: str | None = None
    thread_ts: str | None = None
    message_ts: dict[str, str] = field(default_factory=dict)  # channel -> its file-share message

    @property
    def channel(self) -> str | None:
        return self.channels[0] if self.channels else None

    created: int = field(default_factory=lambda: int(time.time()))
    user: str = BOT_USER_ID

    @property
    def text(self) -> str:
        return (self.content or b"").decode("utf-8", errors="replace")

    def label(self) -> str:
        """How a person sees the shared file in the channel: "[file] <title> (<n> lines)"."""
        n = len(self.text.splitlines())
        return f"[file] {self.title or self.name} ({n} line{'' if n == 1 else 's'})"

    def to_api(self) -> dict[str, Any]:
        """The file object completeUploadExternal and a file_share message carry (a subset)."""
        mode = "snippet" if self.snippet_type else "hosted"
        body: dict[str, Any] = {
            "id": self.id,
            "created": self.created,
            "timestamp": self.created,
            "name": self.name,
            "title": self.title or self.name,
            "mimetype": "text/plain",
            "filetype": self.snippet_type or "text",
            "pretty_type": "Plain Text",
            "user": self.user,
            "user_team": TEAM_ID,
            "mode": mode,
            "editable": mode == "snippet",
            "is_external": False,
            "external_type": "",
            "is_public": False,
            "size": len(self.content or b""),
            "url_private": f"https://files.fake.slack.com/files-pri/{TEAM_ID}-{self.id}/{self.name}",
            "permalink": f"https://fake.slack.com/files/{BOT_USER_ID}/{self.id}/{self.name}",
        }
        if self.alt_txt:
            body["alt_txt"] = self.alt_txt
        return body


@dataclass
class UserGroup:
    """A user group (``@ml-oncall``), as usergroups.list shows it. Slack never deletes one: it is
    disabled (``date_delete`` set) and can be enabled again."""

    id: str
    handle: str
    name: str
    users: list[str] = field(default_factory=list)
    disabled_at: int = 0
    created: int = field(default_factory=lambda: int(time.time()))
    updated: int = 0

    def to_api(self, include_users: bool = False, include_count: bool = False) -> dict[str, Any]:
        body: dict[str, Any] = {
            "id": self.id,
            "team_id": TEAM_ID,
            "is_usergroup": True,
            "is_subteam": True,
            "name": self.name,
            "description": "",
            "handle": self.handle,
            "is_external": False,
            "date_create": self.created,
            "date_update": self.updated or self.created,
            "date_delete": self.disabled_at,
            "auto_type": None,
            "created_by": "USLACKBOT",
            "updated_by": "USLACKBOT",
            "deleted_by": "USLACKBOT" if self.disabled_at else None,
            "prefs": {"channels": [], "groups": []},
        }
        if include_users:
            body["users"] = list(self.users)
        if include_count:
            body["user_count"] = len(self.users)
        return body


class SlackState:
    """Channels, messages and ids of one fake workspace."""

    def __init__(self, clock: Callable[[], float] | None = None, id_tag: str = "") -> None:
        """``id_tag``: put in every id made here (C<tag>00000001), so that ids stay unique against
        state kept by the app from an earlier run (a Redis that outlives the console)."""
        self._tag = id_tag
        self.channels: dict[str, Channel] = {}
        self.messages: dict[str, list[Message]] = {}
        self._ts_counter = itertools.count(100)
        self._id_counter = itertools.count(1)
        self._clock = clock
        self._last_ts = 0.0
        self.files: dict[str, File] = {}
        self._uploads: dict[str, str] = {}  # upload-URL key -> file id
        self.usergroups: dict[str, UserGroup] = {}  # id -> group

    # ids --------------------------------------------------------------
    def next_ts(self) -> str:
        """Unique, strictly increasing Slack-style timestamps. With a clock they are its time, as
        Slack's are the time of posting (`oldest`/`latest` in conversations.history compare them
        with the caller's clock); without one, a fixed base and a counter."""
        if self._clock is None:
            return f"1700000000.{next(self._ts_counter):06d}"
        self._last_ts = max(round(self._clock(), 6), round(self._last_ts + 0.000001, 6))
        return f"{self._last_ts:.6f}"

    def next_id(self, prefix: str) -> str:
        return f"{prefix}{self._tag}{next(self._id_counter):08d}"

    # channels ---------------------------------------------------------
    def create_channel(self, name: str, members=(), bot_member: bool = True, is_private: bool = False) -> Channel:
        if not name or not _NAME_RE.match(name):
            raise SlackError("invalid_name_specials")
        if self.find_by_name(name):
            raise SlackError("name_taken")
        ch = Channel(
            id=self.next_id("C"), name=name, members=list(members), bot_member=bot_member, is_private=is_private
        )
        if bot_member and BOT_USER_ID not in ch.members:
            ch.members.append(BOT_USER_ID)
        self.channels[ch.id] = ch
        self.messages[ch.id] = []
        return ch

    def add_channel(
        self,
        name: str,
        members=(),
        bot_member: bool = True,
        channel_id: str | None = None,
        is_private: bool = False,
    ) -> Channel:
        ch = self.create_channel(name, members, bot_member, is_private)
        if channel_id:
            del self.channels[ch.id], self.messages[ch.id]
            ch.id = channel_id
            self.channels[ch.id], self.messages[ch.id] = ch, []
        return ch

    def dm_channel(self, user: str) -> Channel:
        """The IM channel "D…" with a user (posting to a user id opens it)."""
        dm_id = "D" + user
        if dm_id not in self.channels:
            ch = Channel(id=dm_id, name=user, members=[user, BOT_USER_ID])
            self.channels[dm_id], self.messages[dm_id] = ch, []
        return self.channels[dm_id]

    def find_by_name(self, name: str) -> Channel | None:
        name = name.lstrip("#")
        return next((c for c in self.channels.values() if c.name == name), None)

    def channel(self, channel: str | None) -> Channel:
        """Resolve a channel id (or "#name"/name) or raise channel_not_found."""
        if channel and channel in self.channels:
            return self.channels[channel]
        if channel and channel[0] in "UW" and channel[1:].isalnum() and channel.isupper():
            return self.dm_channel(channel)
        found = self.find_by_name(channel) if channel else None
        if found is None:
            raise SlackError("channel_not_found")
        return found

    def visible_channel(self, channel: str | None) -> Channel:
        """A channel as the bot may see it: Slack answers channel_not_found for a private channel
        the caller is not in, as if it did not exist."""
        ch = self.channel(channel)
        if ch.is_private and not ch.bot_member:
            raise SlackError("channel_not_found")
        return ch

    def writable_channel(self, channel: str | None) -> Channel:
        ch = self.visible_channel(channel)
        if not ch.bot_member:
            raise SlackError("not_in_channel")
        return ch

    def archive(self, channel: str | None) -> Channel:
        """conversations.archive: what Slack refuses, then the channel archived with its system message."""
        if channel and channel.startswith("D"):
            raise SlackError("method_not_supported_for_channel_type")
        ch = self.channel(channel)
        if ch.archived:
            raise SlackError("already_archived")
        if ch.is_general:
            raise SlackError("cant_archive_general")
        if not ch.bot_member:
            raise SlackError("not_in_channel")
        ch.archived = True
        self.messages[ch.id].append(
            Message(
                ts=self.next_ts(),
                channel=ch.id,
                text=f"<@{BOT_USER_ID}> archived the channel",
                subtype="channel_archive",
            )
        )
        return ch

    # messages ---------------------------------------------------------
    def post(
        self, channel: str | None, text: str, blocks=None, thread_ts=None, metadata=None, as_nonmember: bool = False
    ) -> Message:
        """chat.postMessage. ``as_nonmember`` (the chat:write.public scope): a public channel the
        bot is not in takes the post too, and the bot stays out of it."""
        ch = self.visible_channel(channel)
        if not ch.bot_member and not (as_nonmember and not ch.is_private):
            raise SlackError("not_in_channel")
        if ch.archived:
            raise SlackError("is_archived")
        msg = Message(
            ts=self.next_ts(),
            channel=ch.id,
            text=text or "",
            blocks=blocks,
            thread_ts=thread_ts or None,
            metadata=metadata,
        )
        self.messages[ch.id].append(msg)
        return msg

    def user_message(self, channel: str | None, user: str, text: str) -> Message:
        """A person's message in a channel they are in (the bot need not be)."""
        ch = self.channel(channel)
        if ch.archived:
            raise SlackError("is_archived")
        if user not in ch.members:
            if ch.is_private:  # nobody walks into a private channel: they are invited
                raise SlackError("not_in_channel")
            ch.members.append(user)
        msg = Message(ts=self.next_ts(), channel=ch.id, text=text, user=user)
        self.messages[ch.id].append(msg)
        return msg

    def find_message(self, channel: str | None, ts: str | None) -> Message:
        ch = self.channel(channel)
        for msg in self.messages[ch.id]:
            if msg.ts == ts:
                return msg
        raise SlackError("message_not_found")

    def update(self, channel: str | None, ts: str | None, text=None, blocks=None) -> Message:
        msg = self.find_message(channel, ts)
        msg.edits.append({"text": msg.text, "blocks": msg.blocks, "edited_ts": self.next_ts()})
        if text is not None:
            msg.text = text
        if blocks is not None:
            msg.blocks = blocks
        return msg

    def delete(self, channel: str | None, ts: str | None) -> Message:
        msg = self.find_message(channel, ts)
        self.messages[msg.channel].remove(msg)
        return msg

    def pin(self, channel: str | None, ts: str | None) -> None:
        msg = self.find_message(channel, ts)
        pins = self.channels[msg.channel].pins
        if ts in pins:
            raise SlackError("already_pinned")
        pins.append(msg.ts)

    # user groups ------------------------------------------------------
    def _now(self) -> int:
        return int(self._clock() if self._clock is not None else time.time())

    def add_usergroup(self, handle: str, users=(), name: str | None = None, group_id: str | None = None) -> UserGroup:
        """usergroups.create, as a workspace admin would (not a Web API method Firebreak calls)."""
        handle = handle.lstrip("@")
        if not _HANDLE_RE.match(handle):
            raise SlackError("invalid_handle")  # a setup mistake in the test or the demo
        if any(g.handle == handle for g in self.usergroups.values()):
            raise SlackError("name_already_exists")
        g = UserGroup(
            id=group_id or self.next_id("S"), handle=handle, name=name or handle, users=list(users), created=self._now()
        )
        self.usergroups[g.id] = g
        return g

    def usergroup(self, group: str | None, include_disabled: bool = True) -> UserGroup:
        """A group by id (S…) or handle (@h or h); no_such_subteam when there is none (or it is
        disabled and ``include_disabled`` is false)."""
        key = (group or "").lstrip("@")
        g = self.usergroups.get(key) or next((x for x in self.usergroups.values() if x.handle == key), None)
        if g is None or (g.disabled_at and not include_disabled):
            raise SlackError("no_such_subteam")
        return g

    def set_usergroup_users(self, group: str, users) -> UserGroup:
        """usergroups.users.update: the group's members become ``users`` (all of them)."""
        g = self.usergroup(group)
        g.users, g.updated = list(dict.fromkeys(users)), self._now()
        return g

    def disable_usergroup(self, group: str) -> UserGroup:
        g = self.usergroup(group)
        g.disabled_at = g.disabled_at or self._now()
        return g

    def enable_usergroup(self, group: str) -> UserGroup:
        g = self.usergroup(group)
        g.disabled_at = 0
        return g

    # files (the external upload flow) ------------------------------------
    def reserve_file(self, filename: Any, length: Any, alt_txt=None, snippet_type=None) -> File:
        """files.getUploadURLExternal: a file id and an upload key for ``length`` bytes. Slack
        refuses a missing name or a missing/zero length (missing_argument) and a length that is no
        integer (invalid_arguments)."""
        if not filename or length in (None, ""):
            raise SlackError("missing_argument")
        try:
            size = int(str(length))
        except ValueError:
            raise SlackError("invalid_arguments") from None
        if size == 0:
            raise SlackError("missing_argument")
        if size < 0:
            raise SlackError("invalid_arguments")
        if alt_txt is not None and len(str(alt_txt)) > 1000:
            raise SlackError("alt_txt_too_large")
        f = File(
            id=self.next_id("F"),
            name=str(filename),
            length=size,
            upload_key=secrets.token_urlsafe(24),
            alt_txt=alt_txt,
            snippet_type=snippet_type,
            created=int(self._clock() if self._clock is not None else time.time()),
        )
        self.files[f.id] = f
        self._uploads[f.upload_key] = f.id
        return f

    def receive_upload(self, key: str, data: bytes) -> File | None:
        """The upload URL took ``data``; None when the key is unknown or its file already shared."""
        f = self.files.get(self._uploads.get(key, ""))
        if f is None or f.completed:
            return None
        f.content, f.uploads = data, f.uploads + 1
        return f

    def complete_files(
        self,
        entries: Any,
        channels: list[str],
        initial_comment: str | None = None,
        thread_ts: str | None = None,
    ) -> list[File]:
        """files.completeUploadExternal: check everything first (all or nothing), then share the
        files in each of ``channels`` (none: the file stays private) with one file-share message.

        An id never reserved, whose bytes never arrived, or already completed (its upload ticket
        is spent) is file_not_found; bytes that differ from the reserved ``length`` are
        file_upload_size_mismatch. Each channel must exist (channel_not_found), hold the bot
        (not_in_channel) and be open (is_archived); more than 100 is channels_limit_exceeded."""
        if not isinstance(entries, list) or not entries:
            raise SlackError("invalid_arguments")
        picked: list[tuple[File, str | None]] = []
        for entry in entries:
            if not isinstance(entry, dict) or not entry.get("id"):
                raise SlackError("invalid_arguments")
            f = self.files.get(str(entry["id"]))
            if f is None or f.completed or f.content is None:
                raise SlackError("file_not_found")
            if len(f.content) != f.length:
                raise SlackError("file_upload_size_mismatch")
            title = entry.get("title")
            picked.append((f, None if title is None else str(title)))
        if len(channels) > 100:
            raise SlackError("channels_limit_exceeded")
        targets: list[Channel] = []
        for channel in channels:
            ch = self.writable_channel(channel)
            if ch.archived:
                raise SlackError("is_archived")
            targets.append(ch)
        done: list[File] = []
        for f, title in picked:
            f.completed, f.title = True, title or f.name
            f.channels = [ch.id for ch in targets]
            f.initial_comment, f.thread_ts = initial_comment or None, thread_ts or None
            self._uploads.pop(f.upload_key, None)
            done.append(f)
        for ch in targets:
            msg = Message(
                ts=self.next_ts(),
                channel=ch.id,
                text=initial_comment or "",
                thread_ts=thread_ts or None,
                subtype="file_share",
                files=[{"id": f.id, "name": f.name, "title": f.title} for f in done],
            )
            self.messages[ch.id].append(msg)
            for f in done:
                f.message_ts[ch.id] = msg.ts
        return done
