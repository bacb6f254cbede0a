"""A delivery received again does nothing the second time: over HTTP a signed request sent again
byte for byte (same body, same timestamp) while its signature is still valid, over Socket Mode
the same envelope delivered twice (bot/slack/replays.py). A replayed `declare` opens no second incident, a
replayed button or form runs once. The check is after-ack work, so a replay is acknowledged
like the first delivery; for a command the person is then told, at its response_url, that
nothing was done twice. Slack's own HTTP retries of an event are signed anew (a later
timestamp), so they still get through, and the event's own dedupe decides.
"""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest

from bot.incidents.store import repo
from bot.slack.replays import ALREADY
from bot.store import Keys
from fbworld.slack import block_actions_body, event_body, sign, slash_command_body, view_submission_body
from fbworld.slack.socket_mode import ack_text, envelope_of
from tests.support.comms import LEASE, _msg, _warnings, kill_at_post
from tests.support.core import CAROL, IC, TITLE
from tests.support.harness import MODES, RunningApp, audit_entries, start_app
from tests.support.ports import free_port

FORM, JSON = "application/x-www-form-urlencoded", "application/json"
UPDATE_VALUES = {"update": {"text": {"type": "plain_text_input", "value": "Chat API: recovering"}}}


def _copier(app: RunningApp, session: aiohttp.ClientSession, body: bytes, ctype: str = FORM):
    """Sends one copy of the same delivery each call: over HTTP identical bytes and signed headers,
    as a replayer sends; over Socket Mode the same envelope again (its id and attempt), as two
    connections carry it during a refresh."""
    if app.socket is not None:
        kind, payload = envelope_of(body, ctype)
        envelope_id = f"env-{id(body)}"

        async def again() -> tuple[int, str]:
            ack = await app.slack.socket.deliver(kind, payload, envelope_id)
            return 200, ack_text(ack.payload)

        return again
    headers = {"Content-Type": ctype, **sign(body, app.sender.secret)}

    async def one() -> tuple[int, str]:
        async with session.post(app.sender.url, data=body, headers=headers) as resp:
            return resp.status, await resp.text()

    return one


async def _send_copies(app, body: bytes, ctype: str = FORM, copies: int = 2, concurrent: bool = False):
    """The same delivery ``copies`` times (``_copier``)."""
    async with aiohttp.ClientSession() as s:
        one = _copier(app, s, body, ctype)
        if concurrent:
            return await asyncio.gather(*(one() for _ in range(copies)))
        return [await one() for _ in range(copies)]


def _actions(entries: list[dict], action: str) -> list[dict]:
    return [e for e in entries if e["action"] == action]


@pytest.mark.parametrize("mode", MODES)
async def test_a_replayed_declare_opens_one_incident(app):
    body = slash_command_body("declare GPU hang --sev 2", user_id=IC, response_url=app.slack.response_url("d"))
    (s1, t1), (s2, t2) = await _send_copies(app, body)
    assert (s1, s2) == (200, 200) and t1 == t2  # the same ack: the replay is caught after it
    await app.drain()
    assert await repo(app.services).get("INC-2") is None
    assert len(app.slack.calls_to("conversations.create")) == 1
    assert len(_actions(await audit_entries(app), "command.declare")) == 1
    replies = sorted(r["text"] for r in app.slack.responses_for("d"))
    assert len(replies) == 2 and replies[0] == ALREADY and replies[1].startswith("Declared INC-1"), replies


@pytest.mark.parametrize("mode", MODES)
async def test_many_copies_at_once_still_run_once(app):
    body = slash_command_body("declare GPU hang --sev 2", user_id=IC, response_url=app.slack.response_url("d"))
    results = await _send_copies(app, body, copies=12, concurrent=True)
    assert [s for s, _ in results] == [200] * 12
    await app.drain()
    assert [r["text"] for r in app.slack.responses_for("d")].count(ALREADY) == 11
    assert await repo(app.services).get("INC-2") is None
    assert len(_actions(await audit_entries(app), "command.declare")) == 1


@pytest.mark.parametrize("mode", MODES)
async def test_the_same_command_typed_again_is_not_a_replay(app):
    """Slack gives every invocation its own trigger_id: typing it twice runs it twice."""
    await app.declare(TITLE, sev=3, user=IC)
    out = await app.run("declare GPU hang again --sev 3", user=IC)
    assert out.startswith("Declared INC-2"), out


@pytest.mark.parametrize("mode", MODES)
async def test_a_replayed_button_press_runs_once(app):
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    await app.run(f"handoff ic <@{CAROL}>", user=IC, channel=ch)
    body = block_actions_body("handoff.accept", "INC-1/HO-1", CAROL, ch, response_url=app.slack.response_url("a"))
    (s1, _), (s2, t2) = await _send_copies(app, body)
    assert (s1, s2, t2) == (200, 200, "")
    assert await app.reply("a") == "You are now Incident Commander in INC-1."
    await app.drain()
    assert [e["detail"]["result"] for e in _actions(await audit_entries(app), "command.accept")] == ["ok"]
    assert len(app.slack.responses_for("a")) == 1


@pytest.mark.parametrize("mode", MODES)
async def test_a_replayed_form_submission_is_applied_once(app):
    await app.declare(TITLE, sev=3, user=IC)
    body = view_submission_body("cadence.update", IC, UPDATE_VALUES, private_metadata="INC-1")
    (s1, t1), (s2, t2) = await _send_copies(app, body)
    assert (s1, t1, s2, t2) == (200, "", 200, "")
    await app.drain()
    assert (await app.incident("INC-1")).last_update_text == "Chat API: recovering"
    assert len(_actions(await audit_entries(app, "INC-1"), "command.update")) == 1


@pytest.mark.parametrize("mode", MODES)
async def test_an_event_replayed_byte_for_byte_is_dropped_but_slacks_retry_is_not(app):
    inc = await app.declare(TITLE, sev=2, cells=())
    body = event_body(_msg(inc.channel_id, "key: AKIAIOSFODNN7EXAMPLE"), "EvReplay")
    kill_at_post(app, ":warning:", landed=False)  # the first delivery's processing dies
    async with aiohttp.ClientSession() as s:
        again = _copier(app, s, body, JSON)
        assert (await again())[0] == 200
        await app.drain()
        app.clock.advance(LEASE + 1)  # the dead delivery's claim on the event id has lapsed
        assert (await again())[0] == 200  # the same delivery again
    await app.drain()
    assert _warnings(app, inc.channel_id) == []  # the replay did not run
    # Slack's retry of the same event: over HTTP the same body under a later timestamp, over
    # Socket Mode a new envelope with retry_attempt 1 (the sender sends it as each does).
    headers = {"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "timeout"}
    status, _, _ = await app.sender.post(body, JSON, timestamp=int(time.time()) + 60, extra_headers=headers)
    assert status == 200
    await app.drain()
    assert len(_warnings(app, inc.channel_id)) == 1


@pytest.mark.parametrize("mode", MODES)
async def test_the_replay_mark_lasts_as_long_as_a_signature_can_be_valid(app):
    await app.run("help", user=IC)
    [key] = await app.services.redis.keys(Keys.inbound("*"))
    assert 300 < await app.services.redis.ttl(key) <= 600


@pytest.fixture
async def storeless(slack, clock):
    """The app, with nothing listening where its Redis should be."""
    running = await start_app(slack, f"redis://127.0.0.1:{free_port()}/0", clock)
    yield running
    await running.runner.cleanup()


async def test_without_the_store_a_request_still_gets_the_executors_answer(storeless, capsys):
    """The replay check cannot run, so the request goes on: every effect needs the same store,
    and the executor says it cannot reach it (nothing changed)."""
    key = await storeless.command("declare GPU hang --sev 2", user=IC, channel="C_INC")
    out = await storeless.reply(key, timeout=15)
    assert out.startswith("Firebreak can't reach its store"), out
    assert "replay_check_unavailable" in capsys.readouterr().out
    assert storeless.slack.calls_to("conversations.create") == []
