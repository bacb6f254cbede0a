"""Run the real Firebreak app against fakes, for tests and benchmarks: Slack reaches it over HTTP
(signed POSTs) or Socket Mode (the emulator's WebSocket, slack_sdk's client in the app)."""

from __future__ import annotations

import asyncio
import itertools
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web

from bot.clock import Clock, ManualClock
from bot.config import load_settings
from bot.core.eligibility import check_policy_groups
from bot.core.services import Services
from bot.incidents.models import Incident
from bot.incidents.store import repo
from bot.runtime import build_runtime
from bot.server import start_local
from bot.slack.inbound import SocketModeHandler
from bot.slack.lane import Lane
from bot.store import connect
from fbworld.slack import FakeSlack, SlackSender, SocketSender
from tests.support import workspace

if TYPE_CHECKING:
    from bot.audit.sign import Checkpointer

# 2026-11-30 03:10:00 UTC: a believable 3 a.m. (the `clock` fixture starts here)
T0 = 1_796_008_200.0
SECRET = "test-signing-secret"
TOKEN = "xoxb-test-token"
APP_TOKEN = "xapp-1-A1-test-app-token"  # Socket Mode's app-level token
MODES = ("http", "socket")  # how Slack reaches the app (the `mode` fixture, tests/conftest.py)
# start_app's mode when its caller names none: the test's `mode`, set by tests/conftest.py, so the
# fixtures that start the app (approvals' world, comms', levers') run in the mode the test is in.
mode_of_test = "http"


@dataclass
class RunningApp:
    url: str
    services: Services
    runner: web.AppRunner
    sender: SlackSender
    slack: FakeSlack
    lane: Lane
    checkpoints: Checkpointer | None = None  # the audit checkpoint signer, with FIREBREAK_AUDIT_KEY
    socket: SocketModeHandler | None = None  # Socket Mode: the app's connection to the emulator
    _n: Any = field(default_factory=itertools.count)

    async def command(self, text: str, user: str = "U_IC", channel: str = "C_GENERAL", **kw: Any) -> str:
        """Send `/incident <text>` as Slack would; returns the response_url key for the reply."""
        key = f"cmd{next(self._n)}"
        status, body, _ = await self.sender.command(
            text, user=user, channel=channel, response_url=self.slack.response_url(key), **kw
        )
        assert status == 200, (status, body)
        self.last_ack = body
        return key

    async def reply(self, key: str, timeout: float = 15.0) -> str:
        """The text Firebreak sent back to the user through response_url. The wait is a test's
        patience, not a product bound (those are benchmarks): long enough for a starved worker."""
        r = await self.slack.wait_for_response(key, timeout=timeout)
        return str(r.body.get("text", ""))

    async def run(self, text: str, user: str = "U_IC", channel: str = "C_GENERAL") -> str:
        """Command and wait for its reply (or the ack text when the ack was the answer)."""
        key = await self.command(text, user=user, channel=channel)
        ack = self.last_ack  # this request's: another run() may send before the awaits below end
        if ack and ack.strip():
            return await self.settled(key, ack)
        return await self.reply(key)

    async def settled(self, key: str, ack: str) -> str:
        """A request whose ack had text: its reply once the lane is empty, else the ack (which was
        the answer). Whatever the request was going to say has been said by then (a fixed wait here
        missed replies on a loaded machine); a lane that never empties fails here."""
        await asyncio.wait_for(self.drain(), 15)
        if replies := self.slack.responses_for(key):
            return str(replies[0].get("text", ""))
        try:
            return await self.reply(key, timeout=0.3)  # a reply sent outside the lane
        except TimeoutError:
            return ack

    async def press(self, action_id: str, value: str, user: str, channel: str, message_ts: str | None = None) -> str:
        """Press the button as a person does: on the newest message in ``channel`` that carries (or
        carried) it, unless ``message_ts`` names another message (an approval counts only from its card)."""
        key = f"btn{next(self._n)}"
        if message_ts is None:
            message_ts = self.message_with(channel, action_id, value)
        status, body, _ = await self.sender.action(
            action_id,
            value,
            user=user,
            channel=channel,
            message_ts=message_ts,
            response_url=self.slack.response_url(key),
        )
        assert status == 200, (status, body)
        return key

    def message_with(self, channel: str, action_id: str, value: str) -> str | None:
        return message_with(self.slack, channel, action_id, value)

    async def declare(
        self,
        title: str = "GPU trouble",
        sev: int = 2,
        user: str = "U_IC",
        cells: tuple[str, ...] = ("us-east-3",),
        roles: dict[str, str] | None = None,
        extra: str = "",
    ) -> Incident:
        """The one way tests open an incident: `declare` over Slack as ``user`` (the IC), with a
        ``--cell`` for each of ``cells`` (``()`` for none) and ``extra`` flags, then `role` for each
        {role: user}. Returns the incident as stored after that."""
        flags = [f"--cell {c}" for c in cells]
        text = " ".join(part for part in ("declare", title, "--sev", str(sev), *flags, extra) if part)
        out = await self.run(text, user=user)
        assert out.startswith("Declared INC-"), out
        inc = await self.incident(out.split()[1])
        assert inc.channel_id
        for role, who in (roles or {}).items():
            got = await self.run(f"role {role} <@{who}>", user=user, channel=inc.channel_id)
            assert "is now" in got or "is already" in got, got
        return await self.incident(inc.id)

    async def incident(self, inc_id: str) -> Incident:
        inc = await repo(self.services).get(inc_id)
        assert inc is not None, f"{inc_id} does not exist"
        return inc

    @property
    def clock(self) -> Any:
        return self.services.clock

    async def drain(self) -> None:
        """Wait until every acknowledged request has been handled (instead of sleeping)."""
        await self.lane.drain()

    async def tick(self) -> int:
        """Run the scheduler's due jobs at the clock's now; how many ran."""
        return await self.services.scheduler.tick()

    async def stop(self) -> None:
        if self.socket is not None:
            await self.socket.close_async()
        await self.runner.cleanup()
        await self.services.redis.aclose()


async def start_app(
    slack: FakeSlack, redis_url: str, clock: Clock | None = None, mode: str | None = None, **settings: Any
) -> RunningApp:
    """The app as `serve` starts it (its start checks too), on ``slack`` (given the test workspace's
    user groups unless it has its own: tests/support/workspace.py); ``mode`` "socket" connects it
    to the emulator's Socket Mode as `serve` does with SLACK_APP_TOKEN, and its ``sender`` delivers
    envelopes there instead of signed POSTs (None: the test's, ``mode_of_test``)."""
    mode = mode or mode_of_test
    assert mode in MODES, mode
    workspace.seed(slack)
    if mode == "socket":
        settings.setdefault("slack_app_token", APP_TOKEN)
        slack.socket.app_token = settings["slack_app_token"]
    s = load_settings(
        slack_bot_token=TOKEN,
        slack_signing_secret=SECRET,
        slack_api_url=slack.api_url,
        redis_url=redis_url,
        **settings,
    )
    # The product's own client (bot.store.connect): its timeouts and deadlines are under test too.
    rt = build_runtime(s, clock=clock or ManualClock(), redis=connect(redis_url, ca_file=s.redis_ca_file))
    before = len(slack.calls)
    try:
        await check_policy_groups(rt.services)
    except BaseException:
        await rt.services.chat.close()
        await rt.services.redis.aclose()
        raise
    # The start check's usergroups.list is start-up, not a request: tests count their requests' calls.
    del slack.calls[before:]
    runner, port = await start_local(rt.web)
    url = f"http://127.0.0.1:{port}"
    if mode == "http":
        return RunningApp(url, rt.services, runner, SlackSender(url, SECRET), slack, rt.lane, rt.checkpoints)
    socket = SocketModeHandler(rt.bolt, settings["slack_app_token"], rt.lane)
    await socket.connect_async()
    await slack.socket.wait_connected()
    del slack.calls[before:]  # apps.connections.open is start-up too
    return RunningApp(url, rt.services, runner, SocketSender(slack.socket), slack, rt.lane, rt.checkpoints, socket)


async def audit_entries(app: RunningApp, incident: str | None = None) -> list[dict]:
    return [e async for e in app.services.audit.entries(incident)]


def message_with(slack: FakeSlack, channel: str, action_id: str, value: str) -> str | None:
    """The ts of the newest message in ``channel`` with this button, now or before an edit: where
    a person presses it (an approval counts only from its card)."""
    for m in reversed(slack.messages(channel)):
        for blocks in [m.get("blocks") or [], *(e.get("blocks") or [] for e in m["edits"])]:
            for b in blocks:
                for el in b.get("elements") or []:
                    if el.get("action_id") == action_id and el.get("value") == value:
                        return str(m["ts"])
    return None


def dump(obj: object) -> str:
    return json.dumps(obj, indent=1, default=str)
