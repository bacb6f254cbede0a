"""`declare --private` with the scopes the app's manifest asks for, as a real workspace grants them:
the private channel is made, its people invited, the card posted and pinned, read back and archived.
Without groups:write (the manifest before issue 33) Slack refuses, and so does the declare."""

from __future__ import annotations

from fbworld.slack.scopes import manifest_scopes
from tests.support.core import IC
from tests.support.workspace import GROUPS


async def test_the_tests_slack_grants_exactly_the_manifest_scopes(slack):
    assert slack.scopes == tuple(manifest_scopes())


async def test_declare_private_works_with_the_manifest_scopes(app):
    out = await app.run("declare Suspected token leak --sev 2 --cell us-east-3 --private", user=IC)
    assert out.startswith("Declared INC-1 (SEV2)") and "could not" not in out, out
    inc = await app.incident("INC-1")
    ch = app.slack.channel(inc.channel_id)
    assert inc.private and ch.is_private and set(ch.members) == {"UBOT", IC, *GROUPS["ml-security"]}
    assert ch.pins == [inc.card_ts]
    # A private channel's history is read with groups:history (the dedupe of Firebreak's own posts).
    assert await app.services.chat.posted(inc.channel_id, "no-such-mark", 0.0) is False
    # Resolving and archiving it: groups:write again.
    await app.services.chat.archive(inc.channel_id)
    assert ch.archived


async def test_without_groups_write_slack_refuses_the_private_channel_and_the_declare_says_so(app):
    app.slack.scopes = tuple(s for s in manifest_scopes() if s != "groups:write")
    out = await app.run("declare Suspected token leak --sev 2 --cell us-east-3 --private", user=IC)
    assert out == "Slack refused to create the channel (missing_scope); no incident was opened.", out
    assert not [c for c in app.slack.state.channels.values() if c.is_private]
    # A public declare needs only what it always did.
    assert (await app.run("declare Chat latency --sev 2 --cell us-east-3", user=IC)).startswith("Declared INC-")
