"""A secret typed into an update is refused by kind, never posted, stored or audited."""

from __future__ import annotations

import json

import pytest

from tests.support.comms import TITLE
from tests.support.harness import audit_entries

HF = "hf_" + "abcdefghijklmnopqrstuvwxyzABCDEF12"  # a policy pattern (policies/comms.yaml)
SLACK = "xoxb-2417-1234567890-AbCdEfGhIjKlMnOp"  # a built-in pattern


@pytest.mark.stakeholders
@pytest.mark.parametrize("secret, kind", [(HF, "Hugging Face token"), (SLACK, "Slack token")])
async def test_update_with_a_secret_is_refused_naming_the_kind_and_never_stored(app, secret, kind):
    inc = await app.declare(TITLE, sev=2, cells=())
    posts_before = len(app.slack.calls_to("chat.postMessage"))
    out = json.loads(
        await app.run(f"update Chat API, us-east: fixed by rotating {secret} at 03:20", channel=inc.channel_id)
    )["text"]
    assert out.startswith(f"That update contains a {kind}; nothing was stored."), out
    assert secret not in out
    assert len(app.slack.calls_to("chat.postMessage")) == posts_before
    assert app.slack.messages(app.stakeholders) == []
    after = await app.incident(inc.id)
    assert after.last_update_text is None and after.next_update_due == inc.next_update_due
    # Refused as it was parsed: an invalid command, never an update.
    assert not [e for e in await audit_entries(app, inc.id) if e["action"] == "command.update"]
    [e] = [e for e in await audit_entries(app, inc.id) if e["action"] == "command.invalid"]
    assert e["detail"]["reason"] == out
    assert e["detail"]["text"] == f"update Chat API, us-east: fixed by rotating [redacted {kind}] at 03:20"
    # Nowhere in Redis: not the audit log, not the incident.
    for key in await app.services.redis.keys("*"):
        kind_of = await app.services.redis.type(key)
        values = {
            "string": app.services.redis.get,
            "list": lambda k: app.services.redis.lrange(k, 0, -1),
            "hash": app.services.redis.hgetall,
        }.get(kind_of)
        if values is not None:
            assert secret not in json.dumps(await values(key)), key


async def test_a_secret_from_someone_who_may_not_update_is_refused_the_same_way(app):
    # Checked before the policy check: whoever typed it, the secret is refused and kept nowhere.
    inc = await app.declare(TITLE, sev=2, cells=())
    out = await app.run(f"update fixed with {HF}", user="U_NOT_COMMS", channel=inc.channel_id)
    assert "That update contains a Hugging Face token; nothing was stored." in out
    [e] = [e for e in await audit_entries(app, inc.id) if e["action"] in ("command.update", "command.invalid")]
    assert e["action"] == "command.invalid"
    assert HF not in json.dumps(e) and "[redacted Hugging Face token]" in e["detail"]["text"]
