"""usergroups.list and usergroups.users.list as Slack answers them (through slack_sdk's own
client): arguments, disabled groups, errors, the usergroups:read scope, membership changes."""

from __future__ import annotations

import pytest
import pytest_asyncio
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from fbworld.slack import FakeSlack


@pytest_asyncio.fixture
async def fake():
    f = FakeSlack()
    f.add_usergroup("ml-oncall", ["U1", "U2"], name="ML on-call")
    f.add_usergroup("ml-security", ["U3"])
    await f.start()
    yield f
    await f.stop()


def client(fake: FakeSlack, token: str = "xoxb-test") -> AsyncWebClient:
    return AsyncWebClient(token=token, base_url=fake.api_url)


async def api_error(coro) -> dict:
    with pytest.raises(SlackApiError) as exc:
        await coro
    return dict(exc.value.response.data)


@pytest.mark.asyncio
async def test_list_gives_the_groups_by_handle_with_users_and_count_only_when_asked(fake):
    got = await client(fake).usergroups_list()
    assert got["ok"] and [g["handle"] for g in got["usergroups"]] == ["ml-oncall", "ml-security"]
    first = got["usergroups"][0]
    assert first["id"].startswith("S") and first["name"] == "ML on-call" and first["date_delete"] == 0
    assert "users" not in first and "user_count" not in first
    full = await client(fake).usergroups_list(include_users=True, include_count=True)
    assert full["usergroups"][0]["users"] == ["U1", "U2"] and full["usergroups"][0]["user_count"] == 2


@pytest.mark.asyncio
async def test_users_list_takes_an_id_and_follows_membership_changes(fake):
    gid = fake.usergroup("ml-oncall").id
    assert (await client(fake).usergroups_users_list(usergroup=gid))["users"] == ["U1", "U2"]
    fake.set_usergroup_users("ml-oncall", ["U2", "U9"])
    assert (await client(fake).usergroups_users_list(usergroup=gid))["users"] == ["U2", "U9"]
    # A handle is not an id: Slack knows no such subteam.
    assert (await api_error(client(fake).usergroups_users_list(usergroup="ml-oncall")))["error"] == "no_such_subteam"
    assert (await api_error(client(fake).api_call("usergroups.users.list")))["error"] == "invalid_arguments"


@pytest.mark.asyncio
async def test_a_disabled_group_is_listed_only_with_include_disabled(fake):
    gid = fake.usergroup("ml-security").id
    fake.disable_usergroup("ml-security")
    assert [g["handle"] for g in (await client(fake).usergroups_list())["usergroups"]] == ["ml-oncall"]
    listed = await client(fake).usergroups_list(include_disabled=True)
    [sec] = [g for g in listed["usergroups"] if g["handle"] == "ml-security"]
    assert sec["date_delete"] > 0 and sec["deleted_by"]
    err = await api_error(client(fake).usergroups_users_list(usergroup=gid))
    assert err["error"] == "no_such_subteam"
    assert (await client(fake).usergroups_users_list(usergroup=gid, include_disabled=True))["users"] == ["U3"]
    fake.enable_usergroup("ml-security")
    assert (await client(fake).usergroups_users_list(usergroup=gid))["users"] == ["U3"]


@pytest.mark.asyncio
async def test_auth_and_the_usergroups_read_scope_are_checked():
    async with FakeSlack(token="xoxb-right", scopes=["chat:write", "commands"]) as fake:
        assert (await api_error(client(fake, "xoxb-wrong").usergroups_list()))["error"] == "invalid_auth"
        err = await api_error(client(fake, "xoxb-right").usergroups_list())
        assert err["error"] == "missing_scope" and err["needed"] == "usergroups:read"
        assert err["provided"] == "chat:write,commands"
        # auth.test needs no scope (Slack's reference: none).
        assert (await client(fake, "xoxb-right").auth_test())["ok"]


@pytest.mark.asyncio
async def test_the_fault_layer_fails_or_delays_a_usergroups_method(fake):
    fake.fail_next("usergroups.users.list", "fatal_error")
    gid = fake.usergroup("ml-oncall").id
    assert (await api_error(client(fake).usergroups_users_list(usergroup=gid)))["error"] == "fatal_error"
    assert (await client(fake).usergroups_users_list(usergroup=gid))["users"] == ["U1", "U2"]
