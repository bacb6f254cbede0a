"""Slack's Socket Mode, emulated: ``apps.connections.open`` and the WebSocket it hands out.

As https://api.slack.com/apis/socket-mode describes it, and as slack_sdk's own clients expect:

* ``apps.connections.open`` takes an app-level token (``xapp-…``, scope ``connections:write``)
  and answers ``{"ok": true, "url": "ws://…/link/?ticket=…"}``; a bot token gets
  ``not_allowed_token_type``, an unknown app token ``invalid_auth``, one without the scope
  ``missing_scope``. An app-level token is good for nothing else (``not_allowed_token_type``).
* On connect the server sends ``hello``; then envelopes ``{"envelope_id", "type"
  (slash_commands | interactive | events_api), "payload", "accepts_response_payload",
  "retry_attempt", "retry_reason"}``, each answered by an ack ``{"envelope_id", "payload"?}``.
  An envelope not acked within ``ack_timeout`` is delivered again, ``retry_attempt`` + 1
  (``retry_reason`` "timeout"), up to ``max_retries`` times: the same payload in a new envelope,
  under a new ``envelope_id`` (an id names one delivery; what stays is the payload's own ids, an
  event's ``event_id``, an interaction's ``trigger_id``), so an app cannot take the envelope id
  for the duplicate's key.
* ``disconnect`` (``{"type": "disconnect", "reason": "refresh_requested" | "warning"}``): the
  client opens a new connection; the old one gets no more envelopes and is closed once the new
  one is up.

``SocketSender`` has SlackSender's methods (world/fbworld/slack/inbound.py) and sends the same
bodies as envelopes, so a test runs unchanged in either mode; what it returns for an ack is what
the HTTP response body would have been (a command's ack text, a form's ``response_action``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import WSMsgType, web

from .inbound import SlackSender

OPEN = "apps.connections.open"
SCOPE = "connections:write"
SLASH_COMMANDS, INTERACTIVE, EVENTS_API = "slash_commands", "interactive", "events_api"
_FORM, _JSON = "application/x-www-form-urlencoded", "application/json"


@dataclass
class Envelope:
    envelope_id: str
    type: str
    payload: dict[str, Any]
    accepts_response_payload: bool
    retry_attempt: int = 0
    retry_reason: str | None = None

    def message(self) -> str:
        return json.dumps(
            {
                "envelope_id": self.envelope_id,
                "type": self.type,
                "payload": self.payload,
                "accepts_response_payload": self.accepts_response_payload,
                "retry_attempt": self.retry_attempt,
                "retry_reason": self.retry_reason,
            }
        )


@dataclass
class Ack:
    envelope_id: str
    payload: dict[str, Any] | None
    attempts: int  # deliveries it took (1: acked the first time)


@dataclass
class _Link:
    ws: web.WebSocketResponse
    ticket: str
    retiring: bool = False  # told to disconnect: no new envelopes
    delivered: list[str] = field(default_factory=list)


class SocketMode:
    """The Socket Mode side of a SlackEmulator (``emulator.socket``)."""

    def __init__(
        self,
        app_token: str | None = None,
        scopes: tuple[str, ...] = (SCOPE,),
        ack_timeout: float = 3.0,
        max_retries: int = 3,
    ) -> None:
        """``app_token``: the one app-level token accepted (None: any ``xapp-``). ``ack_timeout``:
        how long an envelope waits for its ack before it is delivered again."""
        self.app_token = app_token
        self.scopes = scopes
        self.ack_timeout = ack_timeout
        self.max_retries = max_retries
        self.base_url = ""  # the emulator's, set when it starts
        self.opened = 0  # apps.connections.open calls answered ok
        self.connections = 0  # WebSockets accepted
        self.acks: list[Ack] = []
        self._tickets: set[str] = set()
        self._links: list[_Link] = []
        self._changed = asyncio.Condition()
        # envelope id -> deliveries waiting for an ack, oldest first (a test may send one id at once)
        self._waiting: dict[str, list[asyncio.Future[dict[str, Any]]]] = {}
        self._lost = 0  # acks still to drop (lose_acks)

    # apps.connections.open -----------------------------------------------
    def open(self, token: str) -> dict[str, Any]:
        """The Web API method, for a token the emulator already found to be an app-level one."""
        if self.app_token is not None and token != self.app_token:
            return {"ok": False, "error": "invalid_auth"}
        if SCOPE not in self.scopes:
            return {"ok": False, "error": "missing_scope", "needed": SCOPE, "provided": ",".join(self.scopes)}
        ticket = uuid.uuid4().hex
        self._tickets.add(ticket)
        self.opened += 1
        ws_base = "ws" + self.base_url.removeprefix("http")
        return {"ok": True, "url": f"{ws_base}/link/?ticket={ticket}&app_id=AFAKE"}

    # the WebSocket ----------------------------------------------------------
    async def handle(self, request: web.Request) -> web.StreamResponse:
        ticket = request.query.get("ticket", "")
        if ticket not in self._tickets:
            return web.Response(status=401, text="invalid ticket")
        ws = web.WebSocketResponse(autoping=True)  # answers slack_sdk's pings with its pongs
        await ws.prepare(request)
        link = _Link(ws, ticket)
        await ws.send_str(
            json.dumps(
                {
                    "type": "hello",
                    "num_connections": sum(1 for x in self._links if not x.ws.closed) + 1,
                    "debug_info": {"host": "applink-emulator", "approximate_connection_time": 18060},
                    "connection_info": {"app_id": "AFAKE"},
                }
            )
        )
        async with self._changed:
            for old in self._links:  # a client that reconnected after a disconnect: the old link goes
                if old.retiring and not old.ws.closed:
                    await old.ws.close()
            self._links.append(link)
            self.connections += 1
            self._changed.notify_all()
        try:
            async for msg in ws:
                if msg.type != WSMsgType.TEXT:
                    continue
                with contextlib.suppress(ValueError):
                    self._acked(json.loads(msg.data))
        finally:
            async with self._changed:
                self._links.remove(link)
                self._changed.notify_all()
        return ws

    def _acked(self, message: Any) -> None:
        if not isinstance(message, dict) or not isinstance(message.get("envelope_id"), str):
            return
        if self._lost > 0:  # lost on the way: Slack never saw it
            self._lost -= 1
            return
        for waiting in self._waiting.get(message["envelope_id"], []):
            if not waiting.done():
                payload = message.get("payload")
                waiting.set_result(payload if isinstance(payload, dict) else {})
                return

    async def _live(self, timeout: float) -> _Link:
        """The newest connection not told to go (waiting for one while the client reconnects)."""
        async with self._changed:
            await asyncio.wait_for(
                self._changed.wait_for(lambda: any(not x.retiring and not x.ws.closed for x in self._links)), timeout
            )
            return [x for x in self._links if not x.retiring and not x.ws.closed][-1]

    # what tests and the console do --------------------------------------------
    async def deliver(
        self,
        type: str,
        payload: dict[str, Any],
        envelope_id: str | None = None,
        retry_attempt: int = 0,
        retry_reason: str | None = None,
    ) -> Ack:
        """Send an envelope to the app and wait for its ack, delivering it again (a new envelope id,
        retry_attempt + 1) each time ``ack_timeout`` passes without one; TimeoutError after
        ``max_retries`` retries. ``envelope_id``: the first delivery's (a test sending one envelope twice)."""
        env = Envelope(
            envelope_id or f"{uuid.uuid4()}",
            type,
            payload,
            accepts_response_payload=type != EVENTS_API,
            retry_attempt=retry_attempt,
            retry_reason=retry_reason,
        )
        for attempt in range(1, self.max_retries + 2):
            link = await self._live(timeout=max(self.ack_timeout, 5.0))
            fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
            sent_as = env.envelope_id
            waiting = self._waiting.setdefault(sent_as, [])
            waiting.append(fut)
            try:
                await link.ws.send_str(env.message())
                link.delivered.append(env.envelope_id)
                got = await asyncio.wait_for(fut, self.ack_timeout)
            except (TimeoutError, ConnectionResetError):
                env.envelope_id = f"{uuid.uuid4()}"  # a new envelope for the same payload
                env.retry_attempt += 1
                env.retry_reason = "timeout"
                continue
            finally:
                waiting.remove(fut)
                if not waiting:
                    self._waiting.pop(sent_as, None)
            ack = Ack(env.envelope_id, got or None, attempt)
            self.acks.append(ack)
            return ack
        raise TimeoutError(f"envelope {env.envelope_id} not acked after {self.max_retries} retries")

    def lose_acks(self, times: int = 1) -> None:
        """The next ``times`` acks never arrive (a fault): their envelopes are delivered again."""
        self._lost += times

    async def disconnect(self, reason: str = "refresh_requested") -> None:
        """Tell every connected client to reconnect (Slack does every few hours, and before a deploy)."""
        async with self._changed:
            links = [x for x in self._links if not x.ws.closed]
            for link in links:
                link.retiring = True
        for link in links:
            await link.ws.send_str(
                json.dumps({"type": "disconnect", "reason": reason, "debug_info": {"host": "applink-emulator"}})
            )

    async def wait_connected(self, count: int = 1, timeout: float = 10.0) -> None:
        """Until ``count`` WebSockets have been accepted in all and one is live."""
        async with self._changed:
            await asyncio.wait_for(
                self._changed.wait_for(
                    lambda: self.connections >= count and any(not x.retiring and not x.ws.closed for x in self._links)
                ),
                timeout,
            )

    async def close(self) -> None:
        for link in list(self._links):
            await link.ws.close()


def envelope_of(body: bytes, content_type: str) -> tuple[str, dict[str, Any]]:
    """The envelope Slack sends over Socket Mode for what it would POST over HTTP (the same fields)."""
    if content_type == _JSON:
        return EVENTS_API, json.loads(body)
    fields = dict(parse_qsl(body.decode(), keep_blank_values=True))
    if "payload" in fields:
        return INTERACTIVE, json.loads(fields["payload"])
    return SLASH_COMMANDS, fields


def ack_text(payload: dict[str, Any] | None) -> str:
    """What the HTTP response's body would have been for this ack (Bolt's socket adapter sends a text
    answer as ``{"text": …}`` and a JSON one as the object)."""
    if not payload:
        return ""
    if set(payload) == {"text"}:
        return str(payload["text"])
    return json.dumps(payload)


class SocketSender(SlackSender):
    """SlackSender's methods, delivered as Socket Mode envelopes instead of signed POSTs."""

    def __init__(self, socket: SocketMode) -> None:
        super().__init__("http://socket-mode.invalid", secret="")  # nothing is signed on the socket
        self.socket = socket

    async def post(
        self, body: bytes, content_type: str, timestamp: int | None = None, extra_headers: dict[str, str] | None = None
    ) -> tuple[int, str, float]:
        kind, payload = envelope_of(body, content_type)
        headers = {k.lower(): v for k, v in (extra_headers or {}).items()}
        retry = int(headers.get("x-slack-retry-num", "0"))
        start = time.monotonic()
        ack = await self.socket.deliver(
            kind, payload, retry_attempt=retry, retry_reason=headers.get("x-slack-retry-reason")
        )
        return 200, ack_text(ack.payload), time.monotonic() - start
