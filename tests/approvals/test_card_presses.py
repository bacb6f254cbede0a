"""An approval counts only from the card it was posted as (issue 35 item 8).

A button press names a request by its action_id and value; anyone who can put a copy of the card
somewhere (a message posted with the bot's token, a copy in a DM, another message in the channel)
could otherwise approve from it. Here every press is a signed block_actions request over HTTP, as
Slack sends it, with the container of the message it was pressed on.
"""

from __future__ import annotations

from slack_sdk.web.async_client import AsyncWebClient

from levers.store import lever_store
from tests.support.approvals import buttons, card, grant, request_drain
from tests.support.harness import audit_entries


async def copy_with_the_bots_token(world, message: dict, channel: str) -> tuple[str, str]:
    """What someone holding the bot's token can do: post the card's very blocks elsewhere, as the
    bot (chat.postMessage). The copy's (channel, ts)."""
    token = world.svc.settings.slack_bot_token.get_secret_value()
    client = AsyncWebClient(token=token, base_url=world.slack.api_url)
    got = await client.chat_postMessage(channel=channel, text=message["text"], blocks=message["blocks"])
    return got["channel"], got["ts"]


async def _refused_presses(world) -> list[dict]:
    return [
        e
        for e in await audit_entries(world.app, "INC-1")
        if e["action"] == "command.approve" and e["detail"].get("result") == "refused"
    ]


async def test_a_press_on_another_message_in_the_channel_approves_nothing(world):
    rid = await request_drain(world)
    real = card(world, rid)
    _, copy_ts = await copy_with_the_bots_token(world, real, world.channel)
    assert copy_ts != real["ts"]
    key = await world.app.press("lever.approve", rid, user="U_IC", channel=world.channel, message_ts=copy_ts)
    said = await world.app.reply(key)
    assert "not on the approval card" in said and "nothing changed" in said, said
    assert (await lever_store(world.svc).get(rid)).state == "pending_approval"
    assert world.patches() == []
    [now] = [m for m in world.slack.messages(world.channel) if m["ts"] == real["ts"]]
    assert buttons(now) == ["lever.approve", "lever.deny"]  # the real card: still undecided
    [refused] = await _refused_presses(world)
    assert refused["detail"]["code"] == "elsewhere" and refused["actor"] == "U_IC"


async def test_a_copy_of_the_card_in_a_dm_approves_nothing(world):
    rid = await request_drain(world)
    real = card(world, rid)
    dm, copy_ts = await copy_with_the_bots_token(world, real, world.slack.state.dm_channel("U_IC").id)
    # The same ts in another channel is another message too.
    for channel, ts in ((dm, copy_ts), (dm, real["ts"])):
        key = await world.app.press("lever.approve", rid, user="U_IC", channel=channel, message_ts=ts)
        said = await world.app.reply(key)
        # A DM is no incident's channel: refused before any ballot is looked at.
        assert "works inside an incident channel" in said and "Traceback" not in said, said
    assert (await lever_store(world.svc).get(rid)).state == "pending_approval"
    assert world.patches() == []


async def test_a_deny_from_elsewhere_is_refused_too(world):
    rid = await request_drain(world)
    other = world.slack.user_message(world.channel, "U_IC", "hello")
    key = await world.app.press("lever.deny", rid, user="U_IC", channel=world.channel, message_ts=other)
    assert "not on the approval card" in await world.app.reply(key)
    assert (await lever_store(world.svc).get(rid)).state == "pending_approval"


async def test_a_grant_counts_only_from_its_card(world):
    await world.declare(ops="UOPS")
    bid = await grant(world)
    other = world.slack.user_message(world.channel, "UX", "approve BG pls")
    key = await world.app.press("breakglass.approve", bid, user="U_IC", channel=world.channel, message_ts=other)
    assert "not on the approval card" in await world.app.reply(key)
    b = await world.svc.redis.hget(f"fb:inc:{{INC-1}}:appr:ballot:{bid}", "state")
    assert b == "pending"


async def test_the_confirmation_names_the_lever_and_the_plan_digest(world):
    rid = await request_drain(world)
    digest = (await lever_store(world.svc).get(rid)).digest
    said = await world.press("lever.approve", rid, user="U_IC")  # on the card itself
    assert (await lever_store(world.svc).get(rid)).state == "done", said
    assert "kueue-hold-drain" in said and digest[:12] in said, said
    assert digest not in said  # the short form the card shows, not the whole digest
