"""The fake Slack's conversations.history, message metadata and conversations.archive, checked
through slack_sdk like the app uses them, against what Slack documents."""

from __future__ import annotations

import pytest
import pytest_asyncio
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from fbworld.slack import FakeSlack
from fbworld.slack.scopes import ALL_SCOPES

META = {"event_type": "firebreak_post", "event_payload": {"mark": "fb:x"}}


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest_asyncio.fixture
async def clock():
    return Clock(1_796_008_200.0)


@pytest_asyncio.fixture
async def fake(clock):
    f = FakeSlack(clock=clock, scopes=ALL_SCOPES)  # every method's scope: tests of the emulator's methods
    await f.start()
    yield f
    await f.stop()


@pytest_asyncio.fixture
async def client(fake):
    return AsyncWebClient(token="xoxb-test", base_url=fake.api_url)


async def api_error(coro) -> str:
    with pytest.raises(SlackApiError) as exc:
        await coro
    return exc.value.response["error"]


@pytest.mark.asyncio
async def test_ts_follow_the_clock_and_stay_unique(fake, client, clock):
    cid = fake.add_channel("inc-ts")
    a = (await client.chat_postMessage(channel=cid, text="a"))["ts"]
    b = (await client.chat_postMessage(channel=cid, text="b"))["ts"]
    clock.t += 60
    c = (await client.chat_postMessage(channel=cid, text="c"))["ts"]
    assert (a, b, c) == ("1796008200.000000", "1796008200.000001", "1796008260.000000")


@pytest.mark.asyncio
async def test_metadata_is_kept_and_returned_only_when_asked(fake, client):
    cid = fake.add_channel("inc-meta")
    await client.chat_postMessage(channel=cid, text="marked", metadata=META)
    plain = await client.conversations_history(channel=cid)
    assert "metadata" not in plain["messages"][0]
    full = await client.conversations_history(channel=cid, include_all_metadata=True)
    assert full["messages"][0]["metadata"] == META
    assert await api_error(client.chat_postMessage(channel=cid, text="x", metadata={"event_type": "e"})) == (
        "invalid_metadata_schema"
    )
    bad = client.api_call("chat.postMessage", json={"channel": cid, "text": "x", "metadata": "[1]"})
    assert await api_error(bad) == "invalid_metadata_format"


@pytest.mark.asyncio
async def test_history_bounds_pages_and_cursor(fake, client, clock):
    cid = fake.add_channel("inc-hist")
    stamps = []
    for i in range(5):
        stamps.append((await client.chat_postMessage(channel=cid, text=f"m{i}"))["ts"])
        clock.t += 10
    page = await client.conversations_history(channel=cid, oldest=stamps[1], limit=2)
    assert [m["text"] for m in page["messages"]] == ["m4", "m3"] and page["has_more"] is True
    nxt = await client.conversations_history(
        channel=cid, oldest=stamps[1], limit=2, cursor=page["response_metadata"]["next_cursor"]
    )
    assert [m["text"] for m in nxt["messages"]] == ["m2"] and nxt["has_more"] is False  # oldest is exclusive
    incl = await client.conversations_history(channel=cid, oldest=stamps[1], latest=stamps[3], inclusive=True)
    assert [m["text"] for m in incl["messages"]] == ["m3", "m2", "m1"]
    assert await api_error(client.conversations_history(channel=cid, cursor="not-a-cursor")) == "invalid_cursor"
    assert await api_error(client.conversations_history(channel=cid, oldest="abc")) == "invalid_ts_oldest"


@pytest.mark.asyncio
async def test_archive_and_its_errors(fake, client):
    cid = fake.add_channel("inc-arch")
    await client.conversations_archive(channel=cid)
    assert (await client.conversations_info(channel=cid))["channel"]["is_archived"] is True
    assert fake.messages(cid)[-1]["subtype"] == "channel_archive"
    assert await api_error(client.conversations_archive(channel=cid)) == "already_archived"
    assert await api_error(client.chat_postMessage(channel=cid, text="x")) == "is_archived"
    assert await api_error(client.conversations_invite(channel=cid, users="U1")) == "is_archived"
    assert await api_error(client.conversations_archive(channel="CNOPE")) == "channel_not_found"
    outside = fake.add_channel("not-ours", bot_member=False)
    assert await api_error(client.conversations_archive(channel=outside)) == "not_in_channel"
    fake.state.channels[fake.add_channel("general")].is_general = True
    assert await api_error(client.conversations_archive(channel="general")) == "cant_archive_general"
    await client.chat_postMessage(channel="U42", text="dm")
    assert await api_error(client.conversations_archive(channel="DU42")) == "method_not_supported_for_channel_type"
