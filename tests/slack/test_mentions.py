"""People's words are reposted inert: no @channel, @here, @everyone, group ping or disguised link
reaches Slack from an update, a title, a SEV reason or a handoff's threads (issue 9, item 1).

Slack sends what a person typed in its own markup: @channel picked in the client arrives as
``<!channel>``, a typed ``<`` as ``&lt;``. Posted back verbatim, the markup pings again.
"""

from __future__ import annotations

import asyncio
import re
import unicodedata
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bot.chat import quote
from bot.clock import ManualClock
from bot.incidents.rules import slugify
from fbworld.slack import FakeSlack
from tests.support.core import BOB, CAROL, IC, TITLE
from tests.support.harness import MODES, T0, RunningApp, start_app
from tests.support.mentions import INVISIBLE, POSTS, pings, received, texts

pytestmark = pytest.mark.parametrize("mode", MODES)  # over HTTP and over Socket Mode (docs/operating.md)

# What a hostile (or careless) person can put in a command, as Slack delivers it.
INJECT = "<!channel> <!here> <!everyone> <!subteam^S1|@x> <https://evil|click>"
SHOWN = "&lt;!channel&gt; &lt;!here&gt; &lt;!everyone&gt; &lt;!subteam^S1|@x&gt; &lt;https://evil|click&gt;"
PIECES = [
    "<!channel>",
    "<!here>",
    "<!everyone>",
    "<!subteam^S1|@x>",
    "<!subteam^S0123>",
    "<!date^1392734382^{date_short}|Feb 18>",
    "<https://evil|click>",
    "<https://evil>",
    "<mailto:a@evil|mail>",
    "<#C1|general>",
    "<@UBOB|bob>",
    "<@UBOB>",
    "<@>",
    "&lt;!channel&gt;",
    "&amp;lt;!here&amp;gt;",
    "&amp;",
    "&lt;",
    "&gt;",
    "&",
    "<",
    ">",
    "|",
    "!",
    "!here>",
    "\u202e",
    "\u2066",
    "\u2069",
    "\u200b",
    "\u200d",
    "\u2060",
    "\ufeff",
    " ",
    "Chat API",
    "down",
]
HOSTILE = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=6)), min_size=1, max_size=14).map("".join)


def _shown(text: str) -> str:
    """What Slack displays for ``text``: its three entities decoded once (written here independently)."""
    return re.sub(r"&(amp|lt|gt);", lambda m: {"amp": "&", "lt": "<", "gt": ">"}[m.group(1)], text)


@pytest.fixture
async def stakeholder_app(slack: FakeSlack, redis_url: str, clock) -> AsyncIterator[RunningApp]:
    running = await start_app(slack, redis_url, clock, firebreak_stakeholder_channel=slack.add_channel("stakeholders"))
    running.stakeholders = running.services.settings.firebreak_stakeholder_channel
    yield running
    await running.stop()


def _mark(app: RunningApp) -> tuple[int, int]:
    return len(app.slack.calls), len(app.slack.responses)


# `quote` itself ----------------------------------------------------------------------------------


def test_quote_shows_markup_literally_and_keeps_one_person_mentions():
    assert quote(f"Chat API: {INJECT} down") == f"Chat API: {SHOWN} down"
    # A typed "&lt;" arrives as "&amp;lt;" and must stay "&lt;" on screen, not become "<" or "&amp;lt;".
    assert quote("a &amp;lt; b &lt;c&gt; &amp; d") == "a &amp;lt; b &lt;c&gt; &amp; d"
    assert quote("<@UBOB|bob> is rolling back; <@W1>") == "<@UBOB> is rolling back; <@W1>"
    # Only a mention as Slack sent it counts: typed text that looks like one stays text.
    assert quote("&lt;@UBOB&gt;") == "&lt;@UBOB&gt;"
    assert quote("<@UBOB|<!channel>>") == "&lt;@UBOB|&lt;!channel&gt;&gt;"
    assert quote("in\u202eside\u200b \u2066x\u2069\ufeff") == "inside x"


@settings(max_examples=400, derandomize=True, deadline=None)
@given(text=st.one_of(HOSTILE, st.text()))
def test_quote_properties(text: str):
    q = quote(text)
    assert quote(q) == q  # idempotent
    rest = re.sub(r"<@[UW][A-Z0-9_]{1,20}>", "", q)
    assert "<" not in rest and ">" not in rest  # no markup but one-person mentions
    assert "&" not in re.sub(r"&(amp|lt|gt);", "", rest)  # every & is one of Slack's three entities
    assert not INVISIBLE.search(q)
    if "<@" not in text:
        # What Slack shows (its entities decoded once) is what the person typed, less invisibles.
        assert _shown(q) == INVISIBLE.sub("", _shown(text))


def test_slug_drops_markup_entities_and_invisibles():
    assert slugify("<!channel> GPU &lt;down&gt;", 60) == "gpu-down"
    assert slugify("<!subteam^S1|@oncall> Chat &amp; API <@UBOB|bob> <#C1|ops>", 60) == "chat-api"
    assert slugify("GP\u200bU \u202ehang\u2066 in us-east", 60) == "gpu-hang-in-us-east"
    assert slugify("see <https://evil.example/x|the runbook>", 60) == "see-the-runbook"


def _words(text: str) -> set[str]:
    folded = unicodedata.normalize("NFKD", INVISIBLE.sub("", _shown(text))).encode("ascii", "ignore").decode()
    return set(re.findall(r"[a-z0-9]+", folded.lower()))


@settings(max_examples=300, derandomize=True, deadline=None)
@given(text=HOSTILE)
def test_slug_is_always_a_clean_channel_name(text: str):
    slug = slugify(text, 500)
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", slug), slug
    # Only words the person wrote (as Slack shows them): no "lt"/"gt"/"amp" debris from entities.
    assert set(slug.split("-")) <= _words(text) | {"incident"}, (text, slug)


# Each path that reposts a person's words -----------------------------------------------------------


async def test_update_is_inert_in_the_incident_and_the_stakeholder_channel(stakeholder_app):
    app = stakeholder_app
    ch = (await app.declare(TITLE, sev=3, user=IC, cells=())).channel_id
    calls, replies = _mark(app)
    # A link is refused before anything is posted (bot/comms/public.py: only the policy's sites).
    out = await app.run(f"update Chat API: {INJECT} is on it", user=IC, channel=ch)
    assert out.startswith("Not posted: a public update links only to") and "`https://evil`" in out, out
    inject, shown = INJECT.replace(" <https://evil|click>", ""), SHOWN.replace(" &lt;https://evil|click&gt;", "")
    out = await app.run(f"update Chat API: {inject} &amp; &lt;b&gt; <@UBOB|bob> is on it", user=IC, channel=ch)
    assert out.startswith("Update posted."), out
    assert pings(app.slack, calls, replies) == []
    said = f"Chat API: {shown} &amp; &lt;b&gt; <@UBOB> is on it"
    [public] = [m["text"] for m in app.slack.messages(app.stakeholders)]
    assert public == f":mega: *INC-1* update at 03:10 UTC: {said}"
    assert app.slack.messages(ch)[-1]["text"] == f":mega: *Update* from <@{IC}> (INC-1, SEV3): {said}"


async def test_declare_title_is_inert_on_the_card_and_clean_in_the_channel_name(app):
    title = f"GPU &lt;down&gt; {INJECT} NV\u200bLink \u202ehang"
    key = await app.command(f'declare "{title}" --sev 2 --product <!here> --region <!everyone>', user=IC)
    out = await app.reply(key)
    assert out.startswith("Declared INC-1"), out
    inc = await app.incident("INC-1")
    # Stored as Slack sent it, less what reorders or hides text; quoted wherever it is shown.
    assert inc.title == f"GPU &lt;down&gt; {INJECT} NVLink hang"
    assert inc.channel_name == "inc-20261130-1-gpu-down-click-nvlink-hang"
    assert pings(app.slack) == []
    [card] = [c.args for c in app.slack.calls_to("chat.postMessage") if c.args["channel"] == inc.channel_id]
    assert card["text"].startswith(f"INC-1 SEV2 active: GPU &lt;down&gt; {SHOWN} NVLink hang (")
    assert card["blocks"][0]["text"]["text"].startswith(f"INC-1: GPU &lt;down&gt; {SHOWN[:40]}")
    assert "public scope: &lt;!here&gt; × &lt;!everyone&gt;" in "\n".join(texts(card["blocks"]))
    assert not any(INVISIBLE.search(t) for t in received(app.slack))
    # `status` shows the title too (only to the asker, but the same way).
    assert f"· GPU &lt;down&gt; {SHOWN} NVLink hang" in await app.run("status", user=IC, channel=inc.channel_id)
    assert pings(app.slack) == []


async def test_a_title_of_only_invisible_characters_opens_nothing(app):
    out = await app.run("declare \u202e\u200b\u200b\u2066\ufeff x", user=IC)
    assert "Title is too short" in out, out
    assert app.slack.calls_to("conversations.create") == []


async def test_sev_reason_is_inert_in_the_announcement_and_on_the_card(app):
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    calls, replies = _mark(app)
    out = await app.run(f"sev 1 {INJECT} &amp; more", user=IC, channel=ch)
    assert out.startswith("INC-1 is now SEV1"), out
    assert pings(app.slack, calls, replies) == []
    said = f":rotating_light: INC-1 raised SEV3 → SEV1 by <@{IC}>: {SHOWN} &amp; more"
    assert said in received(app.slack, calls, methods=POSTS)
    [edit] = [c.args for c in app.slack.calls[calls:] if c.method == "chat.update"][-1:]
    assert f"SEV reason: {SHOWN} &amp; more" in "\n".join(texts(edit["blocks"]))


async def test_handoff_threads_are_inert_when_posted_and_when_accepted(app):
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    calls, replies = _mark(app)
    out = await app.run(
        f'handoff ic <@{CAROL}> --threads "<!channel> db; <https://evil|click>; <!subteam^S1|@x>"', user=IC, channel=ch
    )
    assert out.startswith("Handoff HO-1 posted"), out
    post = next(m for m in reversed(app.slack.messages(ch)) if "handing to" in m["text"])
    threads = "open threads: &lt;!channel&gt; db, &lt;https://evil|click&gt;, &lt;!subteam^S1|@x&gt;;"
    assert threads in post["text"]
    key = await app.press("handoff.accept", "INC-1/HO-1", user=CAROL, channel=ch, message_ts=post["ts"])
    assert (await app.reply(key)).startswith("You are now Incident Commander")
    [edit] = [c.args for c in app.slack.calls[calls:] if c.method == "chat.update" and c.args["ts"] == post["ts"]]
    assert threads in edit["text"] and threads in "\n".join(texts(edit["blocks"]))
    assert pings(app.slack, calls, replies) == []


async def test_refusals_that_echo_what_was_typed_echo_it_inert(app):
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    calls, replies = _mark(app)
    for text in (
        "<!channel> now",
        "role ops <!here>",
        "sev <!everyone> x",
        "declare x --<!channel>=1",
        "help <!here>",
    ):
        key = await app.command(text, user=BOB, channel=ch)
        await app.drain()
        said = app.last_ack or ""
        said += "".join(str(r.get("text", "")) for r in app.slack.responses_for(key))
        assert "&lt;!" in said, (text, said)
    assert pings(app.slack, calls, replies) == []


# Arbitrary text through the real app ------------------------------------------------------------


def _property_world(redis_server):
    """One app (with a stakeholder channel) for every example: hypothesis runs outside pytest-asyncio."""
    loop = asyncio.new_event_loop()
    slack = FakeSlack()

    async def setup() -> RunningApp:
        r = aioredis.from_url(redis_server.url)
        await r.flushall()
        await r.aclose()
        await slack.start()
        stake = slack.add_channel("stakeholders")
        return await start_app(slack, redis_server.url, ManualClock(T0), firebreak_stakeholder_channel=stake)

    return loop, slack, loop.run_until_complete(setup())


def _close(loop, slack, app) -> None:
    loop.run_until_complete(app.stop())
    loop.run_until_complete(slack.stop())
    loop.close()


async def _send(app: RunningApp, text: str, channel: str) -> tuple[int, int]:
    calls, replies = _mark(app)
    await app.command(text, user=IC, channel=channel)
    await app.drain()
    return calls, replies


def test_no_update_text_reaches_slack_with_an_active_mention(redis_server):
    loop, slack, app = _property_world(redis_server)
    ch = loop.run_until_complete(app.declare(TITLE, sev=3, user=IC, cells=())).channel_id
    posted = []

    @settings(max_examples=80, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(text=HOSTILE)
    @example(text=f"Chat API: {INJECT} down")
    @example(text="<<!channel>>&lt;<!here>&gt;\u202e<!subteam^S1|@x>|<https://evil|click>")
    def check(text: str) -> None:
        calls, replies = loop.run_until_complete(_send(app, f"update {text}", ch))
        assert pings(slack, calls, replies) == [], text
        new = [t for c in slack.calls[calls:] if c.method == "chat.postMessage" for t in texts(c.args)]
        assert not any(INVISIBLE.search(t) for t in new), text
        posted.extend(t for t in new if "update at" in t)

    try:
        check()
    finally:
        _close(loop, slack, app)
    assert len(posted) >= 40  # most examples were real updates, posted to the stakeholder channel


def test_no_declared_title_reaches_slack_with_an_active_mention(redis_server):
    loop, slack, app = _property_world(redis_server)
    declared = []

    @settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(text=HOSTILE)
    @example(text=f"GPU {INJECT} &lt;down&gt;")
    def check(text: str) -> None:
        # A title with a control character is refused whole (tests/core/test_text_safety.py); this
        # property is about what a title that is taken becomes, so those characters become spaces.
        text = re.sub("[\x00-\x1f\x7f-\x9f\u2028\u2029]", " ", text)
        calls, replies = loop.run_until_complete(_send(app, f"declare {text}", "C_GENERAL"))
        assert pings(slack, calls, replies) == [], text
        assert not any(INVISIBLE.search(t) for t in received(slack, calls, methods=POSTS)), text
        for c in slack.calls[calls:]:
            if c.method == "conversations.create":
                assert re.fullmatch(r"inc-20261130-\d+-[a-z0-9]+(-[a-z0-9]+)*", c.args["name"]), c.args["name"]
                declared.append(c.args["name"])

    try:
        check()
    finally:
        _close(loop, slack, app)
    assert len(declared) >= 30  # most examples opened an incident with a card
