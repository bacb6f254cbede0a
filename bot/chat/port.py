"""The Chat protocol and its one error type."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from bot.chat.views import Card, Form


class ChatError(Exception):
    """The chat platform refused or failed a call. ``error`` is its short code (``channel_not_found``)."""

    def __init__(self, method: str, error: str) -> None:
        super().__init__(f"{method}: {error}")
        self.method = method
        self.error = error


@dataclass(frozen=True)
class UserGroup:
    """A user group of the workspace (``@ml-oncall``): its id, handle, and whether it is disabled."""

    id: str
    handle: str
    disabled: bool = False


class Chat(Protocol):
    """Everything the domain posts, edits or opens. Every method raises ChatError on refusal."""

    async def create_channel(self, base_name: str, private: bool = False) -> tuple[str, str]:
        """A new channel named ``base_name`` (or a numbered variant when taken): (id, name).
        ``private``: only those invited see it (the bot, as its creator, is a member)."""
        ...

    async def invite(self, channel: str, users: Sequence[str]) -> None: ...

    async def post(
        self, channel: str, text: str, card: Card | None = None, thread: str | None = None, mark: str | None = None
    ) -> str:
        """Post a message (``text`` is the notification fallback); returns its ts. ``mark``: a
        dedupe mark the message carries, so ``posted`` can find it after a crash."""
        ...

    async def posted(self, channel: str, mark: str, since: float) -> bool:
        """Is a message carrying ``mark`` in ``channel``'s top-level history since ``since`` (epoch s)?"""
        ...

    async def update(self, channel: str, ts: str, text: str, card: Card | None = None) -> None: ...

    async def ephemeral(self, channel: str, user: str, text: str) -> None:
        """A message only ``user`` sees, in ``channel``."""
        ...

    async def respond(self, reply_to: str, text: str) -> None:
        """A private reply to the person who acted (their request's reply address)."""
        ...

    async def pin(self, channel: str, ts: str) -> None: ...

    async def archive(self, channel: str) -> None:
        """Archive a channel (one already archived counts as done)."""
        ...

    async def upload_file(
        self,
        channel: str,
        filename: str,
        content: str | bytes,
        title: str,
        comment: str | None = None,
        thread: str | None = None,
    ) -> str:
        """Share a file in ``channel`` (``str`` content is sent as UTF-8), introduced by ``comment``
        and, with ``thread``, as a reply in that thread; returns the file's id. Not idempotent:
        each call shares a new file."""
        ...

    async def open_form(self, trigger: str, form: Form) -> None:
        """Open ``form`` for the person whose action carried ``trigger``."""
        ...

    async def user_groups(self) -> list[UserGroup]:
        """Every user group of the workspace, disabled ones included. A timeout or an unreachable
        platform is ChatError too (error ``timeout`` / ``unreachable``)."""
        ...

    async def group_members(self, group_id: str) -> list[str]:
        """The user ids in the group ``group_id`` (ChatError ``no_such_subteam`` if there is none)."""
        ...

    async def close(self) -> None: ...
