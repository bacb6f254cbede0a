"""Tests for the FakeSlack server and signed inbound-request helpers."""

from __future__ import annotations

import time

import pytest
import pytest_asyncio
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from fbworld.slack import FakeSlack, SlackSender, sign, slash_command_body, url_verification_body
from fbworld.slack.scopes import ALL_SCOPES

SECRET = "shhh-signing-secret"


@pytest_asyncio.fixture
async def fake():
    f = FakeSlack(scopes=ALL_SCOPES)  # every method's scope: these are tests of the emulator's methods
    await f.start()
    yield f
    await f.stop()


@pytest_asyncio.fixture
async def client(fake):
    c = AsyncWebClient(token="xoxb-test", base_url=fake.api_url)
    yield c


async def api_error(coro) -> str:
    with pytest.raises(SlackApiError) as exc:
        await coro
    return exc.value.response["error"]


# --- Web API -------------------------------------------------------------


@pytest.mark.asyncio
async def test_start_returns_api_base_url_and_auth_test(fake, client):
    assert fake.api_url.startswith("http://127.0.0.1:") and fake.api_url.endswith("/api/")
    resp = await client.auth_test()
    assert (resp["user_id"], resp["bot_id"], resp["team_id"]) == ("UBOT", "BBOT", "T1")


@pytest.mark.asyncio
async def test_auth_errors_and_unknown_method(fake):
    assert await api_error(AsyncWebClient(base_url=fake.api_url).auth_test()) == "not_authed"
    bad = AsyncWebClient(token="xoxp-user", base_url=fake.api_url)
    assert await api_error(bad.auth_test()) == "invalid_auth"
    good = AsyncWebClient(token="xoxb-test", base_url=fake.api_url)
    assert await api_error(good.api_call("no.such.method")) == "unknown_method"


@pytest.mark.asyncio
async def test_body_styles_json_vs_query_params(fake, client):
    """Confirms what slack_sdk's AsyncWebClient actually puts on the wire."""
    ch = (await client.conversations_create(name="inc-1"))["channel"]["id"]
    await client.chat_postMessage(channel=ch, text="hi", blocks=[{"type": "divider"}])
    create, post = fake.calls_to("conversations.create")[0], fake.calls_to("chat.postMessage")[0]
    assert create.content_type == "application/x-www-form-urlencoded"
    assert create.args == {"name": "inc-1"} and create.token == "xoxb-test"
    assert post.content_type == "application/json"
    assert post.args["blocks"] == [{"type": "divider"}]
    assert post.headers["Authorization"] == "Bearer xoxb-test"


@pytest.mark.asyncio
async def test_form_body_is_parsed_too(fake):
    import aiohttp

    async with (
        aiohttp.ClientSession() as s,
        s.post(fake.api_url + "conversations.create", data={"token": "xoxb-x", "name": "via-form"}) as r,
    ):
        body = await r.json()
    assert body["ok"] and body["channel"]["name"] == "via-form"


@pytest.mark.asyncio
async def test_create_channel_rules(fake, client):
    resp = await client.conversations_create(name="inc-2024-db_outage")
    ch = resp["channel"]
    assert ch["id"].startswith("C") and ch["name"] == "inc-2024-db_outage"
    assert fake.channel(ch["id"]).members == ["UBOT"]
    assert await api_error(client.conversations_create(name="inc-2024-db_outage")) == "name_taken"
    for bad in ("Upper", "has space", "x" * 81, "emoji!"):
        assert await api_error(client.conversations_create(name=bad)) == "invalid_name_specials"
    assert (await client.conversations_create(name="y" * 80))["ok"]


@pytest.mark.asyncio
async def test_private_channels_are_for_members_only(fake, client):
    made = (await client.conversations_create(name="inc-sec", is_private=True))["channel"]
    assert (made["is_private"], made["is_channel"], made["is_group"]) == (True, False, True)
    await client.conversations_invite(channel=made["id"], users="U1")
    assert fake.channel(made["id"]).members == ["UBOT", "U1"]
    # Nobody walks in: joining is by invitation only, and a non-member cannot post.
    assert await api_error(client.conversations_join(channel=made["id"])) == "method_not_supported_for_channel_type"
    with pytest.raises(Exception, match="not_in_channel"):
        fake.state.user_message(made["id"], "U2", "let me in")
    # A private channel the bot is not in does not exist for it: not listed, not seen, not joined.
    hidden = fake.add_channel("hr-private", members=["U3"], bot_member=False, is_private=True)
    for call in (client.conversations_info, client.conversations_join, client.conversations_history):
        assert await api_error(call(channel=hidden)) == "channel_not_found"
    assert await api_error(client.chat_postMessage(channel=hidden, text="hi")) == "channel_not_found"
    public = [c["name"] for c in (await client.conversations_list())["channels"]]
    both = [c["name"] for c in (await client.conversations_list(types="public_channel,private_channel"))["channels"]]
    assert "inc-sec" not in public and "hr-private" not in public
    assert "inc-sec" in both and "hr-private" not in both


@pytest.mark.asyncio
async def test_invite_join_info_users(fake, client):
    cid = fake.add_channel("ops", members=["U1"], bot_member=False)
    assert await api_error(client.conversations_invite(channel=cid, users="U2")) == "not_in_channel"
    join = await client.conversations_join(channel=cid)
    assert join["channel"]["is_member"] is True
    await client.conversations_invite(channel=cid, users=["U2", "U3"])
    assert fake.channel(cid).members == ["U1", "UBOT", "U2", "U3"]
    assert await api_error(client.conversations_invite(channel=cid, users="U2")) == "already_in_channel"
    info = await client.conversations_info(channel=cid)
    assert info["channel"]["name"] == "ops" and info["channel"]["num_members"] == 4
    fake.add_user("U9", name="alice", real_name="Alice A")
    user = (await client.users_info(user="U9"))["user"]
    assert (user["id"], user["name"], user["real_name"], user["tz"]) == ("U9", "alice", "Alice A", "UTC")
    assert (await client.users_info(user="U7"))["user"]["tz"] == "UTC"


@pytest.mark.asyncio
async def test_post_update_delete_history(fake, client):
    cid = fake.add_channel("inc-1", channel_id="C123")
    assert cid == "C123"
    first = await client.chat_postMessage(channel=cid, text="one")
    reply = await client.chat_postMessage(channel=cid, text="two", thread_ts=first["ts"])
    assert first["channel"] == "C123" and first["message"]["user"] == "UBOT"
    assert float(reply["ts"]) > float(first["ts"]) and len(first["ts"].split(".")[1]) == 6
    upd = await client.chat_update(channel=cid, ts=first["ts"], text="one!", blocks=[])
    assert upd["message"]["text"] == "one!"
    msgs = fake.messages(cid)
    assert [m["text"] for m in msgs] == ["one!", "two"]
    assert msgs[0]["edits"][0]["text"] == "one" and msgs[1]["thread_ts"] == first["ts"]
    hist = await client.conversations_history(channel=cid)
    assert [m["text"] for m in hist["messages"]] == ["one!"]  # as Slack: thread replies are not in history
    await client.chat_delete(channel=cid, ts=reply["ts"])
    assert [m["text"] for m in fake.messages(cid)] == ["one!"]
    assert await api_error(client.chat_update(channel=cid, ts="1.2", text="x")) == "message_not_found"
    assert await api_error(client.chat_postMessage(channel="CNOPE", text="x")) == "channel_not_found"


@pytest.mark.asyncio
async def test_not_in_channel_and_dm(fake, client):
    cid = fake.add_channel("public-not-joined", bot_member=False)
    # chat:write.public: a public channel the bot is not in takes its post, and the bot stays out.
    assert (await client.chat_postMessage(channel=cid, text="notice"))["channel"] == cid
    assert [m["text"] for m in fake.messages(cid)] == ["notice"] and "UBOT" not in fake.channel(cid).members
    hidden = fake.add_channel("private-not-joined", bot_member=False, is_private=True)
    assert await api_error(client.chat_postMessage(channel=hidden, text="x")) == "channel_not_found"
    dm = await client.chat_postMessage(channel="U42", text="psst")
    assert dm["channel"] == "DU42" and fake.messages("DU42")[0]["text"] == "psst"
    # Without chat:write.public Slack answers as to any non-member: not_in_channel.
    async with FakeSlack(scopes=ALL_SCOPES - {"chat:write.public"}) as bare:
        other = bare.add_channel("public-not-joined", bot_member=False)
        c = AsyncWebClient(token="xoxb-test", base_url=bare.api_url)
        assert await api_error(c.chat_postMessage(channel=other, text="x")) == "not_in_channel"
        assert bare.messages(other) == []


@pytest.mark.asyncio
async def test_pins_and_ephemeral(fake, client):
    cid = fake.add_channel("inc-pins", members=["U1"])
    ts = (await client.chat_postMessage(channel=cid, text="summary"))["ts"]
    await client.pins_add(channel=cid, timestamp=ts)
    assert fake.channel(cid).pins == [ts]
    assert await api_error(client.pins_add(channel=cid, timestamp=ts)) == "already_pinned"
    assert await api_error(client.pins_add(channel=cid, timestamp="9.9")) == "message_not_found"
    resp = await client.chat_postEphemeral(channel=cid, user="U1", text="only you")
    assert resp["message_ts"]
    assert fake.ephemerals(user="U1")[0]["text"] == "only you"
    assert fake.ephemerals(channel=cid, user="U2") == []
    assert fake.messages(cid)[-1]["text"] == "summary"  # ephemerals are not messages
    assert await api_error(client.chat_postEphemeral(channel=cid, user="U2", text="x")) == "user_not_in_channel"


@pytest.mark.asyncio
async def test_views_open_update(fake, client):
    view = {"type": "modal", "callback_id": "declare", "title": {"type": "plain_text", "text": "Declare"}, "blocks": []}
    opened = await client.views_open(trigger_id="1.2.abc", view=view)
    vid = opened["view"]["id"]
    assert opened["view"]["callback_id"] == "declare"
    updated = await client.views_update(view_id=vid, view={**view, "callback_id": "v2"})
    assert fake.views[vid]["callback_id"] == "v2" and updated["view"]["id"] == vid
    assert await api_error(client.views_update(view_id="VNOPE", view=view)) == "not_found"


@pytest.mark.asyncio
async def test_rate_limit_raises_then_retry_handler_succeeds(fake, client):
    cid = fake.add_channel("rl")
    fake.rate_limit_next("chat.postMessage", retry_after=7)
    with pytest.raises(SlackApiError) as exc:
        await client.chat_postMessage(channel=cid, text="x")
    assert exc.value.response.status_code == 429
    assert exc.value.response.headers["Retry-After"] == "7"
    assert exc.value.response["error"] == "ratelimited"

    fake.rate_limit_next("chat.postMessage", times=1, retry_after=0)
    retrying = AsyncWebClient(
        token="xoxb-test", base_url=fake.api_url, retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=2)]
    )
    resp = await retrying.chat_postMessage(channel=cid, text="eventually")
    assert resp["ok"] and len(fake.calls_to("chat.postMessage")) == 3
    assert [m["text"] for m in fake.messages(cid)] == ["eventually"]


@pytest.mark.asyncio
async def test_fail_next(fake, client):
    fake.fail_next("conversations.create", "restricted_action", times=2)
    for _ in range(2):
        assert await api_error(client.conversations_create(name="a")) == "restricted_action"
    assert (await client.conversations_create(name="a"))["ok"]


@pytest.mark.asyncio
async def test_wait_for(fake, client):
    import asyncio

    async def later():
        await asyncio.sleep(0.1)
        await client.auth_test()

    task = asyncio.create_task(later())
    call = await fake.wait_for(lambda c: c.method == "auth.test", timeout=2)
    assert call.method == "auth.test"
    await task
    with pytest.raises(TimeoutError):
        await fake.wait_for("chat.postMessage", timeout=0.05)


@pytest.mark.asyncio
async def test_response_url_via_webhook_client(fake):
    url = fake.response_url("cmd-1")
    assert url.startswith(fake.base_url + "/response/")
    hook = AsyncWebhookClient(url)
    resp = await hook.send(text="working on it", response_type="ephemeral")
    assert (resp.status_code, resp.body) == (200, "ok")
    await hook.send(text="done", replace_original=True, blocks=[{"type": "divider"}])
    bodies = fake.responses_for("cmd-1")
    assert bodies[0] == {"text": "working on it", "response_type": "ephemeral"}
    assert bodies[1]["replace_original"] is True and bodies[1]["blocks"] == [{"type": "divider"}]
    assert fake.responses_for("other") == []


# --- signing -------------------------------------------------------------


def test_signature_accepted_by_slack_sdk_verifier():
    body = slash_command_body("declare sev1 db down")
    headers = sign(body, SECRET)
    assert SignatureVerifier(SECRET).is_valid_request(body, headers)
    assert not SignatureVerifier("wrong-secret").is_valid_request(body, headers)
    old = sign(body, SECRET, timestamp=int(time.time()) - 6 * 60)
    assert not SignatureVerifier(SECRET).is_valid_request(body, old)
    assert not SignatureVerifier(SECRET).is_valid_request(body + b"x", headers)


@settings(max_examples=50, deadline=None, database=None)
@given(text=st.text(), secret=st.text(min_size=1).filter(str.strip))
def test_signature_roundtrip_property(text, secret):
    # SignatureVerifier only accepts UTF-8 bodies and non-blank secrets.
    body = text.encode()
    headers = sign(body, secret)
    assert SignatureVerifier(secret).is_valid(body, headers["X-Slack-Request-Timestamp"], headers["X-Slack-Signature"])


# --- end to end with slack_bolt ---------------------------------------------


@pytest_asyncio.fixture
async def bolt_app(fake):
    """A minimal Bolt AsyncApp served by aiohttp on a random port, talking to the fake."""
    app = AsyncApp(
        token="xoxb-test", signing_secret=SECRET, client=AsyncWebClient(token="xoxb-test", base_url=fake.api_url)
    )

    @app.command("/incident")
    async def incident(ack, command, say, respond):
        await ack("on it")
        await say(f"declared: {command['text']}")
        await respond(text="you declared it", response_type="ephemeral")

    @app.action("ack_btn")
    async def ack_btn(ack, body, client):
        await ack()
        await client.chat_update(channel=body["channel"]["id"], ts=body["container"]["message_ts"], text="acked")

    @app.event("app_mention")
    async def mention(event, say):
        await say(text="hello", thread_ts=event["ts"])

    async def handle(request: web.Request) -> web.Response:
        return await to_aiohttp_response(await app.async_dispatch(await to_bolt_request(request)))

    web_app = web.Application()
    web_app.router.add_post("/slack/events", handle)
    runner = web.AppRunner(web_app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


@pytest.mark.asyncio
async def test_bolt_slash_command_say_and_respond(fake, bolt_app):
    fake.add_channel("general", channel_id="C123")
    sender = SlackSender(bolt_app, SECRET)
    status, text, elapsed = await sender.command(
        "sev1 db down", user="U_IC", channel="C123", response_url=fake.response_url("r1")
    )
    assert status == 200 and "on it" in text and elapsed < 3
    await fake.wait_for("chat.postMessage")
    await fake.wait_for_response("r1")
    assert fake.messages("C123")[0]["text"] == "declared: sev1 db down"
    assert fake.responses_for("r1") == [{"text": "you declared it", "response_type": "ephemeral"}]
    assert fake.calls_to("auth.test"), "Bolt verifies its token via auth.test"


@pytest.mark.asyncio
async def test_bolt_rejects_bad_signature(fake, bolt_app):
    status, _, _ = await SlackSender(bolt_app, "not-the-secret").command("x")
    assert status == 401
    body = url_verification_body("abc")
    import aiohttp

    async with aiohttp.ClientSession() as s:
        stale = sign(body, SECRET, timestamp=int(time.time()) - 600)
        async with s.post(
            bolt_app + "/slack/events", data=body, headers={**stale, "Content-Type": "application/json"}
        ) as r:
            assert r.status == 401
    status, text, _ = await SlackSender(bolt_app, SECRET).post(body, "application/json")
    assert status == 200 and "abc" in text


@pytest.mark.asyncio
async def test_bolt_action_and_event(fake, bolt_app):
    cid = fake.add_channel("inc-9", channel_id="C999")
    ts = fake.state.post(cid, "needs ack").ts
    sender = SlackSender(bolt_app, SECRET)
    status, _, _ = await sender.action("ack_btn", "yes", user="U1", channel=cid, message_ts=ts)
    assert status == 200
    await fake.wait_for("chat.update")
    assert fake.messages(cid)[0]["text"] == "acked"
    status, _, _ = await sender.event(
        {"type": "app_mention", "user": "U1", "text": "<@UBOT> hi", "ts": ts, "channel": cid},
        event_id="Ev1",
        retry_num=1,
    )
    assert status == 200
    call = await fake.wait_for(lambda c: c.method == "chat.postMessage")
    assert call.args["thread_ts"] == ts
