"""A seat's power comes from who you are (docs/security-model.md, policies/roles.yaml): Slack user groups and
the on-call, read through the real Web API calls (usergroups.list / usergroups.users.list) from the
Slack emulator, checked at seating and again at every pull. The kube emulator shows what reached a
cluster: nothing, whenever the answer is no."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.core.eligibility import FAILED_MEMORY_S
from bot.policy import PolicyError
from tests.support.harness import audit_entries, start_app
from tests.support.lever_fixtures import write_policy
from tests.support.levers import SEC, patches, say
from tests.support.workspace import GROUPS, OUTSIDER

NARROW = "lever killswitch toolgw/toolgw-flags --cell us-east-3 tenant=default level=none"
TTL = 60.0  # the cache window these tests run with (FIREBREAK_GROUP_CACHE_SECONDS)


@pytest.fixture
def app_settings() -> dict:
    return {"firebreak_group_cache_seconds": TTL}


def group_calls(app) -> list:
    return [c for c in app.slack.calls if c.method.startswith("usergroups.")]


async def test_an_ineligible_declarer_cannot_seat_themselves_into_power_and_pulls_nothing(app, cells):
    # Anyone may declare, and the declarer is IC: they coordinate, but power needs the groups.
    inc = await app.declare(user=OUTSIDER)
    ch = inc.channel_id
    out = await app.run(f"role security <@{OUTSIDER}>", user=OUTSIDER, channel=ch)
    assert out == (
        f"<@{OUTSIDER}> isn't in @ml-security, which the Security lead seat needs: ask an admin of "
        "@ml-security to add them; nothing changed."
    ), out
    out = await app.run(f"role ops <@{OUTSIDER}>", user=OUTSIDER, channel=ch)
    assert "isn't in @ml-oncall, which the Ops lead seat needs: ask an admin of @ml-oncall" in out, out
    after = await app.incident(inc.id)
    assert after.holder("security") is None and after.holder("ops") is None

    out = await say(app, NARROW, OUTSIDER, ch)
    assert "not pulled, nothing changed" in out.lower() and "Only the Security lead" in out, out
    assert patches(cells.east3) == [] and patches(cells.east1) == []
    refused = [e for e in await audit_entries(app, inc.id) if e["action"] == "command.role"]
    assert [(e["detail"]["result"], e["detail"]["ineligible"], e["detail"]["groups"]) for e in refused] == [
        ("refused", OUTSIDER, ["@ml-security"]),
        ("refused", OUTSIDER, ["@ml-oncall"]),
    ]
    # The rest of the IC's job goes on: coordination needs no group.
    assert "is now Comms lead" in await app.run(f"role comms <@{OUTSIDER}>", user=OUTSIDER, channel=ch)
    assert "SEV1" in await app.run("sev 1 tenant data at risk", user=OUTSIDER, channel=ch)


async def test_the_ic_cannot_seat_or_hand_a_seat_to_an_ineligible_person(app, cells):
    inc = await app.declare(roles={"security": SEC})
    ch = inc.channel_id
    out = await app.run(f"role ops <@{OUTSIDER}>", user="U_IC", channel=ch)
    assert out.startswith(f"<@{OUTSIDER}> isn't in @ml-oncall, which the Ops lead seat needs"), out
    out = await app.run(f"handoff security <@{OUTSIDER}>", user=SEC, channel=ch)
    assert f"<@{OUTSIDER}> isn't in @ml-security" in out and out.endswith("nothing changed."), out
    out = await app.run(f"handoff ic <@{OUTSIDER}>", user="U_IC", channel=ch)
    assert "isn't in @ml-ic or the on-call for us-east-3, which the IC seat needs" in out, out
    inc = await app.incident(inc.id)
    assert inc.holder("ops") is None and inc.holder("security") == SEC and inc.holder("ic") == "U_IC"
    assert not any("Accept" in str(m.get("blocks")) for m in app.slack.messages(ch))  # no handoff posted


async def test_a_group_membership_change_takes_effect_within_the_cache_window(app, cells):
    inc = await app.declare(roles={"security": SEC})
    ch = inc.channel_id
    assert "applied and verified" in await say(app, NARROW, SEC, ch)
    writes = len(patches(cells.east3))
    assert "undone" in await say(app, "undo REQ-1", SEC, ch)
    writes = len(patches(cells.east3))

    # An admin takes SEC out of @ml-security. Within the window the cached membership still holds...
    app.slack.set_usergroup_users("ml-security", [u for u in GROUPS["ml-security"] if u != SEC])
    app.clock.advance(TTL / 2)
    assert "applied and verified" in await say(app, NARROW, SEC, ch)
    assert "undone" in await say(app, "undo REQ-2", SEC, ch)
    writes = len(patches(cells.east3))

    # ...and once it is over, the seat has no power: Slack is asked again and says no.
    app.clock.advance(TTL / 2)
    out = await say(app, NARROW, SEC, ch)
    assert out == (
        f"Not pulled: <@{SEC}> isn't in @ml-security, which the Security lead seat needs: ask an admin of "
        "@ml-security to add them; nothing changed."
    ), out
    assert len(patches(cells.east3)) == writes
    assert (await app.incident(inc.id)).holder("security") == SEC  # the seat stays; its power does not

    # Added back: within a window again, the pull goes through.
    app.slack.set_usergroup_users("ml-security", GROUPS["ml-security"])
    app.clock.advance(TTL)
    assert "applied and verified" in await say(app, NARROW, SEC, ch)


async def test_slack_failing_usergroups_users_list_refuses_the_pull_and_says_why(app, cells):
    inc = await app.declare(roles={"security": SEC})
    ch = inc.channel_id
    app.clock.advance(TTL)  # the membership read at seating is stale: the pull asks Slack
    app.slack.fail_next("usergroups.users.list", "fatal_error")
    out = await say(app, NARROW, SEC, ch)
    assert out == (
        "Not pulled: Slack didn't say who is in @ml-security (fatal_error); levers and approvals are refused "
        "until it answers; nothing changed."
    ), out
    assert patches(cells.east3) == []
    # Everything without power keeps working meanwhile.
    assert "INC-1" in await app.run("status", user=OUTSIDER, channel=ch)
    assert "is now Scribe" in await app.run(f"role scribe <@{OUTSIDER}>", user="U_IC", channel=ch)

    app.clock.advance(FAILED_MEMORY_S)  # Slack answers again: the next pull asks it
    assert "applied and verified" in await say(app, NARROW, SEC, ch)
    [refused] = [e for e in await audit_entries(app, inc.id) if e["detail"].get("reason", "").startswith("Not pulled")]
    assert refused["action"] == "command.lever" and refused["detail"]["result"] == "refused"


async def test_an_eligibility_lookup_that_times_out_answers_with_what_to_do(app, cells):
    inc = await app.declare(roles={"security": SEC})
    app.clock.advance(TTL)
    # Slack answers this call 5 s late: were the check not bounded (1.5 s), it would succeed.
    app.slack.delay_next("usergroups.users.list", 5.0)
    out = await say(app, NARROW, SEC, inc.channel_id)
    assert out == (
        "Not pulled: Slack didn't say who is in @ml-security (timeout); levers and approvals are refused "
        "until it answers; nothing changed."
    ), out
    assert patches(cells.east3) == []
    assert [c.method for c in group_calls(app)][-1] == "usergroups.users.list"


async def test_an_unknown_group_handle_in_the_policy_is_refused_at_start_with_file_and_line(
    slack, redis_url, clock, cells, tmp_path: Path
):
    pol = write_policy(tmp_path)
    (pol / "roles.yaml").write_text('# who may sit where\nic: ["@ml-ic", oncall]\nsecurity: ["@ml-secuirty"]\n')
    with pytest.raises(PolicyError) as got:
        await start_app(slack, redis_url, clock, firebreak_policy_dir=str(pol), kubeconfig=str(cells.kubeconfig))
    assert str(got.value).startswith(
        f"{pol}/roles.yaml:3: security.0: user group @ml-secuirty doesn't exist in this Slack workspace: create it"
    ), got.value


async def test_when_slack_cant_be_asked_at_start_the_app_starts_and_power_fails_closed(
    slack, redis_url, clock, cells, tmp_path: Path
):
    pol = write_policy(tmp_path)
    (pol / "roles.yaml").write_text('security: ["@ml-secuirty"]\n')
    slack.http_error_next("usergroups.list", 503, times=3)  # the first call and slack_sdk's two retries
    app = await start_app(slack, redis_url, clock, firebreak_policy_dir=str(pol), kubeconfig=str(cells.kubeconfig))
    try:
        inc = await app.declare()
        out = await app.run(f"role security <@{SEC}>", user="U_IC", channel=inc.channel_id)
        # Slack answers now, and the refusal names the handle to create.
        assert out == (
            "The Security lead seat needs @ml-secuirty, which doesn't exist in this Slack workspace: create "
            "the user group @ml-secuirty and add the people who may hold the seat; nothing changed."
        ), out
    finally:
        await app.stop()
