"""The emulator holds the bot token to its scopes as Slack does: each method the scope Slack's
reference gives for that conversation's kind (fbworld.slack.scopes), refused with Slack's own
missing_scope answer and nothing done; by default the token has the app manifest's scopes."""

from __future__ import annotations

import itertools
from typing import Any

import aiohttp
import pytest

from fbworld.slack import FakeSlack
from fbworld.slack.scopes import ALL_SCOPES, ANY, IM, METHOD_SCOPES, MPIM, PRIVATE, PUBLIC, manifest_scopes

TOKEN = "xoxb-scopes"
_n = itertools.count()


async def call(fake: FakeSlack, method: str, **args: Any) -> tuple[int, dict[str, Any]]:
    """One Web API call as a form POST with the bot token in the header (what slack_sdk sends)."""
    form = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in args.items()}
    async with (
        aiohttp.ClientSession() as s,
        s.post(f"{fake.api_url}{method}", data=form, headers={"Authorization": f"Bearer {TOKEN}"}) as resp,
    ):
        return resp.status, await resp.json()


def target(fake: FakeSlack, method: str, kind: str) -> dict[str, Any]:
    """Arguments that make ``method`` act on a conversation of ``kind`` (the bot a member)."""
    if method == "conversations.create":
        return {"name": f"made-{next(_n)}", "is_private": kind == PRIVATE}
    if method == "conversations.list":
        return {"types": {PUBLIC: "public_channel", PRIVATE: "private_channel", IM: "im"}[kind]}
    if kind == IM:
        return {"channel": fake.state.dm_channel("U42").id}
    return {"channel": fake.add_channel(f"{kind}-{next(_n)}", members=["U1"], is_private=kind == PRIVATE)}


# Every (method, kind, scope) the table has; mpim conversations are not modelled by the emulator.
CASES = [
    (method, kind, scope)
    for method, needs in METHOD_SCOPES.items()
    for kind, scope in needs.items()
    if kind != MPIM and not (kind == IM and method == "conversations.create")
]


def test_the_table_covers_exactly_the_methods_the_emulator_serves():
    served = set(FakeSlack(scopes=())._handlers)
    assert served == set(METHOD_SCOPES), served ^ set(METHOD_SCOPES)


def test_the_token_has_the_manifest_scopes_unless_told_otherwise():
    granted = manifest_scopes()
    assert FakeSlack().scopes == tuple(granted) and "groups:write" in granted
    assert FakeSlack(scopes=["chat:write", "commands"]).scopes == ("chat:write", "commands")


@pytest.mark.parametrize(("method", "kind", "scope"), CASES, ids=[f"{m}-{k}" for m, k, _ in CASES])
async def test_each_method_is_refused_without_its_scope_as_slack_answers(method, kind, scope):
    granted = sorted(ALL_SCOPES - {scope})
    async with FakeSlack(token=TOKEN, scopes=granted) as fake:
        args = target(fake, method, PUBLIC if kind == ANY else kind)
        before = (len(fake.state.channels), sum(map(len, fake.state.messages.values())), len(fake.state.files))
        status, body = await call(fake, method, **args)
        assert status == 200
        assert body == {"ok": False, "error": "missing_scope", "needed": scope, "provided": ",".join(granted)}
        after = (len(fake.state.channels), sum(map(len, fake.state.messages.values())), len(fake.state.files))
        assert after == before  # refused: nothing made, posted or reserved
    # With the scope the same call gets past the check (whatever the method then says of its arguments).
    async with FakeSlack(token=TOKEN, scopes=ALL_SCOPES) as fake:
        _, body = await call(fake, method, **target(fake, method, PUBLIC if kind == ANY else kind))
        assert body.get("error") != "missing_scope", body


async def test_public_and_private_channels_need_their_own_scopes():
    """channels:* covers public channels only, groups:* private ones only (the bug issue 33 found:
    a private incident channel with the public scopes alone)."""
    public_only = ["channels:manage", "channels:history", "chat:write"]
    async with FakeSlack(token=TOKEN, scopes=public_only) as fake:
        _, made = await call(fake, "conversations.create", name="inc-public")
        assert made["ok"] and made["channel"]["is_private"] is False
        _, refused = await call(fake, "conversations.create", name="inc-sec", is_private=True)
        assert (refused["error"], refused["needed"]) == ("missing_scope", "groups:write")
        assert fake.state.find_by_name("inc-sec") is None
        private = fake.add_channel("sec", members=["U1"], is_private=True)
        for method, needed in (
            ("conversations.invite", "groups:write"),
            ("conversations.history", "groups:history"),
            ("conversations.archive", "groups:write"),
        ):
            _, body = await call(fake, method, channel=private, users="U2")
            assert (body["error"], body["needed"]) == ("missing_scope", needed), method
        _, hist = await call(fake, "conversations.history", channel=made["channel"]["id"])
        assert hist["ok"]
        # A private channel the bot is not in is not there for it, scope or not.
        hidden = fake.add_channel("hr", members=["U3"], bot_member=False, is_private=True)
        _, body = await call(fake, "conversations.history", channel=hidden)
        assert body["error"] == "channel_not_found"
    async with FakeSlack(token=TOKEN, scopes=["groups:write", "groups:history"]) as fake:
        _, body = await call(fake, "conversations.create", name="inc-public")
        assert (body["error"], body["needed"]) == ("missing_scope", "channels:manage")
        _, made = await call(fake, "conversations.create", name="inc-sec", is_private=True)
        assert made["ok"] and made["channel"]["is_private"] is True


async def test_listing_needs_the_read_scope_of_each_type_asked_for():
    async with FakeSlack(token=TOKEN, scopes=["channels:read"]) as fake:
        _, ok = await call(fake, "conversations.list")
        assert ok["ok"]
        _, body = await call(fake, "conversations.list", types="public_channel,private_channel")
        assert (body["error"], body["needed"]) == ("missing_scope", "groups:read")


async def test_a_token_with_none_of_a_methods_scopes_is_told_the_first():
    async with FakeSlack(token=TOKEN, scopes=["chat:write"]) as fake:
        _, body = await call(fake, "conversations.history", channel="CNOSUCH")
        assert body == {"ok": False, "error": "missing_scope", "needed": "channels:history", "provided": "chat:write"}


async def test_methods_without_scopes_and_lookup_by_email():
    async with FakeSlack(token=TOKEN, scopes=[]) as fake:
        _, auth = await call(fake, "auth.test")
        assert auth["ok"] and auth["user_id"] == "UBOT"
        _, body = await call(fake, "users.lookupByEmail", email="alice@example.com")
        assert body == {"ok": False, "error": "missing_scope", "needed": "users:read.email", "provided": ""}
    async with FakeSlack(token=TOKEN, scopes=["users:read", "users:read.email"]) as fake:
        fake.add_user("U9", name="alice", real_name="Alice A")
        _, found = await call(fake, "users.lookupByEmail", email="Alice@example.com")
        assert found["ok"] and found["user"]["id"] == "U9"
        _, missing = await call(fake, "users.lookupByEmail", email="bob@example.com")
        assert missing == {"ok": False, "error": "users_not_found"}
