"""The after-ack lane: one request's failure or cancellation never stops a worker; acks come first."""

from __future__ import annotations

import asyncio
import time
from urllib.parse import urlsplit

from bot.slack.lane import GIVE_WAY_S, Lane
from fbworld.slack import sign, slash_command_body
from tests.support.harness import SECRET, RunningApp


async def test_a_cancelled_or_failing_request_leaves_every_worker_running():
    lane = Lane(workers=1)  # one worker: if it died, nothing after the bad jobs would run
    ran: list[str] = []

    async def cancelled() -> None:
        raise asyncio.CancelledError

    async def broken() -> None:
        raise RuntimeError("handler bug")

    async def fine() -> None:
        ran.append("fine")

    for job in (cancelled, broken, fine):
        lane.submit(job)
    await asyncio.wait_for(lane.drain(), 5)
    assert ran == ["fine"]
    await lane.close()


async def _held_command(app: RunningApp, key: str) -> tuple[asyncio.StreamWriter, asyncio.StreamReader, bytes]:
    """A signed `/incident status` whose headers and first bytes are sent, and the rest not yet:
    Firebreak is reading it, so its ack is in progress until the rest is sent."""
    body = slash_command_body("status", channel_id="C_GENERAL", response_url=app.slack.response_url(key))
    url = urlsplit(app.url)
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    head = [
        "POST /slack/events HTTP/1.1",
        f"Host: {url.netloc}",
        "Content-Type: application/x-www-form-urlencoded",
        f"Content-Length: {len(body)}",
        *(f"{k}: {v}" for k, v in sign(body, SECRET).items()),
    ]
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body[:10])
    await writer.drain()
    async with asyncio.timeout(5):
        # Polled: the product has no event for "an ack started", and one only for this test would be a test-only branch.
        while app.lane.acks_in_progress == 0:  # noqa: ASYNC110 - the server has the headers, waits for the body
            await asyncio.sleep(0.005)
    return writer, reader, body[10:]


async def test_after_ack_work_gives_way_to_an_ack_in_progress_for_at_most_its_bound(app: RunningApp):
    # Slack's 3 s for an ack is a hard limit and after-ack work has none: while a request is
    # being read and answered, queued jobs wait, but never longer than GIVE_WAY_S.
    writer, reader, rest = await _held_command(app, "held")
    try:
        sent = time.time()
        burst = await asyncio.gather(*(app.command("status") for _ in range(10)))
        replies = await asyncio.gather(*(app.slack.wait_for_response(k, timeout=10) for k in burst))
        assert app.lane.acks_in_progress == 1  # the held request is still being read: work ran anyway
        for r in replies:
            assert r.body["text"].startswith("`status` works inside an incident channel"), r.body  # it ran
            assert r.timestamp - sent >= GIVE_WAY_S  # no job started before its bound while an ack was pending
        writer.write(rest)
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), 5)
        assert status_line.startswith(b"HTTP/1.1 200"), status_line
    finally:
        writer.close()  # else the app's cleanup would wait for the held request
    assert (await app.slack.wait_for_response("held", timeout=10)).body["text"]  # its own work runs too
    await app.drain()
    assert app.lane.pending == 0
