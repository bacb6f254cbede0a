"""Chat.upload_file: the running app's Slack gateway sharing a file over HTTP through Slack's
external upload flow (files.getUploadURLExternal, the upload URL, files.completeUploadExternal)
against the fake Slack, and Slack's refusals surfacing as ChatError with Slack's error name."""

from __future__ import annotations

import pytest

from bot.chat import ChatError
from bot.slack.gateway import UPLOAD_STEP, SlackGateway, make_client
from fbworld.slack import UPLOAD_URL, Event, SlackEmulator
from tests.support.core import IC
from tests.support.harness import TOKEN

POSTMORTEM = "# INC-1 postmortem\n\n## Detection gap\nFirst signal 03:10 → détection 05:15 (2h 05m)\n"


async def test_a_file_shows_up_in_the_incident_channel_with_the_exact_bytes(app):
    inc = await app.declare("GPU hang", user=IC)
    chat = app.services.chat
    file_id = await chat.upload_file(
        inc.channel_id, "INC-1-postmortem.md", POSTMORTEM, "INC-1 postmortem", comment="Postmortem for INC-1"
    )

    f = app.slack.file(file_id)
    assert f.content == POSTMORTEM.encode("utf-8") and f.length == len(f.content)  # bytes, not characters
    assert (f.name, f.title, f.channels, f.initial_comment) == (
        "INC-1-postmortem.md",
        "INC-1 postmortem",
        [inc.channel_id],
        "Postmortem for INC-1",
    )
    share = app.slack.messages(inc.channel_id)[-1]
    assert share["subtype"] == "file_share" and share["text"] == "Postmortem for INC-1"
    assert share["files"] == [{"id": file_id, "name": "INC-1-postmortem.md", "title": "INC-1 postmortem"}]
    # The three steps, in order; the API calls carry the bot token, the upload URL none.
    calls = [c for c in app.slack.calls if c.method.startswith("files.") or c.method == UPLOAD_URL]
    assert [c.method for c in calls] == ["files.getUploadURLExternal", UPLOAD_URL, "files.completeUploadExternal"]
    assert calls[0].token == TOKEN and calls[2].token == TOKEN and calls[1].token is None
    assert calls[0].args["length"] == str(len(POSTMORTEM.encode()))


async def test_binary_content_and_a_thread_reply(app):
    ch = app.slack.add_channel("inc-bytes")
    parent = await app.services.chat.post(ch, "the card")
    data = bytes(range(256))
    file_id = await app.services.chat.upload_file(ch, "dump.bin", data, "raw dump", thread=parent)
    f = app.slack.file(file_id)
    assert f.content == data and f.thread_ts == parent and f.initial_comment is None
    assert app.slack.messages(ch)[-1]["thread_ts"] == parent


async def test_bytes_cut_short_on_the_way_fail_as_slack_says(app):
    ch = app.slack.add_channel("inc-short")
    app.slack.truncate_next_upload(keep=10)
    with pytest.raises(ChatError) as exc:
        await app.services.chat.upload_file(ch, "pm.md", POSTMORTEM, "PM")
    assert (exc.value.method, exc.value.error) == ("files.completeUploadExternal", "file_upload_size_mismatch")
    assert app.slack.files() == [] and app.slack.messages(ch) == []


@pytest.mark.parametrize("where, error", [("unknown", "channel_not_found"), ("outside", "not_in_channel")])
async def test_a_channel_slack_refuses_is_a_chat_error_with_its_name(app, where, error):
    channel = "C0NOSUCH" if where == "unknown" else app.slack.add_channel("ops-private", ["U1"], bot_member=False)
    with pytest.raises(ChatError) as exc:
        await app.services.chat.upload_file(channel, "pm.md", POSTMORTEM, "PM")
    assert (exc.value.method, exc.value.error) == ("files.completeUploadExternal", error)
    assert app.slack.files() == []


async def test_empty_content_is_refused_at_the_first_step(app):
    ch = app.slack.add_channel("inc-empty")
    with pytest.raises(ChatError) as exc:
        await app.services.chat.upload_file(ch, "pm.md", "", "PM")
    assert (exc.value.method, exc.value.error) == ("files.getUploadURLExternal", "missing_argument")
    assert app.slack.calls_to(UPLOAD_URL) == []


async def test_transient_failures_are_retried_and_a_lasting_one_is_reported(app):
    ch = app.slack.add_channel("inc-flaky")
    app.slack.rate_limit_next("files.getUploadURLExternal", retry_after=0)
    app.slack.fail_upload_next(500)
    file_id = await app.services.chat.upload_file(ch, "pm.md", POSTMORTEM, "PM")
    assert app.slack.file(file_id).content == POSTMORTEM.encode()
    assert len(app.slack.calls_to(UPLOAD_URL)) == 2

    app.slack.fail_upload_next(500, times=3)  # the first try and both retries
    with pytest.raises(ChatError) as exc:
        await app.services.chat.upload_file(ch, "pm.md", POSTMORTEM, "PM")
    assert (exc.value.method, exc.value.error) == (UPLOAD_STEP, "http_500")
    assert [f.id for f in app.slack.files(ch)] == [file_id]


async def test_the_console_emulator_shows_the_file_and_keeps_its_content():
    """`firebreak console`'s embedded Slack: the same gateway call prints one short line."""
    seen: list[Event] = []
    emulator = SlackEmulator(token="xoxb-console", on_event=seen.append)
    await emulator.start()
    gateway = SlackGateway(make_client("xoxb-console", emulator.api_url))
    try:
        ch = emulator.add_channel("inc-1-gpu-hang")
        file_id = await gateway.upload_file(ch, "pm.md", POSTMORTEM, "INC-1 postmortem", comment="Postmortem")
        (ev,) = seen
        assert (ev.kind, ev.channel, ev.file) == ("post", ch, file_id)
        assert ev.text == "Postmortem\n[file] INC-1 postmortem (4 lines)"
        assert emulator.file_text(file_id) == POSTMORTEM
        with pytest.raises(ChatError) as exc:
            await gateway.upload_file("CNOPE", "pm.md", "x", "x")
        assert exc.value.error == "channel_not_found"
    finally:
        await gateway.close()
        await emulator.stop()
