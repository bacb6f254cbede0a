"""A hung Redis (SIGSTOP: it keeps its sockets and answers nothing) costs a person seconds, and a
command is never applied after its requester was told it failed.

Each test runs its own redis-server, which it freezes (SIGSTOP) and thaws (SIGCONT). The bounds
below are deadlines that bound the test, not speed targets: they sit between what the store's
timeouts allow (bot/store/client.py: one 2 s call, then fail-fast) and what a stalled client without
them takes (5 s per call, one wave of lane workers after another).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator

import aiohttp
import pytest
import redis.asyncio as aioredis
import structlog

import bot.store.client
from bot.store import GATE_OPEN_S
from fbworld.slack import FakeSlack
from tests.support.harness import RunningApp, audit_entries, start_app
from tests.support.redis_server import RedisServer
from tests.support.stall_proxy import StallProxy

REPLY_BOUND_S = 6.0  # every command's reply, counted from its send
ACK_BOUND_S = 3.0  # Slack's own limit for the ack
READY_BOUND_S = 2.0  # /readyz while Redis is frozen
UNREACHABLE = "Firebreak can't reach its store (ref `"
PART_WAY = "Firebreak lost its store part-way (ref `"


@pytest.fixture(autouse=True)
def plain_tracebacks() -> Iterator[None]:
    """Log tracebacks as plain text, as production does (bot.logs.configure). structlog's
    unconfigured default renders each one with rich, which takes the event loop for a second or
    more: the bounds here would measure that instead of the store's timeouts."""
    saved = structlog.get_config()
    structlog.configure(
        processors=[
            *saved["processors"][:-1],
            structlog.dev.ConsoleRenderer(colors=False, exception_formatter=structlog.dev.plain_traceback),
        ]
    )
    yield
    structlog.configure(**saved)


@pytest.fixture
def server() -> Iterator[RedisServer]:
    srv = RedisServer().start()
    yield srv
    srv.stop()  # thaws first


@pytest.fixture
async def proxy(server: RedisServer) -> AsyncIterator[StallProxy]:
    relay = await StallProxy(server).start()
    yield relay
    await relay.close()


@pytest.fixture
async def app(slack: FakeSlack, proxy: StallProxy, clock) -> AsyncIterator[RunningApp]:
    running = await start_app(slack, proxy.url, clock)
    yield running
    await running.stop()


async def timed_reply(app: RunningApp, key: str, sent: float) -> tuple[str, float]:
    """The reply's text and how long after ``sent`` (time.time()) it reached Slack."""
    r = await app.slack.wait_for_response(key, timeout=30)
    return str(r.body.get("text", "")), r.timestamp - sent


async def timed_command(app: RunningApp, text: str, channel: str) -> tuple[str, float, float]:
    """Send a command; its reply text, the ack's delay and the reply's delay (seconds)."""
    sent = time.time()
    key = await app.command(text, user="U_IC", channel=channel)
    acked = time.time() - sent
    out, took = await timed_reply(app, key, sent)
    return out, acked, took


def direct(server: RedisServer) -> aioredis.Redis:
    """A client straight to the server (not through the app or the relay), for assertions."""
    return aioredis.from_url(server.url, decode_responses=True)


async def test_a_burst_during_a_stall_is_answered_within_seconds(app, server):
    inc = await app.declare("GPU hang", sev=3, cells=())
    assert (await app.run("status", channel=inc.channel_id)).startswith(f"*{inc.id}*")

    server.freeze()
    texts = [f"sev 1 burst {i}" if i % 2 else "status" for i in range(20)]
    results = await asyncio.gather(*(timed_command(app, t, inc.channel_id) for t in texts))
    for text, (out, acked, took) in zip(texts, results, strict=True):
        assert acked < ACK_BOUND_S, (text, acked)
        assert took < REPLY_BOUND_S, (text, took, out)
        assert out.startswith(UNREACHABLE) and out.endswith("nothing changed. Try again in a minute."), out

    server.thaw()
    await asyncio.sleep(GATE_OPEN_S)  # after the last failure, the app fails fast this long
    assert (await app.run("status", channel=inc.channel_id)).startswith(f"*{inc.id}*")
    assert (await app.incident(inc.id)).sev == 3


async def test_readyz_says_503_within_a_second_while_redis_is_frozen(app, server):
    async with aiohttp.ClientSession() as http:

        async def readyz() -> tuple[int, float]:
            t = time.monotonic()
            async with http.get(app.url + "/readyz") as resp:
                return resp.status, time.monotonic() - t

        assert (await readyz())[0] == 200
        server.freeze()
        for _ in range(3):  # also once the first failure is known
            status, took = await readyz()
            assert status == 503 and took < READY_BOUND_S, (status, took)
        server.thaw()
        for _ in range(50):  # ready again once the fail-fast window after the last failure is over
            status, _ = await readyz()
            if status == 200:
                break
            await asyncio.sleep(0.1)
        assert status == 200


async def check_a_held_write_is_refused(app: RunningApp, server: RedisServer, proxy: StallProxy) -> None:
    """The stall starts after the command's reads and before its write: the write sits in the
    stopped server's socket. The person is told it failed; when Redis resumes it runs the write
    late, and the write's deadline (checked by Redis against its own clock) refuses it."""
    inc = await app.declare("GPU hang", sev=3, cells=())
    # Once before, so the server knows the script: a first EVALSHA would be refused as NOSCRIPT
    # whenever it ran, and would prove nothing.
    assert "is now SEV2" in await app.run("sev 2 warming up", channel=inc.channel_id)
    r = direct(server)
    try:
        errors_before = (await r.info("errorstats")).get("errorstat_FB_DEADLINE", {}).get("count", 0)
        # The SEV raise's script call: the incident's key and this command's reason.
        proxy.freeze_before(b"EVALSHA", f"fb:inc:{{{inc.id}}}".encode(), b"held-in-the-stall")

        out, _, took = await timed_command(app, "sev 1 held-in-the-stall", inc.channel_id)
        assert proxy.frozen.is_set(), "the relay never saw the SEV raise: the test did not test"
        assert took < REPLY_BOUND_S, (took, out)
        assert out.startswith((PART_WAY, UNREACHABLE)), out  # told it failed

        server.thaw()
        await r.ping()  # after this round trip, the server has read what waited in its sockets
        await asyncio.sleep(GATE_OPEN_S)  # after the last failure, the app fails fast this long

        assert await r.hget(f"fb:inc:{{{inc.id}}}", "sev") == "2"
        # It reached Redis and Redis refused it (not lost on the way): the deadline did this.
        errors = (await r.info("errorstats")).get("errorstat_FB_DEADLINE", {}).get("count", 0)
        assert errors == errors_before + 1, await r.info("errorstats")
    finally:
        await r.aclose()
    assert (await app.incident(inc.id)).sev == 2
    assert not [m for m in app.slack.messages(inc.channel_id) if "SEV2 → SEV1" in m.get("text", "")]
    sev_entries = [e for e in await audit_entries(app, inc.id) if e["action"] == "command.sev"]
    assert [e["detail"]["result"] for e in sev_entries if e["detail"]["args"].get("sev") == 1] in ([], ["error"])


async def test_a_write_held_in_a_frozen_redis_is_refused_when_it_resumes(app, server, proxy):
    await check_a_held_write_is_refused(app, server, proxy)


class SkewedClock:
    """bot.store.client's view of the time module, on a host whose wall clock is ``skew`` seconds off
    Redis's (monotonic time is unaffected, as on a real host)."""

    def __init__(self, skew: float) -> None:
        self.skew = skew
        self.monotonic = time.monotonic

    def time(self) -> float:
        return time.time() + self.skew


@pytest.mark.parametrize("skew", [-30.0, 30.0])
async def test_deadlines_are_set_in_redis_clock_when_the_hosts_disagree(slack, clock, server, proxy, skew, monkeypatch):
    """Behind Redis by 30 s, a deadline in Firebreak's clock would refuse every write; ahead, it
    would let a held write run 30 s late. Firebreak measures Redis's clock (TIME) instead."""
    monkeypatch.setattr(bot.store.client, "time", SkewedClock(skew))
    app = await start_app(slack, proxy.url, clock)
    try:
        await check_a_held_write_is_refused(app, server, proxy)
    finally:
        await app.stop()


async def test_a_form_submitted_during_a_stall_stays_open_with_the_reason_within_slacks_limit(app, server):
    """A form's answer is the HTTP response itself, so it must come within Slack's 3 s."""
    inc = await app.declare("GPU hang", sev=3, cells=())
    values = {"update": {"text": {"type": "plain_text_input", "value": "Chat API: degraded"}}}
    server.freeze()
    t = time.monotonic()
    status, body, _ = await app.sender.submit_view(
        "cadence.update", user="U_IC", values=values, private_metadata=inc.id
    )
    took = time.monotonic() - t
    assert status == 200 and took < ACK_BOUND_S, (status, took, body)
    assert json.loads(body)["errors"] == {
        "update": "Firebreak can't reach its store; nothing changed. Try again in a minute."
    }
