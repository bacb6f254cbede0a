"""The Chat port over Slack's Web API: what the domain asks, as Slack calls.

Retries on 429 (Retry-After), connection errors and 5xx are slack_sdk's retry
handlers; Slack's own error codes surface as ChatError with the code. Every
error answer is counted in firebreak_slack_api_errors_total{method,code}: each
attempt's HTTP error or timeout (``_Counted``, first in the retry chain, so it
sees the retried ones too), and each Slack error (a 200 with ok=false) that is
not one the caller expects (already_in_channel when inviting, ...).

Text goes out as the domain wrote it: the port's text codec (bot/chat/text.py: ``person``,
``channel_ref``, ``quote``) writes Slack's mrkdwn, so nothing is translated on the way out.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackRequestError
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from bot import logs, metrics
from bot.chat import Card, ChatError, Form, UserGroup
from bot.slack import render

log = logs.get(__name__)

POST_EVENT = "firebreak_post"  # the metadata event_type of posts that carry a dedupe mark
HISTORY_PAGES = 5  # how far `posted` looks back (200 messages a page) before giving up
UPLOAD_STEP = "files.upload_url"  # ChatError.method when the bytes were refused by the upload URL
_UPLOAD_STATUS = re.compile(r"status: (\d+)")
# Slack errors a caller takes as an answer, not a failure (not counted as errors).
_NAME_TAKEN = frozenset({"name_taken"})
_ALREADY_IN = frozenset({"already_in_channel", "cant_invite_self"})
_ALREADY_ARCHIVED = frozenset({"already_archived"})
_ALREADY_PINNED = frozenset({"already_pinned"})


def _failure_code(error: BaseException) -> str:
    if isinstance(error, (TimeoutError, asyncio.TimeoutError, aiohttp.ServerTimeoutError)):
        return "timeout"
    if isinstance(error, (aiohttp.ClientError, OSError)):
        return "unreachable"
    return "error"


class _Counted(AsyncRetryHandler):
    """First in the retry chain: slack_sdk asks every handler in turn after each attempt, so this one
    sees every attempt's answer. It counts the HTTP errors and never retries (the next ones decide)."""

    def __init__(self, base_url: str) -> None:
        super().__init__(max_retry_count=0)
        self.base_url = base_url

    def method(self, url: str) -> str:
        return url[len(self.base_url) :].split("?", 1)[0] if url.startswith(self.base_url) else UPLOAD_STEP

    async def can_retry_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        if error is not None:
            metrics.SLACK_API_ERRORS.labels(self.method(request.url), _failure_code(error)).inc()
        elif response is not None and response.status_code != 200:
            metrics.SLACK_API_ERRORS.labels(self.method(request.url), str(response.status_code)).inc()
        return False


def make_client(token: str, base_url: str) -> AsyncWebClient:
    return AsyncWebClient(
        token=token,
        base_url=base_url,
        retry_handlers=[
            _Counted(base_url),
            AsyncRateLimitErrorRetryHandler(max_retry_count=3),
            AsyncConnectionErrorRetryHandler(max_retry_count=2),
            AsyncServerErrorRetryHandler(max_retry_count=2),
        ],
    )


def _refused(method: str, exc: SlackApiError, expected: frozenset[str] = frozenset()) -> ChatError:
    """Slack's refusal as a ChatError; counted here when it came on a 200 (HTTP errors: _Counted).
    ``expected``: errors the caller takes as an answer, not counted."""
    # A 5xx from Slack's edge has an HTML or empty body: slack_sdk keeps it as a str.
    data, status = exc.response.data, exc.response.status_code
    error = str(data.get("error", "unknown_error")) if isinstance(data, dict) else f"http_{status}"
    if status == 200 and error not in expected:
        metrics.SLACK_API_ERRORS.labels(method, error).inc()
    return ChatError(method, error)


class SlackGateway:
    """Implements bot.chat.Chat."""

    def __init__(self, client: AsyncWebClient) -> None:
        self.client = client

    def session(self) -> aiohttp.ClientSession:
        # One pooled session for every outbound call: without it slack_sdk opens a new
        # session (and connection) per call, which cost more CPU than the rest of a request.
        # Made on first use because a session belongs to the running event loop.
        if self.client.session is None or self.client.session.closed:
            self.client.session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.client.timeout))
        return self.client.session

    async def close(self) -> None:
        if self.client.session is not None and not self.client.session.closed:
            await self.client.session.close()

    async def respond(self, reply_to: str, text: str) -> None:
        """An ephemeral reply to the person who acted, through the request's response_url."""
        hook = AsyncWebhookClient(reply_to, session=self.session(), timeout=self.client.timeout)
        try:
            resp = await hook.send_dict({"text": text, "response_type": "ephemeral", "replace_original": False})
        except (aiohttp.ClientError, TimeoutError) as exc:
            metrics.SLACK_API_ERRORS.labels("response_url", _failure_code(exc)).inc()
            raise
        if resp.status_code != 200:
            metrics.SLACK_API_ERRORS.labels("response_url", str(resp.status_code)).inc()
            raise ChatError("response_url", f"http_{resp.status_code}")

    async def _call(self, method: str, expected: frozenset[str] = frozenset(), **kwargs: Any) -> dict[str, Any]:
        """One Web API call. ``expected``: Slack errors the caller handles as an answer (not counted).
        Slack unreachable or slow is a ChatError too ("unreachable", "timeout"), as the port promises:
        a caller that handles a refusal (a security alert's fallback, post_once's release) must not
        be bypassed by a transport exception. A write that timed out may still have landed; the
        callers that retry writes check for that (post_once's landed_before)."""
        self.session()
        try:
            resp = await self.client.api_call(method, **kwargs)
        except SlackApiError as exc:
            raise _refused(method, exc, expected) from None
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise ChatError(method, _failure_code(exc)) from None
        return dict(resp.data) if isinstance(resp.data, dict) else {}

    async def create_channel(self, base_name: str, private: bool = False) -> tuple[str, str]:
        """Create a channel; on name_taken try -2, -3, … (ids stay unique anyway)."""
        for attempt in range(1, 6):
            suffix = "" if attempt == 1 else f"-{attempt}"
            name = base_name[: 80 - len(suffix)] + suffix
            try:
                params: dict[str, Any] = {"name": name}
                if private:
                    params["is_private"] = "true"
                data = await self._call("conversations.create", _NAME_TAKEN, params=params)
            except ChatError as f:
                if f.error == "name_taken":
                    continue
                raise
            ch = data["channel"]
            return ch["id"], ch["name"]
        raise ChatError("conversations.create", "name_taken")

    async def invite(self, channel: str, users: Sequence[str]) -> None:
        try:
            await self._call("conversations.invite", _ALREADY_IN, params={"channel": channel, "users": ",".join(users)})
        except ChatError as f:
            if f.error not in ("already_in_channel", "cant_invite_self"):
                raise

    async def post(
        self, channel: str, text: str, card: Card | None = None, thread: str | None = None, mark: str | None = None
    ) -> str:
        body: dict[str, Any] = {"channel": channel, "text": text}
        if card:
            body["blocks"] = render.blocks(card)
        if thread:
            body["thread_ts"] = thread
        if mark:
            # Message metadata: invisible to people, returned by conversations.history, so a post
            # whose dedupe mark was never set (the process died right after it) can be found.
            body["metadata"] = {"event_type": POST_EVENT, "event_payload": {"mark": mark}}
        data = await self._call("chat.postMessage", json=body)
        return str(data["ts"])

    async def posted(self, channel: str, mark: str, since: float) -> bool:
        """Look for our post carrying ``mark`` in the channel's history since ``since`` (newest
        first, page by page, at most HISTORY_PAGES pages)."""
        cursor = ""
        for _ in range(HISTORY_PAGES):
            params: dict[str, Any] = {
                "channel": channel,
                "oldest": f"{max(since, 0.0):.6f}",
                "limit": 200,
                "include_all_metadata": "true",
            }
            if cursor:
                params["cursor"] = cursor
            data = await self._call("conversations.history", params=params)
            for msg in data.get("messages") or []:
                meta = msg.get("metadata") or {}
                if meta.get("event_type") == POST_EVENT and (meta.get("event_payload") or {}).get("mark") == mark:
                    return True
            cursor = str((data.get("response_metadata") or {}).get("next_cursor") or "")
            if not data.get("has_more") or not cursor:
                return False
        log.warning("posted_search_truncated", channel=channel, pages=HISTORY_PAGES)
        return False

    async def archive(self, channel: str) -> None:
        try:
            await self._call("conversations.archive", _ALREADY_ARCHIVED, params={"channel": channel})
        except ChatError as f:
            if f.error != "already_archived":
                raise

    async def update(self, channel: str, ts: str, text: str, card: Card | None = None) -> None:
        body: dict[str, Any] = {"channel": channel, "ts": ts, "text": text, "blocks": render.blocks(card) or []}
        await self._call("chat.update", json=body)

    async def ephemeral(self, channel: str, user: str, text: str) -> None:
        await self._call("chat.postEphemeral", json={"channel": channel, "user": user, "text": text})

    async def pin(self, channel: str, ts: str) -> None:
        try:
            await self._call("pins.add", _ALREADY_PINNED, params={"channel": channel, "timestamp": ts})
        except ChatError as f:
            if f.error != "already_pinned":
                raise

    async def upload_file(
        self,
        channel: str,
        filename: str,
        content: str | bytes,
        title: str,
        comment: str | None = None,
        thread: str | None = None,
    ) -> str:
        """Slack's external upload flow, as slack_sdk's files_upload_v2 runs it on our client (its
        pooled session and retry handlers): files.getUploadURLExternal (filename, byte length),
        the bytes POSTed to the upload URL, files.completeUploadExternal sharing the file to
        ``channel``. A refusal at either API step is ChatError(<that method>, <Slack's error>);
        the upload URL answering other than 200 is ChatError(UPLOAD_STEP, "http_<status>")."""
        self.session()
        try:
            resp = await self.client.files_upload_v2(
                channel=channel,
                filename=filename,
                content=content,
                title=title,
                initial_comment=comment or None,
                thread_ts=thread or None,
            )
        except SlackApiError as exc:
            api_url = str(getattr(exc.response, "api_url", "") or "")
            method = api_url.rstrip("/").rsplit("/", 1)[-1] or "files.completeUploadExternal"
            raise _refused(method, exc) from None
        except SlackRequestError as exc:
            status = _UPLOAD_STATUS.search(str(exc))
            raise ChatError(UPLOAD_STEP, f"http_{status.group(1)}" if status else "upload_failed") from None
        file = resp.get("file") or {}
        return str(file.get("id", ""))

    async def user_groups(self) -> list[UserGroup]:
        """usergroups.list (scope usergroups:read) with the disabled groups (date_delete set), so a
        refusal can tell "disabled" from "doesn't exist"; members are read per group, on demand."""
        data = await self._call("usergroups.list", params={"include_disabled": "true"})
        return [
            UserGroup(id=str(g["id"]), handle=str(g.get("handle") or ""), disabled=bool(g.get("date_delete")))
            for g in data.get("usergroups") or []
            if isinstance(g, dict) and g.get("id")
        ]

    async def group_members(self, group_id: str) -> list[str]:
        data = await self._call("usergroups.users.list", params={"usergroup": group_id})
        return [str(u) for u in data.get("users") or []]

    async def open_form(self, trigger: str, form: Form) -> None:
        await self._call("views.open", json={"trigger_id": trigger, "view": render.view(form)})
