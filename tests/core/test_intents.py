"""A command's effects and its audit entry are one recoverable unit (issue 9, item 5).

The dispatcher writes the request's intent before the handler runs; the audit entry closes it in
the same script. Here the process really loses its store part-way (a private redis-server with
an fsynced AOF is SIGKILLed at a chosen Slack call, then restarted with its data), or dies at a
chosen point (the task raises CancelledError, as a killed one does). Then the running app's
scheduler sweep (no restart) turns the orphaned intent into the request's `interrupted` entry and
DMs the person; a declare's channel that no incident claims is archived.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.core import intent_store, intents
from bot.incidents.store import repo
from tests.support.core import IC, OPS, TITLE
from tests.support.harness import T0, audit_entries
from tests.support.killed_redis import aof_redis, kill, restart
from tests.support.messages import channel_texts
from tests.support.redis_server import RedisServer

STALE = intents.STALE_AFTER_S


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    yield from aof_redis(tmp_path)


@pytest.fixture
def redis_url(own_redis: RedisServer) -> str:  # the `app` fixture runs against this test's own Redis
    return own_redis.url


def after_post(app, match: str, then) -> None:
    """Run ``then()`` right after the next chat.postMessage whose text contains ``match`` lands."""
    real = app.services.chat.post

    async def post(channel, text, *a, **kw):
        ts = await real(channel, text, *a, **kw)
        if match in text:
            app.services.chat.post = real
            await then()
        return ts

    app.services.chat.post = post


async def start_loop_hooks(app) -> None:
    """What a scheduler loop runs when it starts (the intent sweep's first run schedules the next)."""
    for hook in app.services.scheduler.startup:
        await hook()


def ref(reply: str) -> str:
    found = re.search(r"ref `([0-9a-f]{12})`", reply)
    assert found, reply
    return found.group(1)


def dms(app, user: str) -> list[str]:
    return channel_texts(app, f"D{user}")


async def entries_for(app, request_id: str) -> list[dict]:
    return [e for e in await audit_entries(app) if e["request_id"] == request_id and e["action"].startswith("command.")]


async def _sweep_later(app) -> None:
    """Time passes past the staleness; the running app's sweep job fires (ticks, no restart)."""
    app.clock.advance(STALE + 1)
    await app.tick()


async def test_a_role_whose_audit_entry_was_lost_is_back_filled_and_the_ic_told(app, own_redis):
    await start_loop_hooks(app)  # the running process: its sweep job is scheduled
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    after_post(app, "is now Ops lead", lambda: asyncio.to_thread(kill, own_redis))
    key = await app.command(f"role ops <@{OPS}>", user=IC, channel=ch)
    out = await app.reply(key, timeout=30)
    assert out.startswith(f"<@{OPS}> is now Ops lead in INC-1."), out
    assert "(Firebreak lost its store before it updated the incident card)" in out  # names what is missing
    assert "could not write this to the audit log" in out and "Traceback" not in out
    rid = ref(out)

    await restart(own_redis, app.services.redis)
    assert (await app.incident("INC-1")).holder("ops") == OPS  # applied
    assert await entries_for(app, rid) == []  # and not audited: the intent is all there is
    [open_] = await intent_store.store(app.services).open_ones()
    assert (open_.request_id, open_.command, open_.args) == (rid, "role", {"role": "ops", "user": OPS})

    await app.tick()  # a sweep now leaves it: it may still be running somewhere
    assert await entries_for(app, rid) == []
    await _sweep_later(app)

    [e] = await entries_for(app, rid)
    assert (e["action"], e["actor"], e["incident"]) == ("command.role", IC, "INC-1")
    assert e["detail"]["result"] == "interrupted" and e["detail"]["args"] == {"role": "ops", "user": OPS}
    assert e["detail"]["source"] == "slash"
    [told] = dms(app, IC)
    assert told.startswith(f"Your `role` request in INC-1 (ref `{rid}`, 03:10 UTC) was interrupted"), told
    assert await intent_store.store(app.services).open_ones() == []
    await _sweep_later(app)
    await start_loop_hooks(app)  # a restart finds nothing more to repair
    assert len(await entries_for(app, rid)) == 1 and len(dms(app, IC)) == 1
    assert await app.services.audit.verify() is None


@pytest.mark.stakeholders
async def test_an_update_whose_audit_entry_was_lost_is_back_filled(app, own_redis):
    await start_loop_hooks(app)
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    after_post(app, ":mega: *Update*", lambda: asyncio.to_thread(kill, own_redis))
    key = await app.command("update Chat API: us-east degraded, rolling back", user=IC, channel=ch)
    out = await app.reply(key, timeout=30)
    assert out.startswith("Update posted."), out
    assert "(Firebreak lost its store before it updated the incident card)" in out
    rid = ref(out)
    await restart(own_redis, app.services.redis)
    await _sweep_later(app)
    [e] = await entries_for(app, rid)
    assert e["action"] == "command.update" and e["detail"]["result"] == "interrupted"
    assert e["detail"]["args"] == {"text": "Chat API: us-east degraded, rolling back"}


async def test_a_declare_whose_process_died_before_the_save_has_its_channel_archived(app, monkeypatch):
    """The process dies between conversations.create (its id already in the intent) and saving the
    incident: the sweep archives the channel with a note, and the number is not reused."""
    await start_loop_hooks(app)
    store = intent_store.store(app.services)
    real = store.note

    async def noted_then_killed(request_id, **notes):
        await real(request_id, **notes)
        raise asyncio.CancelledError()  # what the killed task sees: nothing after this runs

    monkeypatch.setattr(store, "note", noted_then_killed)
    await app.command("declare Inference 5xx --sev 2", user=IC)
    await app.drain()
    monkeypatch.undo()
    [created] = app.slack.calls_to("conversations.create")
    channel = next(c.id for c in app.slack.state.channels.values() if c.name == created.args["name"])
    assert await repo(app.services).by_channel(channel) is None and await repo(app.services).get("INC-1") is None

    await _sweep_later(app)
    assert app.slack.channel(channel).archived
    note = app.slack.messages(channel)[-2]["text"]
    assert note.startswith(":file_cabinet: This channel was created for INC-1 (Inference 5xx), declared by <@UIC>")
    [e] = [e for e in await audit_entries(app) if e["action"] == "command.declare"]
    assert e["detail"]["result"] == "interrupted" and e["detail"]["archived"] is True
    assert e["detail"]["made"]["channel"] == channel and e["incident"] is None
    [told] = dms(app, IC)
    assert f"INC-1 was never saved, so its channel <#{channel}> was archived" in told, told
    out = await app.run("declare Inference 5xx --sev 2", user=IC)
    assert out.startswith("Declared INC-2"), out


async def test_a_declare_that_lost_its_store_right_after_the_channel_archives_it_at_once(app, own_redis):
    after = app.services.chat.create_channel

    async def created_then_store_dies(name, private=False):
        made = await after(name, private)
        await asyncio.to_thread(kill, own_redis)
        return made

    app.services.chat.create_channel = created_then_store_dies
    key = await app.command("declare Inference 5xx --sev 2", user=IC)
    out = await app.reply(key, timeout=30)
    [(channel, _)] = [(c.id, c.name) for c in app.slack.state.channels.values() if c.name.startswith("inc-")]
    assert out.startswith(
        "Firebreak lost its store before it saved INC-1, so no incident was opened; "
        f"the channel it had created, <#{channel}>, is archived. Declare again in a minute."
    ), out
    assert app.slack.channel(channel).archived
    await restart(own_redis, app.services.redis)
    assert await repo(app.services).by_channel(channel) is None


async def test_a_declare_that_lost_its_store_after_the_save_says_what_exists_and_is_back_filled(app, own_redis):
    await start_loop_hooks(app)
    after_post(app, "SEV2", lambda: asyncio.to_thread(kill, own_redis))  # the card lands, its ts is never saved
    key = await app.command("declare Inference 5xx --sev 2", user=IC)
    out = await app.reply(key, timeout=30)
    assert out.startswith("INC-1 (SEV2) is open in <#"), out
    assert "Firebreak lost its store before it recorded the card" in out
    rid = ref(out)
    await restart(own_redis, app.services.redis)
    inc = await app.incident("INC-1")
    await _sweep_later(app)
    [e] = await entries_for(app, rid)
    assert (e["action"], e["incident"], e["detail"]["result"]) == ("command.declare", "INC-1", "interrupted")
    assert not app.slack.channel(inc.channel_id).archived
    [told] = dms(app, IC)
    assert f"INC-1 is open in <#{inc.channel_id}> and you are IC" in told


async def test_finished_requests_leave_no_intent(app):
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    await app.run(f"role ops <@{OPS}>", user=IC, channel=ch)
    await app.run("status", user=IC, channel=ch)
    await app.run("sev 9 nope", user=IC, channel=ch)  # a usage error
    await app.run("role ops <@UX>", user="UNOBODY", channel=ch)  # refused by policy
    assert await intent_store.store(app.services).open_ones() == []
    app.clock.set(T0 + STALE + 1)
    assert await intents.repair(app.services) == 0


async def test_a_secret_in_the_arguments_is_refused_before_any_intent_is_stored(app, monkeypatch):
    """An intent is stored before the handler checks anything, so a secret must never reach it: the
    command is refused when it is parsed (bot/core/request.py), and no intent and no command entry
    holds the secret; the refusal's audit entry holds it redacted."""
    await start_loop_hooks(app)
    noted: list[str] = []
    store = intent_store.store(app.services)
    real = store.note

    async def counting(request_id, **notes):
        noted.append(request_id)
        await real(request_id, **notes)

    monkeypatch.setattr(store, "note", counting)
    out = await app.run("declare leaked AKIAIOSFODNN7EXAMPLE in logs --sev 3", user=IC)
    await app.drain()
    assert "AWS access key" in out and "nothing was stored" in out
    assert noted == [] and await app.services.redis.hgetall("fb:{audit}:intents") == {}
    entries = await audit_entries(app)
    assert not [e for e in entries if e["action"] == "command.declare"]
    [e] = [e for e in entries if e["action"] == "command.invalid"]
    assert "[redacted AWS access key]" in e["detail"]["text"]
    assert "AKIAIOSFODNN7EXAMPLE" not in str(entries)
