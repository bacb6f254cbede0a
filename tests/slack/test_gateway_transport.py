"""Slack unreachable is a ChatError like a refusal (the chat port's promise), for writes as for reads:
callers that handle a refusal (a security alert's fallback, post_once releasing its claim) are not
bypassed by a transport exception."""

from __future__ import annotations

import pytest

from bot.chat.port import ChatError
from bot.slack.gateway import SlackGateway, make_client
from tests.support.ports import free_port


@pytest.mark.parametrize("call", ["post", "create_channel", "user_groups"])
async def test_slack_unreachable_is_a_chat_error_for_every_call(call):
    # Nothing listens on this port: connection refused, after slack_sdk's own retries of it.
    gw = SlackGateway(make_client("xoxb-test", f"http://127.0.0.1:{free_port()}/api/"))
    try:
        with pytest.raises(ChatError) as e:
            if call == "post":
                await gw.post("C123", "hello")
            elif call == "create_channel":
                await gw.create_channel("inc-20261207-1-x", private=True)
            else:
                await gw.user_groups()
        assert e.value.error == "unreachable"
    finally:
        await gw.close()
