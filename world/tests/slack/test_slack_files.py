"""FakeSlack's external file upload flow, as slack_sdk (and a plain HTTP client) drive it:
files.getUploadURLExternal, the upload URL, files.completeUploadExternal."""

from __future__ import annotations

import aiohttp
import pytest
import pytest_asyncio
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from fbworld.slack import UPLOAD_URL, FakeSlack
from fbworld.slack.scopes import ALL_SCOPES

TOKEN = "xoxb-files"


@pytest_asyncio.fixture
async def fake():
    f = FakeSlack(scopes=ALL_SCOPES)  # files.info (files:read) too: tests of the emulator's methods
    await f.start()
    yield f
    await f.stop()


@pytest_asyncio.fixture
async def client(fake):
    return AsyncWebClient(token=TOKEN, base_url=fake.api_url)


async def api_error(coro) -> str:
    with pytest.raises(SlackApiError) as exc:
        await coro
    return str(exc.value.response["error"])


async def reserve(client: AsyncWebClient, data: bytes, name: str = "pm.md", length: int | None = None):
    resp = await client.files_getUploadURLExternal(filename=name, length=len(data) if length is None else length)
    return str(resp["file_id"]), str(resp["upload_url"])


async def post_bytes(url: str, data: bytes, multipart: bool = False) -> tuple[int, str]:
    async with aiohttp.ClientSession() as s:
        if multipart:
            form = aiohttp.FormData()
            form.add_field("file", data, filename="pm.md", content_type="application/octet-stream")
            body: object = form
        else:
            body = data
        async with s.post(url, data=body) as r:
            return r.status, await r.text()


async def test_the_three_steps_share_the_exact_bytes_with_a_file_share_message(fake, client):
    ch = fake.add_channel("inc-7")
    data = "# Postmortem — INC-7\n\nDetection gap: 2h 05m\n".encode()
    file_id, url = await reserve(client, data)
    assert file_id.startswith("F") and url.startswith(fake.base_url + "/upload/v1/")
    assert await post_bytes(url, data) == (200, f"OK - {len(data)}")
    done = await client.files_completeUploadExternal(
        files=[{"id": file_id, "title": "INC-7 postmortem"}], channel_id=ch, initial_comment="The postmortem"
    )
    assert [(f["id"], f["name"], f["title"], f["size"]) for f in done["files"]] == [
        (file_id, "pm.md", "INC-7 postmortem", len(data))
    ]

    f = fake.file(file_id)
    assert (f.name, f.title, f.content, f.channel, f.initial_comment) == (
        "pm.md",
        "INC-7 postmortem",
        data,
        ch,
        "The postmortem",
    )
    assert f.text.startswith("# Postmortem — INC-7") and fake.files(ch) == [f]
    # The share is a message in the channel's history, as Slack records it.
    hist = await client.conversations_history(channel=ch)
    (msg,) = hist["messages"]
    assert msg["subtype"] == "file_share" and msg["text"] == "The postmortem" and msg["bot_id"] == "BBOT"
    assert msg["files"] == [{"id": file_id, "name": "pm.md", "title": "INC-7 postmortem"}]
    assert f.message_ts == {ch: msg["ts"]}
    info = await client.files_info(file=file_id)
    assert info["file"]["channels"] == [ch]


async def test_upload_url_takes_multipart_needs_no_token_and_is_recorded(fake, client):
    ch = fake.add_channel("inc-8")
    data = b"\x00\xffbinary\n"
    file_id, url = await reserve(client, data, name="blob.bin")
    assert await post_bytes(url, data, multipart=True) == (200, f"OK - {len(data)}")
    call = fake.calls_to(UPLOAD_URL)[-1]
    assert call.args["bytes"] == len(data) and call.token is None and "Authorization" not in call.headers
    await client.files_completeUploadExternal(files=[{"id": file_id}], channel_id=ch)
    f = fake.file(file_id)
    assert f.content == data and f.title == "blob.bin"  # no title: Slack shows the name


async def test_upload_url_refuses_get_unknown_and_spent_keys(fake, client):
    ch = fake.add_channel("inc-9")
    data = b"abc"
    file_id, url = await reserve(client, data)
    async with aiohttp.ClientSession() as s, s.get(url) as r:
        assert r.status == 405
    assert (await post_bytes(fake.base_url + "/upload/v1/nope", data))[0] == 404
    assert (await post_bytes(url, data))[0] == 200
    await client.files_completeUploadExternal(files=[{"id": file_id, "title": "t"}], channel_id=ch)
    assert (await post_bytes(url, b"other"))[0] == 404  # the ticket is spent
    assert fake.file(file_id).content == data


async def test_a_retried_upload_replaces_the_bytes(fake, client):
    ch = fake.add_channel("inc-10")
    file_id, url = await reserve(client, b"good")
    await post_bytes(url, b"junk")
    await post_bytes(url, b"good")
    await client.files_completeUploadExternal(files=[{"id": file_id, "title": "t"}], channel_id=ch)
    assert fake.file(file_id).content == b"good" and fake.file(file_id).uploads == 2


async def test_get_upload_url_checks_token_and_arguments(fake, client):
    anon = AsyncWebClient(base_url=fake.api_url)
    assert await api_error(anon.files_getUploadURLExternal(filename="a.md", length=3)) == "not_authed"
    user = AsyncWebClient(token="xoxp-user", base_url=fake.api_url)
    assert await api_error(user.files_getUploadURLExternal(filename="a.md", length=3)) == "invalid_auth"
    assert await api_error(client.files_getUploadURLExternal(filename="a.md", length=0)) == "missing_argument"
    assert await api_error(client.files_getUploadURLExternal(filename="", length=3)) == "missing_argument"
    assert await api_error(client.api_call("files.getUploadURLExternal", params={"filename": "a"})) == (
        "missing_argument"
    )
    bad_len = client.api_call("files.getUploadURLExternal", params={"filename": "a", "length": "ten"})
    assert await api_error(bad_len) == "invalid_arguments"
    assert fake.state.files == {}  # nothing reserved by a refusal


async def test_complete_checks_token(fake, client):
    ch = fake.add_channel("inc-11")
    file_id, url = await reserve(client, b"abc")
    await post_bytes(url, b"abc")
    anon = AsyncWebClient(base_url=fake.api_url)
    files = [{"id": file_id, "title": "t"}]
    assert await api_error(anon.files_completeUploadExternal(files=files, channel_id=ch)) == "not_authed"
    assert fake.files() == []
    await client.files_completeUploadExternal(files=files, channel_id=ch)
    assert [f.id for f in fake.files(ch)] == [file_id]


@pytest.mark.parametrize("sent", [b"abc", b"abcdefgh"])
async def test_bytes_other_than_the_promised_length_fail_completion(fake, client, sent):
    ch = fake.add_channel("inc-12")
    file_id, url = await reserve(client, b"abcde")
    assert await post_bytes(url, sent) == (200, f"OK - {len(sent)}")
    err = await api_error(client.files_completeUploadExternal(files=[{"id": file_id, "title": "t"}], channel_id=ch))
    assert err == "file_upload_size_mismatch"
    assert fake.files() == [] and fake.messages(ch) == []


async def test_unknown_unuploaded_and_twice_completed_files_are_not_found(fake, client):
    ch = fake.add_channel("inc-13")
    assert await api_error(client.files_completeUploadExternal(files=[{"id": "F404"}], channel_id=ch)) == (
        "file_not_found"
    )
    file_id, url = await reserve(client, b"abc")
    never = client.files_completeUploadExternal(files=[{"id": file_id, "title": "t"}], channel_id=ch)
    assert await api_error(never) == "file_not_found"  # no bytes ever reached the upload URL
    await post_bytes(url, b"abc")
    await client.files_completeUploadExternal(files=[{"id": file_id, "title": "t"}], channel_id=ch)
    again = client.files_completeUploadExternal(files=[{"id": file_id, "title": "t"}], channel_id=ch)
    assert await api_error(again) == "file_not_found"
    assert len(fake.messages(ch)) == 1  # shared once
    bad = client.api_call("files.completeUploadExternal", params={"files": "[]", "channel_id": ch})
    assert await api_error(bad) == "invalid_arguments"


async def test_channel_errors_leave_the_file_unshared_for_a_retry(fake, client):
    outside = fake.add_channel("private-ops", members=["U1"], bot_member=False)
    archived = fake.add_channel("old-inc")
    fake.state.archive(archived)
    ch = fake.add_channel("inc-14")
    file_id, url = await reserve(client, b"abc")
    await post_bytes(url, b"abc")
    files = [{"id": file_id, "title": "t"}]
    assert await api_error(client.files_completeUploadExternal(files=files, channel_id="C404")) == "channel_not_found"
    assert await api_error(client.files_completeUploadExternal(files=files, channel_id=outside)) == "not_in_channel"
    assert await api_error(client.files_completeUploadExternal(files=files, channel_id=archived)) == "is_archived"
    assert fake.files() == [] and fake.messages(outside) == []
    await client.files_completeUploadExternal(files=files, channel_id=ch)
    assert fake.file(file_id).channels == [ch]


async def test_without_a_channel_the_file_stays_private(fake, client):
    file_id, url = await reserve(client, b"abc")
    await post_bytes(url, b"abc")
    await client.files_completeUploadExternal(files=[{"id": file_id, "title": "t"}])
    f = fake.file(file_id)
    assert f.completed and f.channels == [] and f.message_ts == {}


async def test_a_thread_share_stays_out_of_the_top_level_history(fake, client):
    ch = fake.add_channel("inc-15")
    parent = fake.state.post(ch, "the card")
    file_id, url = await reserve(client, b"abc")
    await post_bytes(url, b"abc")
    await client.files_completeUploadExternal(files=[{"id": file_id, "title": "t"}], channel_id=ch, thread_ts=parent.ts)
    hist = await client.conversations_history(channel=ch)
    assert [m["ts"] for m in hist["messages"]] == [parent.ts]
    assert fake.file(file_id).thread_ts == parent.ts
    assert fake.messages(ch)[-1]["thread_ts"] == parent.ts


async def test_files_upload_v2_runs_the_flow_end_to_end(fake, client):
    ch = fake.add_channel("inc-16")
    resp = await client.files_upload_v2(
        channel=ch, filename="pm.md", content="naïve ✓\nline 2\n", title="PM", initial_comment="hi"
    )
    assert [c.method for c in fake.calls] == ["files.getUploadURLExternal", UPLOAD_URL, "files.completeUploadExternal"]
    assert "Authorization" not in fake.calls_to(UPLOAD_URL)[0].headers  # the URL is the credential
    f = fake.file(resp["file"]["id"])
    assert f.content == "naïve ✓\nline 2\n".encode() and f.length == len(f.content) and f.title == "PM"


async def test_injected_upload_faults(fake, client):
    ch = fake.add_channel("inc-17")
    file_id, url = await reserve(client, b"abcdef")
    fake.fail_upload_next(503)
    assert await post_bytes(url, b"abcdef") == (503, "upload failed")
    fake.truncate_next_upload(keep=2)
    assert await post_bytes(url, b"abcdef") == (200, "OK - 6")  # answered as if all arrived
    err = await api_error(client.files_completeUploadExternal(files=[{"id": file_id, "title": "t"}], channel_id=ch))
    assert err == "file_upload_size_mismatch"
    fake.fail_next("files.completeUploadExternal", "file_update_failed")
    await post_bytes(url, b"abcdef")
    err = await api_error(client.files_completeUploadExternal(files=[{"id": file_id, "title": "t"}], channel_id=ch))
    assert err == "file_update_failed"
    await client.files_completeUploadExternal(files=[{"id": file_id, "title": "t"}], channel_id=ch)
    assert fake.file(file_id).content == b"abcdef"
