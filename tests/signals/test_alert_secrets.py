"""Alertmanager's text is redacted, not refused: a token in an annotation or a label never
reaches the incident, the chat (incident channel, card, channel name, security channel) or the
audit log; the page still opens its incident (issue 24)."""

from __future__ import annotations

from bot.signals.store import store as signals_store
from tests.support.core import nowhere
from tests.support.harness import dump
from tests.support.signals import CELL_A, incidents, payload, post, settle, summaries, texts, wire

SLACK = "xoxb-2417-1234567890-AbCdEfGhIjKlMnOp"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"


async def test_a_token_in_an_alert_annotation_or_label_is_redacted_everywhere(app):
    alert = wire(
        "CellTTFTBurnFast",
        summary=f"TTFT burn; debug with curl -H 'Authorization: {SLACK}'",
        labels={"runbook_token": JWT},
    )
    status, _ = await post(app, payload([alert], summary=f"Chat TTFT burning ({SLACK})"))
    assert status == 200
    [inc] = await settle(app, lambda: incidents(app))
    [shown] = await settle(app, lambda: _nonempty(summaries(app, inc.channel_id)))
    assert inc.cells == [CELL_A]
    assert "[redacted Slack token]" in inc.title
    [record] = (await signals_store(app.services).alert_records(inc.id)).values()
    assert record.summary == "TTFT burn; debug with curl -H 'Authorization: [redacted Slack token]'"
    assert record.labels["runbook_token"] == "[redacted JWT]"
    assert SLACK not in shown
    await nowhere(app, SLACK)  # the delivery's body is dropped once handled
    await nowhere(app, JWT)


async def test_a_token_in_a_security_alert_never_reaches_the_security_channel(app):
    alert = wire("ModelExfilSuspected", category="security", summary=f"weights pulled with {SLACK}")
    status, _ = await post(app, payload([alert]))
    assert status == 200
    [inc] = await settle(app, lambda: incidents(app))
    posted = await settle(app, lambda: _nonempty(texts(app, app.security)))
    assert SLACK not in dump(posted)
    await nowhere(app, SLACK)
    assert inc.sev == 1


async def _nonempty(xs: list[str]) -> list[str]:
    return xs
