"""Arbitrary /incident text never yields a 5xx, an error outcome or a stack trace."""

from __future__ import annotations

import asyncio
import json

import redis.asyncio as aioredis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.clock import ManualClock
from fbworld.slack import FakeSlack
from tests.support.harness import T0, start_app

# Words that mean something to Firebreak's grammar or to Slack's own payload encoding.
WORDS = [
    "declare",
    "sev",
    "assess",
    "role",
    "handoff",
    "update",
    "status",
    "mitigated",
    "resolved",
    "help",
    "--sev",
    "--cell",
    "--product",
    "--region",
    "--threads",
    "--users-burn",
    "--gpus",
    "--quality",
    "--security",
    "--",
    "-",
    "1",
    "2",
    "4",
    "0",
    "-1",
    "1e309",
    "nan",
    "ic",
    "ops",
    "comms",
    "<@UOPS>",
    "<@UOPS|ops>",
    "<@>",
    "<#C1|x>",
    "us-east-3",
    "US_EAST",
    "token=",
    "&response_url=",
    "payload=",
    '"text":',
    "&text=",
    "%26",
    "%",
    "+",
    "=",
    "&",
    '"',
    "“",
    "”",
    "'",
    "\\",
    "\n",
    "\t",
    "{}",
    "[]",
    "null",
    "ünïcödé",
    "事故",
    "🔥",
    "\u202e",
    "\u00a0",
    "x" * 300,
]
TEXT = st.one_of(
    st.lists(st.sampled_from(WORDS), max_size=12).map(" ".join),
    st.text(max_size=200),
    st.tuples(
        st.sampled_from(["declare ", "sev 1 ", "update ", "handoff ic ", "role ops "]),
        st.text(min_size=1, max_size=3000),
    ).map("".join),
)


def test_arbitrary_text_never_breaks_the_app(redis_server):
    loop = asyncio.new_event_loop()
    slack = FakeSlack()

    async def setup():
        r = aioredis.from_url(redis_server.url)
        await r.flushall()
        await r.aclose()
        await slack.start()
        app = await start_app(slack, redis_server.url, ManualClock(T0))
        inc = await app.declare("Fuzz target", sev=3, user="UIC", cells=())
        return app, inc.channel_id

    app, incident_channel = loop.run_until_complete(setup())

    async def one(text: str, channel: str) -> None:
        start = await app.services.audit.count()
        key = f"fuzz{start}"
        status, ack, _ = await app.sender.command(
            text, user="UIC", channel=channel, response_url=slack.response_url(key)
        )
        assert status == 200, (status, ack)
        assert "Traceback" not in ack and "Exception" not in ack
        # Exactly one audit entry per request: wait for it, then for the reply it implies.
        for _ in range(500):
            if await app.services.audit.count() > start:
                break
            await asyncio.sleep(0.01)
        entries = await app.services.audit.since(start)
        assert len(entries) == 1, entries
        entry = entries[0]
        if entry["action"] == "command.invalid":
            assert json.loads(ack)["text"], ack
            return
        assert entry["detail"]["result"] in ("ok", "refused"), entry
        reply = (await slack.wait_for_response(key)).body["text"]
        assert reply and "Traceback" not in reply and "Something failed" not in reply

    @settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(text=TEXT, inside=st.booleans())
    def check(text: str, inside: bool) -> None:
        loop.run_until_complete(one(text, incident_channel if inside else "C_GENERAL"))

    try:
        check()
    finally:
        loop.run_until_complete(app.stop())
        loop.run_until_complete(slack.stop())
        loop.close()
